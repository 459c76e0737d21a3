"""The breakdown bar as plain SVG (the page's first chart, drawn before altair loads)."""
import re

from vramplan.charts import theme
from vramplan.charts.breakdown_svg import PLOT_LEFT, PLOT_RIGHT, breakdown_svg

GIB = 2 ** 30


def _rects(svg):
    return [(float(x), float(w), fill) for x, w, fill in
            re.findall(r"<rect x='([\d.]+)' y='[\d.]+' width='([\d.]+)' height='[\d.]+' "
                       r"fill='(#[0-9a-fA-F]{6})'", svg)]


def test_segments_are_to_scale_against_the_usable_line():
    # 16 GiB weights + 24 GiB activations on a GPU with 80 GiB usable: the axis runs to
    # 80 x 1.04 GiB, so the bar's two segments cover 16 / 83.2 and 24 / 83.2 of the plot
    svg = breakdown_svg({"weights": 16 * GIB, "activations": 24 * GIB}, 80 * GIB,
                        gpu_name="H100", fits=True, width=640)
    plot = 640 - PLOT_LEFT - PLOT_RIGHT
    (x0, w0, c0), (x1, w1, c1) = _rects(svg)
    assert (c0, c1) == ("#0072B2", "#E69F00")          # weights blue, activations orange
    assert (c0, c1) == (theme.component_color("weights"), theme.component_color("activations"))
    assert abs(w0 - plot * 16 / 83.2) < 0.02 and abs(w1 - plot * 24 / 83.2) < 0.02
    assert abs(x1 - (x0 + w0)) < 0.02                  # stacked, no gap
    xu = float(re.search(r"class='vp-usable' x1='([\d.]+)'", svg).group(1))
    assert abs(xu - (PLOT_LEFT + plot * 80 / 83.2)) < 0.1
    assert "H100: 80.00 GiB usable" in svg and "16.0" in svg and "24.0" in svg
    assert "<title>Weights: 16.00 GiB (40.0%)</title>" in svg


def test_a_plan_that_does_not_fit_overshoots_in_red_and_speaks_chinese():
    svg = breakdown_svg({"weights": 100 * GIB}, 80 * GIB, gpu_name="H100", fits=False,
                        lang="zh")
    (_, w, _), = _rects(svg)
    plot = 640 - PLOT_LEFT - PLOT_RIGHT
    assert abs(w - plot / 1.04) < 0.02                 # the bar is the whole axis' extent
    assert f"stroke='{theme.NO_FIT_COLOR}'" in svg      # the usable line in vermillion
    assert "GiB per GPU" not in svg                    # the axis title is translated
    assert svg.startswith("<svg") and svg.endswith("</svg>") and "<script" not in svg


def test_the_planner_shows_the_static_chart_before_the_chart_widget_loads():
    from vramplan.ui import App
    app = App(charts=False)
    holder = app.panel.chart
    assert holder.widget is None
    before = holder.placeholder.value
    assert "<svg class='vp-static-chart'" in before
    app.workload.set("batch_size", "16")             # the plan changes: so does the bar
    after = holder.placeholder.value
    assert "<svg class='vp-static-chart'" in after and after != before
