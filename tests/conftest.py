"""Shared fixtures."""
import pytest


@pytest.fixture(scope="module")
def torch_two_threads():
    """Real torch runs on the CPU use two threads (the CI machine's cores), restored after."""
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(n)
