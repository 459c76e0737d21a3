"""The page's first screen as plain HTML (ui/widgets/first_screen.py): displayed before the
widgets, so the browser draws the verdict and the breakdown before it has fetched a widget
model (issue 19.6, benchmarks/page_speed.py)."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("ipywidgets")

from vramplan.ui.widgets.first_screen import HIDE, renamed, stylesheet  # noqa: E402


def test_renamed_changes_class_attributes_only():
    html = ("<div class='vp-a vp-b other'><span class=\"vp-c\">vp-text</span>"
            "<i data-x='vp-d' class='x-vp-e'></i></div>")
    assert renamed(html) == ("<div class='vpp-a vpp-b other'><span class=\"vpp-c\">vp-text"
                             "</span><i data-x='vp-d' class='x-vp-e'></i></div>")


def test_the_stylesheet_is_the_page_s_for_the_snapshot_s_classes(new_app):
    css = stylesheet()
    assert ".vp-" not in css and ".vpp-app" in css and ".vpp-verdict" in css
    assert HIDE not in css                         # the snapshot does not hide itself: the
    assert new_app(charts=False).children[0].value.endswith(HIDE)   # page's stylesheet does


def test_the_first_screen_shows_the_page_s_verdict_and_static_chart(new_app):
    app = new_app(lazy_chart=True, charts=False)
    snap = app.first_screen()
    body = snap.split("</style>", 1)[1]
    assert not re.search(r"class='[^']*(?<![\w-])vp-", body)   # nothing the page's own
    # selectors (or the browser tests) find
    assert app.panel.banner.value.replace("'vp-", "'vpp-").replace(" vp-", " vpp-") in body
    assert "Fits on NVIDIA H100" in body and "<svg class='vpp-static-chart'" in body
    assert "vpp-breakdown" in body and "Weights <b>14.96 GiB</b>" in body   # the legend
    assert "vpp-lang-en" in body and ">Workload<" in body


def test_the_snapshot_is_displayed_before_the_page_until_it_has_been_seen(new_app,
                                                                            monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display",
                        lambda obj, raw=False: shown.append(obj))
    app = new_app(lazy_chart=True, charts=False)
    app._ipython_display_()
    assert [sorted(b) for b in shown] == [
        ["text/html"], ["application/vnd.jupyter.widget-view+json", "text/plain"]]
    assert shown[0]["text/html"] == app.first_screen()
    shown.clear()
    app.panel.banner._view_count = 1               # the page is on the screen
    app._ipython_display_()
    assert [sorted(b) for b in shown] == [["application/vnd.jupyter.widget-view+json",
                                           "text/plain"]]


def test_the_snapshot_speaks_the_page_s_language(new_app):
    app = new_app(lazy_chart=True, charts=False, lang="zh")
    assert "vpp-lang-zh" in app.first_screen() and "工作负载" in app.first_screen()
