"""The savings waterfall's cost labels (the advisor's figures in words, cut to fit with the
whole text in the tooltip) and the GPU landscape's label layer, as Vega-Lite dicts."""
from __future__ import annotations

import pytest

pytest.importorskip("altair")

from vramplan import charts  # noqa: E402
from vramplan.charts import waterfall  # noqa: E402
from vramplan.units import GiB  # noqa: E402

# an advisor Cost as `Cost.to_dict()` writes it (recommendations' "cost")
COST = {"compute_share": 0.0264, "communication_bytes_per_step": 0, "communication_time_s": 0.0,
        "link": None, "host_bytes_per_step": 64 * 10**9, "host_time_s": 2.04,
        "host_link": "PCIe Gen4 x16", "step_time_s": 13.29, "time_share": 0.1534,
        "accuracy_risk": "medium", "changes_job": False, "gpus": 1, "score": 0.45, "notes": []}
FREE = {**COST, "compute_share": 0.0, "time_share": 0.0, "host_time_s": 0.0,
        "host_link": None, "accuracy_risk": "none"}
ADVICE = {"recommendations": [
    {"id": "offload", "title": "parameters in CPU memory, streamed in per layer",
     "saves_bytes": 40 * GiB, "cost": COST},
    {"id": "compile", "title": "torch.compile (fused elementwise chains)",
     "saves_bytes": 10 * GiB, "cost": FREE}]}


def test_cost_text_reads_the_advisor_figures():
    # 0.0264 -> 2.6% (one decimal under 10%), 0.1534 -> 15%
    assert charts.cost_label(COST) == ("+2.6% compute · +15% step time in transfers over "
                                       "PCIe Gen4 x16 · accuracy risk medium")
    assert charts.cost_label(FREE) == "no extra compute or traffic"
    assert waterfall.cost_text({**FREE, "changes_job": True, "gpus": 16}) == \
        "changes the job · 16 GPUs"
    assert waterfall.cost_text({"compute_share": 0.33}) == "+33% compute"

    class Cost:                       # an object with to_dict(), as advisor.Cost
        def to_dict(self):
            return {**FREE, "compute_share": 0.5}
    assert charts.cost_label(Cost()) == "+50% compute"
    assert "{" not in charts.cost_label(COST)       # never the raw dict


def test_shorten_cuts_at_a_word():
    assert waterfall.shorten("abc def", 10) == "abc def"
    assert waterfall.shorten("-40.0 GiB · +2.6% compute · accuracy risk medium", 30) == \
        "-40.0 GiB · +2.6% compute…"
    assert len(waterfall.shorten("x" * 100, 20)) == 20


def test_waterfall_labels_fit_and_the_tooltip_keeps_everything():
    rows = charts.waterfall_rows(ADVICE, peak_bytes=100 * GiB, usable_bytes=40 * GiB)
    today, offload, comp, after = rows
    assert offload["text"] == ("-40.0 GiB · +2.6% compute · +15% step time in transfers "
                               "over PCIe Gen4 x16 · accuracy risk medium")
    assert offload["label"] == "-40.0 GiB · +2.6% compute · +15% step time…"
    assert len(offload["label"]) <= waterfall.LABEL_CHARS
    assert comp["text"] == comp["label"] == "-10.0 GiB · no extra compute or traffic"
    assert after["label"] == "50.0 GiB · still 10.0 GiB over"     # 100 - 40 - 10, limit 40
    spec = charts.savings_waterfall_chart(ADVICE, peak_bytes=100 * GiB,
                                          usable_bytes=40 * GiB).to_dict()
    text, = [ly for ly in spec["layer"] if ly["mark"]["type"] == "text"
             and ly["encoding"]["text"]["field"] == "label"]
    assert text["mark"]["limit"] == {"expr": "max(40, width * 0.35 - 10)"}
    assert {t["field"] for t in text["encoding"]["tooltip"]} == {"step", "text", "cost"}
    # labels start at most at the end of the longest bar: 100 GiB of a 155 GiB axis
    bars, = [ly for ly in spec["layer"] if ly["mark"]["type"] == "bar"]
    assert bars["encoding"]["x"]["scale"]["domain"] == [0, 155.0]


DEVICES = [
    {"id": "small", "vendor": "nvidia", "name": "Small", "memory_bytes": 16 * GiB,
     "bandwidth_gbs": 300.0},
    {"id": "big", "vendor": "amd", "name": "Big", "memory_bytes": 192 * GiB,
     "bandwidth_gbs": 5300.0},
]


def _text_layers(spec):
    return [ly for ly in spec["layer"] if ly["mark"]["type"] == "text"]


def test_gpus_chart_has_one_label_layer_that_is_never_empty():
    for chosen, align, dx in (("small", "left", 14), ("big", "right", -14)):
        spec = charts.capacity_bandwidth_chart(DEVICES, selected=chosen).to_dict()
        label, = _text_layers(spec)          # one label layer, on the side with room
        assert (label["mark"]["align"], label["mark"]["dx"]) == (align, dx)
        assert label["encoding"]["text"]["field"] == "name"
        assert {"filter": "datum.selected"} in label["transform"]
        rows = charts.spec_rows(spec)
        assert [r["name"] for r in rows if r["selected"]] == [chosen.capitalize()]
    # nothing chosen: the points alone (no ring, no label layer to leave empty)
    spec = charts.capacity_bandwidth_chart(DEVICES).to_dict()
    assert [ly["mark"]["type"] for ly in spec["layer"]] == ["circle"]


def test_ui_landscape_is_the_builders_chart():
    pytest.importorskip("ipywidgets")
    from vramplan.ui.widgets.explore import landscape_chart
    spec = landscape_chart(DEVICES, "big").to_dict()
    assert [ly["mark"]["type"] for ly in spec["layer"]] == ["circle", "point", "text"]


def test_chinese_words():
    rows = charts.waterfall_rows(ADVICE, peak_bytes=100 * GiB, usable_bytes=40 * GiB,
                                 lang="zh")
    assert [r["step"] for r in rows][0] == "当前峰值"
    # each change's bar is named as the zh advice tables name it (was the English title)
    assert [r["step"] for r in rows][1:3] == ["参数放在 CPU 内存，逐层传入",
                                             "torch.compile（融合逐元素运算链）"]
    assert rows[1]["cost"] == "计算量 +2.6% · 经 PCIe Gen4 x16 传输，步时 +15% · 精度风险中"
    assert rows[-1]["text"] == "50.0 GiB · 仍超出 10.0 GiB"
    spec = charts.savings_waterfall_chart(ADVICE, peak_bytes=100 * GiB, usable_bytes=40 * GiB,
                                          lang="zh").to_dict()
    assert spec["title"]["text"] == "从当前峰值到装得下（每张 GPU，GiB）"
    spec = charts.capacity_bandwidth_chart(DEVICES, selected="big", lang="zh").to_dict()
    assert spec["title"]["text"] == "容量与带宽：数据库中的每一款 GPU"
    assert spec["layer"][0]["encoding"]["x"]["title"] == "显存容量（GiB，对数坐标）"
