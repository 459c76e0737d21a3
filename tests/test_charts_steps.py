"""The advisor's waterfall, the phases of a step and a traced timeline, as Vega-Lite dicts."""
from __future__ import annotations

import pytest

pytest.importorskip("altair")

from vramplan import charts  # noqa: E402
from vramplan.charts import theme  # noqa: E402
from vramplan.units import GiB  # noqa: E402


def layer_rows(spec: dict, layer: dict) -> list[dict]:
    """The rows a layer plots: its own data, else the chart's (altair lifts shared data)."""
    data = layer.get("data") or spec.get("data") or {}
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


def layers(spec: dict, mark: str) -> list[dict]:
    return [lay for lay in spec["layer"] if lay["mark"]["type"] == mark]


ADVICE = {
    "recommendations": [
        {"id": "ckpt", "title": "Activation checkpointing", "saves_bytes": 20 * GiB,
         "cost": {"step_time_fraction": 0.33}, "scenario": {}, "estimate": {}},
        {"id": "adam8", "title": "8-bit AdamW", "saves_bytes": 9 * GiB,
         "cost": {"label": "slight accuracy risk"}},
        {"id": "bs4", "title": "Batch size 4", "saves_bytes": 6 * GiB, "cost": "fewer samples"},
    ],
    "plans": [{"ids": ["ckpt", "adam8"],
               "estimate": {"per_gpu": {"device_used_bytes": 70 * GiB}}}],
}
TODAY = {"per_gpu": {"device_used_bytes": 105 * GiB},
         "gpu": {"id": "h100", "name": "H100", "memory_bytes": 80 * GiB,
                 "usable_memory_bytes": 80 * GiB}}


def test_cost_label():
    assert charts.cost_label({"step_time_fraction": 0.33}) == "step time +33%"
    assert charts.cost_label({"label": "x", "step_time_fraction": 1}) == "x"
    assert charts.cost_label({"extra_gpus": 1, "host_bytes": 2 * GiB}) == \
        "extra gpus 1, host 2.0 GiB"
    assert charts.cost_label("a word") == "a word"
    assert charts.cost_label(None) == "" and charts.cost_label({}) == ""


def test_waterfall_rows_step_down_until_it_fits():
    rows = charts.waterfall_rows(ADVICE, estimate=TODAY, usable_bytes=80 * GiB)
    assert charts.waterfall_steps(rows) == ["Today's peak", "Activation checkpointing",
                                            "8-bit AdamW", "After these changes"]
    today, ckpt, adam, after = rows
    assert (today["start_gib"], today["end_gib"]) == (0.0, 105.0)
    assert (ckpt["start_gib"], ckpt["end_gib"]) == (85.0, 105.0)       # 105 - 20
    assert ckpt["bytes"] == -20 * GiB and ckpt["text"] == "-20.0 GiB · step time +33%"
    assert (adam["start_gib"], adam["end_gib"]) == (76.0, 85.0)        # fits at 76 <= 80: stop
    assert after["kind"] == "fits" and after["end_gib"] == 76.0
    assert after["text"] == "76.0 GiB · fits"
    # without a limit every saving is listed
    assert len(charts.waterfall_rows(ADVICE, peak_bytes=105 * GiB)) == 5


def test_waterfall_of_a_plan_reconciles_with_its_own_estimate():
    rows = charts.waterfall_rows(ADVICE, estimate=TODAY, usable_bytes=80 * GiB, plan=0)
    assert [r["kind"] for r in rows] == ["today", "saving", "saving", "combined", "fits"]
    combined = rows[3]
    assert (combined["start_gib"], combined["end_gib"]) == (70.0, 76.0)  # 76 summed, 70 real
    assert rows[-1]["end_gib"] == 70.0
    short = charts.waterfall_rows({"recommendations": ADVICE["recommendations"][:1]},
                                  peak_bytes=105 * GiB, usable_bytes=80 * GiB)
    assert short[-1]["kind"] == "does not fit"
    assert short[-1]["text"] == "85.0 GiB · still 5.0 GiB over"
    assert charts.waterfall_rows(ADVICE) == []                          # no peak: nothing


def test_waterfall_chart_spec():
    spec = charts.savings_waterfall_chart(ADVICE, estimate=TODAY).to_dict()
    assert theme.title_text(spec) == "From today's peak to what fits (GiB per GPU)"
    assert spec["width"] == "container" and spec["height"] == 4 * 28
    rule, = layers(spec, "rule")
    assert rule["encoding"]["x"]["field"] == "usable_gib"
    assert layer_rows(spec, rule)[0]["usable_gib"] == 80 * GiB / GiB == 80.0
    assert layer_rows(spec, rule)[0]["text"] == "H100: 80.0 GiB usable"
    bars, = layers(spec, "bar")
    assert bars["encoding"]["x"]["field"] == "start_gib"
    assert bars["encoding"]["x2"]["field"] == "end_gib"
    assert bars["encoding"]["x"]["title"] == "Device memory at the peak (GiB per GPU)"
    assert bars["encoding"]["y"]["sort"] == ["Today's peak", "Activation checkpointing",
                                             "8-bit AdamW", "After these changes"]
    colors = dict(zip(bars["encoding"]["color"]["scale"]["domain"],
                      bars["encoding"]["color"]["scale"]["range"]))
    assert colors == {"today": theme.NEUTRAL_COLOR, "saving": theme.OKABE_ITO["sky_blue"],
                      "fits": theme.FIT_COLOR}


