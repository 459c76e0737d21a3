"""Shared fixtures: torch's threads; a fake pynvml installed (the live tests); for the planner's
tests (test_ui*.py) the hardware database, a page with no link in the environment, and a
kernel whose loop runs callbacks at once."""
import atexit
import os
import shutil
import sys
import tempfile
import threading
import types

import pytest

# the hwdb parse cache (vramplan/hardware/toml_cache.py) of this test session lives in a
# temporary folder, never in the user's ~/.cache
_HWDB_CACHE = tempfile.mkdtemp(prefix="vramplan-test-hwdb-cache-")
os.environ["VRAMPLAN_HWDB_CACHE"] = _HWDB_CACHE
atexit.register(shutil.rmtree, _HWDB_CACHE, True)


@pytest.fixture(scope="module")
def torch_two_threads():
    """Real torch runs on the CPU use two threads (the CI machine's cores), restored after."""
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def nvml(monkeypatch):
    """`nvml(module)` installs a fake pynvml (tests/test_live.py fake_nvml) for the test."""
    def install(mod):
        monkeypatch.setitem(sys.modules, "pynvml", mod)
        return mod
    return install


@pytest.fixture(scope="module")
def db():
    """The built-in hardware database."""
    from vramplan.hardware import default_db
    return default_db()


@pytest.fixture
def new_app(db, monkeypatch):
    """`new_app(**options)` is `App(db=db, **options)` opened with no QUERY_STRING (a page
    without a link)."""
    from vramplan.ui import App
    monkeypatch.delenv("QUERY_STRING", raising=False)
    return lambda **options: App(db=db, **options)


class FakeLoop:
    """A kernel's io_loop: `add_callback` runs the callback at once (on the caller's thread)
    and records it; `call_later` only records (the tests expect none); `wait_for(pred, s)`
    waits until `pred()` holds after a callback, for at most s seconds."""

    def __init__(self):
        self.calls: list = []
        self.timed: list = []
        self._ran = threading.Condition()

    def add_callback(self, fn, *args):
        fn(*args)
        with self._ran:
            self.calls.append(fn)
            self._ran.notify_all()

    def call_later(self, delay, fn, *args):
        self.timed.append(fn)

    def wait_for(self, pred, timeout: float) -> bool:
        with self._ran:
            return self._ran.wait_for(pred, timeout)


@pytest.fixture
def kernel_loop(monkeypatch):
    """The UI runs as in a kernel (`vramplan.ui.widgets.jobs.kernel()` has an io_loop): the FakeLoop."""
    from vramplan.ui.widgets import jobs
    loop = FakeLoop()
    monkeypatch.setattr(jobs, "kernel", lambda: types.SimpleNamespace(io_loop=loop))
    return loop


@pytest.fixture
def scenario_passes(monkeypatch):
    """`scenario_passes()` counts, from then on, every run of the whole scenario pass:
    `Scenario.from_dict` (what `resolve`, `replace` and `from_query` call, each pass of
    `replace`'s dropping loop included). It returns the list of what each run was given (a
    copy of each dict), which grows as the test goes on."""
    from vramplan.scenario import Scenario

    def start() -> list:
        calls: list = []
        orig = Scenario.from_dict.__func__

        def from_dict(cls, d, **kw):
            calls.append(dict(d) if isinstance(d, dict) else d)
            return orig(cls, d, **kw)
        monkeypatch.setattr(Scenario, "from_dict", classmethod(from_dict))
        return calls
    return start
