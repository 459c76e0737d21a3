"""A model named by its size alone ('70B') is read in the catalog stage, not in the page."""
from vramplan.catalog.size_only import looks_like_size, parse_params


def test_size_words():
    assert parse_params("70B") == 7e10 and parse_params("350M") == 3.5e8
    assert parse_params("70 b params") == 7e10 and parse_params("1.5e9") == 1.5e9
    assert parse_params("gpt2") is None and parse_params("0") is None and parse_params(7) is None
    assert looks_like_size("7b") and looks_like_size("350M params")
    assert not looks_like_size("gpt2") and not looks_like_size("1500")   # a bare number: no


def test_the_page_reads_the_same_function():
    import pytest
    pytest.importorskip("ipywidgets")
    from vramplan.ui.state import text
    assert text.parse_params is parse_params and text.looks_like_size is looks_like_size
