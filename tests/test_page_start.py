"""What the planner page does before its first chart (issue 19.6, benchmarks/page_speed.py):
the first screen imports neither the advisor nor numpy nor altair, and in a kernel the
breakdown chart's widget comes before the ~170 models of the panels below it."""
import subprocess
import sys

import pytest

pytest.importorskip("ipywidgets")


def test_the_first_screen_imports_no_advisor_numpy_or_altair():
    """Importing the page and building its first screen (the panels below the verdict wait
    for the first paint, which never comes here) leaves the advisor, numpy and altair out:
    they were ~0.5 s of the kernel's ~1 s of imports before the first chart."""
    code = (
        "import sys\n"
        "import vramplan.ui.widgets.app as m\n"
        "m.after_paint = lambda widget, fn: None\n"
        "app = m.App(lazy_chart=True)\n"
        "assert app.state.estimate is not None and not app.later\n"
        "heavy = [n for n in ('vramplan.advisor', 'numpy', 'altair') if n in sys.modules]\n"
        "assert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_in_a_kernel_the_chart_widget_comes_before_the_panels(new_app, kernel_loop,
                                                              monkeypatch):
    """After the first paint: the breakdown chart's widget is made first, the panels after it
    (they used to be made first, their imports and renders delaying the chart)."""
    from vramplan.ui.widgets import app as app_mod
    seen = []
    build_later = app_mod.App._build_later

    def recording(self):
        seen.append(self.panel.chart.loaded)
        build_later(self)

    monkeypatch.setattr(app_mod.App, "_build_later", recording)
    app = new_app(lazy_chart=True)
    assert not app.later                      # nothing below the verdict yet
    app.panel.banner._view_count = 1          # the browser shows the first screen
    assert kernel_loop.wait_for(lambda: app.later and app.chart.loaded, 90)
    assert seen == [True]                     # the chart was there when the panels came
    assert app.panel.chart.error is None and app.advisor is not None
