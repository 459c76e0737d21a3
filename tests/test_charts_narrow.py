"""Every chart fits a phone (issue 19.5: at 390 px legends and subtitles are not clipped).

At 390 px the page leaves a chart ~305 px. Vega draws a title, an axis title or a mark's text
on one line whatever the width, so the builders give the narrow container (containerSize()
under theme.NARROW) titles in lines, legends in one column, and text marks in lines with the
room their pixel width needs (`theme.room_for_labels`: the scale's end is an expression of
the plot's width). These tests read the specs as dicts; tests/browser/test_page_polish.py
renders every view at 390 px and checks each text lies inside its chart.
"""
from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("altair")

from test_charts_render import build  # noqa: E402
from vramplan import charts  # noqa: E402
from vramplan.charts import theme  # noqa: E402
from vramplan.units import GiB  # noqa: E402


def narrow_branch(expr: dict):
    """The value `theme.when_narrow` gives a narrow container."""
    m = re.fullmatch(re.escape(theme.IS_NARROW) + r" \? (.+) : (.+)", expr["expr"], re.S)
    assert m, expr
    return json.loads(m.group(1))


def cols(line: str) -> int:
    return sum(2 if ord(c) >= 0x2E80 else 1 for c in line)


def walk(node):
    """Every dict in a spec."""
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


def at_width(expr: str, width: float) -> float:
    """A room_for_labels expression (max / pow / arithmetic of `width`) at a plot width."""
    assert not re.sub(r"max|pow|width|[\d.e+\-*/(), ]", "", expr), expr
    return eval(expr, {"__builtins__": {}}, {"max": max, "pow": pow, "width": width})


def test_wrap_text_breaks_at_clauses_and_keeps_numbers_whole():
    assert theme.wrap_text("this step: 797 FLOP/B, compute-bound", 24) == \
        "this step: 797 FLOP/B,\ncompute-bound"
    # ' · ' and ', ' break a line; the comma inside 1,008 does not
    assert theme.wrap_text("24 GiB · 1,008 GB/s peak, ~857 achievable · GDDR6X", 32) == \
        "24 GiB · 1,008 GB/s peak,\n~857 achievable · GDDR6X"
    # a CJK character is two columns: 6 + 12 + 2 + 8 = 28
    assert theme.wrap_text("本步：797 FLOP/B，计算受限", 28) == "本步：797 FLOP/B，计算受限"
    assert theme.wrap_text("本步：797 FLOP/B，计算受限", 24) == "本步：797 FLOP/B，\n计算受限"
    assert theme.wrap_text("short", 24) == "short"


def test_room_for_labels_by_hand():
    # a 10-column label at size 10: 10 x 0.56 x 10 = 56 px, + dx 4 + 6 slack = 66 px; on a
    # 200 px plot it starts at v = 100: the axis must end at 100 x 200 / (200 - 66) = 149.25
    # (its end then sits at 100 / 149.25 x 200 + 66 = 200 px, the plot's edge)
    room = theme.room_for_labels([100], ["abcdefghij"], 0, 120, size=10)
    assert at_width(room["expr"], 200) == pytest.approx(149.25, abs=0.01)
    # on a wide plot the 120 given wins: 100 x 800 / 734 = 109 < 120
    assert at_width(room["expr"], 800) == 120
    # a log axis from 1: log(end) = log(v) x W / (W - 66): 100^(200/134) = 968.6
    log = theme.room_for_labels([100], ["abcdefghij"], 1, 120, size=10, log=True)
    assert at_width(log["expr"], 200) == pytest.approx(100 ** (200 / 134), rel=1e-4)
    # a label too long for the plot gets 5x the plot's room, no more (no division by <= 0)
    huge = theme.room_for_labels([100], ["x" * 200], 0, 120, size=10)
    assert at_width(huge["expr"], 200) == pytest.approx(500)


def test_every_title_subtitle_and_axis_title_fits_a_phone():
    for name, chart in build().items():
        spec = chart.to_dict()
        title = spec.get("title") or {}
        text = title.get("text")
        lines = narrow_branch(text) if isinstance(text, dict) else [text]
        assert all(cols(t) <= theme.TITLE_COLUMNS for t in lines), (name, lines)
        assert " ".join(lines) == theme.title_text(spec)
        sub = title.get("subtitle") or []
        assert all(cols(t) <= theme.SUBTITLE_COLUMNS
                   for t in ([sub] if isinstance(sub, str) else sub)), (name, sub)
        for node in walk(spec):
            enc = node.get("encoding") or {}
            for ch in ("x", "x2"):
                t = (enc.get(ch) or {}).get("title")
                if isinstance(t, (str, list)):
                    t = [t] if isinstance(t, str) else t
                    assert all(cols(x) <= theme.AXIS_TITLE_COLUMNS for x in t), (name, t)
        # the legend: one column in a narrow container, in a row elsewhere
        legend = spec["config"]["legend"]
        assert legend["orient"] == "bottom"
        assert legend["columns"] == {"expr": f"{theme.IS_NARROW} ? 1 : 0"}


def test_a_long_title_is_in_lines_on_a_phone_and_whole_elsewhere():
    spec = charts.roofline_chart({"bytes_per_step": 1e9, "flops_per_step": 1e12},
                                 {"name": "NVIDIA GeForce RTX 4090", "bandwidth_gbs": 1008,
                                  "throughput_tflops_dense": {"bf16": 165.2}}).to_dict()
    assert narrow_branch(spec["title"]["text"]) == ["Roofline of NVIDIA GeForce RTX 4090",
                                                    "(TFLOPS vs FLOP/byte)"]
    assert theme.title_text(spec) == "Roofline of NVIDIA GeForce RTX 4090 (TFLOPS vs FLOP/byte)"
    short = charts.gpu_comparison_chart([]).to_dict()       # 36 columns: as it is
    assert short["title"]["text"] == "GPUs compared: memory headroom (GiB)"


def test_the_comparison_keeps_every_label_inside_a_phones_plot():
    """The 390 px page's comparison: the GPU names get NARROW_NAME_PX of ~305 px, the plot
    the rest (~170 px); each bar's label, at its estimated (upper) width, ends inside a plot
    of 200 px or more (the 29-column 'needs 2 GPUs' label is estimated at 180 px: 144 px
    in Chromium, inside the page's 170)."""
    rows = [{"id": f"g{i}", "name": f"GPU {i}", "usable_bytes": (24 + 40 * i) * GiB,
             "headroom_bytes": (40 * i - 8) * GiB, "gpus_needed": 1 if i else 2}
            for i in range(10)]
    spec = charts.gpu_comparison_chart(rows, selected="g0").to_dict()
    bars = next(n for n in walk(spec) if n.get("mark", {}).get("type") == "bar")
    y_axis = bars["encoding"]["y"]["axis"]
    assert narrow_branch(y_axis["labelLimit"]) == charts.gpu_compare.NARROW_NAME_PX
    scale = bars["encoding"]["x"]["scale"]
    data = theme.spec_rows(spec)
    labelled = [r for r in data if "label_x" in r]
    assert any("needs 2 GPUs" in r["text"] for r in labelled)
    for width in (200, 300, 700):
        d0, d1 = scale["domainMin"], at_width(scale["domainMax"]["expr"], width)
        for r in labelled:
            start = (r["label_x"] - d0) / (d1 - d0) * width
            end = start + 4 + theme.text_px(r["text"], charts.gpu_compare.LABEL_PX)
            assert end <= width, (width, r["text"], end)