# -- phases of one step (the estimate's `phases`, GPT-2 training shaped)
EST = {"peak_phase": "backward", "phases": {
    "forward": {"weights": 2 * GiB, "gradients": 0, "optimizer_states": 4 * GiB,
                "activations": GiB},
    "backward": {"weights": 2 * GiB, "optimizer_states": 4 * GiB, "activations": 3 * GiB,
                 "temporary": GiB // 2},
    "optimizer-step": {"weights": 2 * GiB, "gradients": 2 * GiB, "optimizer_states": 4 * GiB,
                       "odd_buffer": GiB}}}


def test_phase_rows_stack_in_a_fixed_order():
    rows = charts.phase_rows(EST)
    fwd = [r for r in rows if r["phase"] == "forward"]
    assert [r["component"] for r in fwd] == ["weights", "optimizer_states", "activations"]
    assert [(r["start_gib"], r["end_gib"]) for r in fwd] == [(0, 2), (2, 6), (6, 7)]
    assert {r["total_gib"] for r in fwd} == {7.0}
    opt = [r["component"] for r in rows if r["phase"] == "optimizer-step"]
    assert opt == ["weights", "gradients", "optimizer_states", "odd_buffer"]   # others last
    assert {r["phase_label"] for r in rows} == {"Forward", "Backward", "Optimizer step"}


def test_phases_chart_spec():
    spec = charts.phases_chart(EST).to_dict()
    assert theme.title_text(spec) == "Memory over one step, by phase (GiB per GPU)"
    bars, = layers(spec, "bar")
    enc = bars["encoding"]
    assert enc["x"]["sort"] == ["Forward", "Backward", "Optimizer step"]
    assert enc["y"]["field"] == "start_gib" and enc["y2"]["field"] == "end_gib"
    assert enc["y"]["title"] == "Allocated at the top of the phase (GiB per GPU)"
    colors = dict(zip(enc["color"]["scale"]["domain"], enc["color"]["scale"]["range"]))
    assert colors["weights"] == theme.COMPONENT_PALETTE["weights"]
    assert colors["odd_buffer"] == theme.OTHER_COMPONENT
    assert list(colors)[:3] == ["weights", "gradients", "optimizer_states"]
    normal, bold = layers(spec, "text")
    assert bold["mark"]["fontWeight"] == "bold"
    tops = {r["phase_label"]: r for r in layer_rows(spec, bold)}
    assert tops["Backward"]["text"] == "9.50 GiB · peak" and tops["Backward"]["peak"]
    assert tops["Forward"]["text"] == "7.00 GiB"
    assert enc["y"]["scale"]["domain"] == [0, round(9.5 * 1.15, 3)]


def test_timeline_rows_bands_peak_and_thinning():
    events = [(i, "forward" if i < 5 else "backward", (i if i < 5 else 10 - i) * GiB)
              for i in range(10)] + [{"event_index": 10, "phase": "optimizer", "bytes": GiB},
                                     (11, "optimizer", float("nan"))]
    r = charts.timeline_rows(events)
    assert len(r["points"]) == 11                                   # the NaN event dropped
    assert [(b["phase"], b["start"], b["end"]) for b in r["bands"]] == \
        [("forward", 0, 5), ("backward", 5, 10), ("optimizer", 10, 10)]
    assert [b["color"] for b in r["bands"]] == theme.PALETTE[:3]
    peak, = r["peak"]
    assert peak["event_index"] == 5 and peak["gib"] == 5.0
    assert peak["text"] == "peak 5.00 GiB (Backward)"
    many = [(i, "forward", i % 1000) for i in range(10_000)] + [(10_000, "forward", 10**9)]
    thin = charts.timeline_rows(many, max_points=500)
    assert len(thin["points"]) <= 501 and thin["peak"][0]["bytes"] == 10**9


def test_timeline_chart_spec():
    events = [(i, "prefill" if i < 4 else "decode", (1 + i) * GiB) for i in range(8)]
    spec = charts.timeline_chart(events, usable_bytes=24 * GiB, gpu_name="RTX 4090").to_dict()
    assert theme.title_text(spec) == "Traced memory over one step (GiB per GPU)"
    line, = layers(spec, "line")
    assert line["mark"]["interpolate"] == "step-after"
    assert line["encoding"]["y"]["title"] == "Allocated (GiB per GPU)"
    assert line["encoding"]["x"]["scale"]["domain"] == [0, 7]
    assert [r["gib"] for r in layer_rows(spec, line)] == [float(i) for i in range(1, 9)]
    rect, = layers(spec, "rect")
    assert [r["phase_label"] for r in layer_rows(spec, rect)] == ["Prefill", "Decode"]
    rule, = layers(spec, "rule")
    assert layer_rows(spec, rule)[0]["gib"] == 24.0
    point, = layers(spec, "point")
    assert layer_rows(spec, point)[0]["event_index"] == 7
