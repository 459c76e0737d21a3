"""Memory vs a swept parameter, and the GPU comparison: checked as Vega-Lite dicts."""
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
    return [lay for lay in spec["layer"] if (lay["mark"]["type"] if isinstance(lay["mark"], dict)
                                             else lay["mark"]) == mark]


# batch b uses (4 + b) GiB: hand-checkable
POINTS = [{"x": b, "device_used_bytes": (4 + b) * GiB} for b in (1, 2, 4, 8, 16, 32, 64)]
GPU = {"name": "A100 40GB", "usable_bytes": 40 * GiB}
PINNED = [{"name": "RTX 4090", "usable_memory_bytes": 24 * GiB},
          {"id": "h100", "name": "H100", "memory_bytes": 80 * GiB}]


def test_memory_curve_rows_read_fit_against_the_chosen_gpu_and_drop_bad_points():
    pts = POINTS + [{"x": float("nan"), "device_used_bytes": GiB},
                    {"x": 3, "device_used_bytes": None}]
    rows = charts.memory_curve_rows(pts, usable_bytes=40 * GiB)
    assert [r["x"] for r in rows] == [1, 2, 4, 8, 16, 32, 64]
    assert [r["gib"] for r in rows] == [5.0, 6.0, 8.0, 12.0, 20.0, 36.0, 68.0]
    assert [r["status"] for r in rows][-2:] == ["fits", "does not fit"]   # 36 <= 40 < 68
    # a given `fits` wins over the usable bytes; without either the status is unknown
    assert charts.memory_curve_rows([{"x": 1, "device_used_bytes": GiB, "fits": False}],
                                    usable_bytes=40 * GiB)[0]["status"] == "does not fit"
    assert charts.memory_curve_rows([{"x": 1, "device_used_bytes": GiB}])[0]["status"] == \
        "unknown"


def test_memory_curve_chart_spec():
    spec = charts.memory_curve_chart(POINTS, gpu=GPU, pinned=PINNED, max_x=36).to_dict()
    assert spec["width"] == "container"
    assert theme.title_text(spec) == "Device memory vs batch size (GiB per GPU)"
    line, = layers(spec, "line")
    dots, = layers(spec, "circle")
    assert line["encoding"]["y"]["title"] == "Device memory used (GiB per GPU)"
    x = dots["encoding"]["x"]
    assert x["field"] == "x" and x["title"] == "Batch size, log scale"
    assert x["scale"]["type"] == "log" and x["scale"]["base"] == 2
    assert x["scale"]["domain"] == [1, 64]
    colors = dict(zip(dots["encoding"]["color"]["scale"]["domain"],
                      dots["encoding"]["color"]["scale"]["range"]))
    assert colors == {"fits": theme.FIT_COLOR, "does not fit": theme.NO_FIT_COLOR}
    assert [r["gib"] for r in layer_rows(spec, dots)] == [5.0, 6.0, 8.0, 12.0, 20.0, 36.0, 68.0]
    # y runs past the highest point and the highest capacity line (80 GiB)
    assert dots["encoding"]["y"]["scale"]["domain"] == [0, round(80 * 1.1, 3)]

    rule, max_rule = layers(spec, "rule")
    assert rule["encoding"]["y"]["field"] == "usable_gib"
    caps = {r["name"]: r for r in layer_rows(spec, rule)}
    assert caps["A100 40GB"]["usable_gib"] == 40 * GiB / GiB == 40.0   # the chosen GPU's line
    assert caps["RTX 4090"]["usable_gib"] == 24.0 and caps["H100"]["usable_gib"] == 80.0
    assert [r["name"] for r in layer_rows(spec, rule)][-1] == "A100 40GB"   # drawn last (on top)
    stroke = rule["encoding"]["stroke"]["scale"]
    assert stroke["domain"] == ["A100 40GB", "RTX 4090", "H100"]
    assert stroke["range"] == [theme.LIMIT_COLOR, theme.PIN_COLORS[0], theme.PIN_COLORS[1]]
    # the max batch: a vertical line at x = 36 with its label
    assert max_rule["encoding"]["x"]["field"] == "x"
    assert layer_rows(spec, max_rule) == [{"x": 36, "text": "max batch size 36"}]
    assert max_rule["mark"]["color"] == theme.FIT_COLOR
    label = [lay for lay in layers(spec, "text") if "text" in lay["encoding"]]
    assert {"x": 36, "text": "max batch size 36"} in [r for lay in label
                                                       for r in layer_rows(spec, lay)]


def test_memory_curve_x_is_a_parameter_and_linear_when_the_span_is_short():
    pts = [{"x": s, "device_used_bytes": s * 2**20} for s in (512, 1024, 2048)]
    spec = charts.memory_curve_chart(pts, x_title="Sequence length", x_unit="tokens",
                                     gpu=GPU).to_dict()
    x = layers(spec, "circle")[0]["encoding"]["x"]
    assert x["title"] == "Sequence length (tokens)" and "type" not in x["scale"]
    assert theme.title_text(spec) == "Device memory vs sequence length (GiB per GPU)"
    assert len(layers(spec, "rule")) == 1                     # no max mark without max_x
    assert charts.memory_curve_chart(pts, x_log=True).to_dict()["layer"][1]["encoding"]["x"][
        "scale"]["type"] == "log"


def test_capacity_rows_skip_entries_without_bytes_and_duplicates():
    rows = charts.capacity_rows({"name": "A"}, [{"name": "B", "usable_bytes": GiB},
                                                {"name": "B", "usable_bytes": 2 * GiB}])
    assert [(r["name"], r["role"], r["usable_bytes"]) for r in rows] == [("B", "pinned", GiB)]


# -- the GPU comparison
ROWS = [
    {"id": "a100-40", "name": "A100 40GB", "vendor": "NVIDIA", "usable_bytes": 40 * GiB,
     "fits": True, "headroom_bytes": 10 * GiB, "gpus_needed": 1, "max_batch_size": 12},
    {"id": "h100", "name": "H100", "vendor": "NVIDIA", "usable_bytes": 80 * GiB,
     "fits": True, "headroom_bytes": 50 * GiB, "gpus_needed": 1, "max_batch_size": 64},
    {"id": "rtx4090", "name": "RTX 4090", "vendor": "NVIDIA", "usable_bytes": 24 * GiB,
     "fits": False, "headroom_bytes": -6 * GiB, "gpus_needed": 2, "max_batch_size": 0},
    {"id": "mi300x", "name": "MI300X", "vendor": "AMD", "usable_bytes": 192 * GiB,
     "fits": None, "headroom_bytes": 162 * GiB, "gpus_needed": None, "max_batch_size": None},
]


def test_comparison_rows_sort_by_metric_and_label():
    rows = charts.comparison_rows(ROWS, selected="H100")
    assert [r["id"] for r in rows] == ["mi300x", "h100", "a100-40", "rtx4090"]
    assert [r["value"] for r in rows] == [162.0, 50.0, 10.0, -6.0]
    assert rows[0]["status"] == "fits"                          # fits read from the headroom
    assert rows[-1]["text"] == "short 6.00 GiB · needs 2 GPUs"
    assert rows[-1]["label_x"] == 0                             # label right of zero
    assert [r["id"] for r in rows if r["selected"]] == ["h100"]
    mb = charts.comparison_rows(ROWS, metric="max_batch")
    assert [r["id"] for r in mb] == ["h100", "a100-40", "rtx4090"]   # unknown max batch left out
    assert mb[-1]["text"] == "0 (batch 1 does not fit)"
    top = charts.comparison_rows(ROWS, metric="usable", top=1, selected="rtx4090")
    assert [r["id"] for r in top] == ["mi300x", "rtx4090"]          # the selected one stays
    with pytest.raises(ValueError):
        charts.comparison_rows(ROWS, metric="price")


def test_gpu_comparison_chart_spec_and_click_selection():
    spec = charts.gpu_comparison_chart(ROWS, selected="rtx4090").to_dict()
    assert spec["width"] == "container" and spec["height"] == 4 * 18
    assert theme.title_text(spec) == "GPUs compared: memory headroom (GiB)"
    bars, = layers(spec, "bar")
    enc = bars["encoding"]
    assert enc["x"]["field"] == "value" and enc["x2"] == {"datum": 0}
    assert theme.title_text(enc["x"]["title"]).startswith("Headroom at the peak (GiB")
    assert enc["y"]["field"] == "name"
    assert enc["y"]["sort"] == ["MI300X", "H100", "A100 40GB", "RTX 4090"]   # sorted bars
    # at least the 35% of the span right of the longest bar (more where a narrow plot needs
    # it for the labels: domainMax is an expression of the plot's width)
    floor = float(enc["x"]["scale"]["domainMax"]["expr"].split("max(")[1].split(",")[0])
    assert enc["x"]["scale"]["domainMin"] < -6 < 162 < floor
    colors = dict(zip(enc["color"]["scale"]["domain"], enc["color"]["scale"]["range"]))
    assert colors == {"fits": theme.FIT_COLOR, "does not fit": theme.NO_FIT_COLOR}
    # one point selection on id, driven by clicks; unselected bars fade
    param, = spec["params"]
    assert param["name"] == charts.SELECTION == "gpu_pick"
    assert param["select"] == {"type": "point", "fields": ["id"], "on": "click",
                               "clear": "dblclick"}
    assert enc["opacity"]["condition"]["param"] == "gpu_pick"
    assert charts.comparison_selected_ids(spec) == ["rtx4090"]
    zero, = layers(spec, "rule")                                # a zero line: a bar is negative
    assert layer_rows(spec, zero) == [{"zero": 0}]

    mb = charts.gpu_comparison_chart(ROWS, metric="max_batch").to_dict()
    bars, = layers(mb, "bar")
    assert bars["encoding"]["y"]["sort"] == ["H100", "A100 40GB", "RTX 4090"]
    assert bars["encoding"]["x"]["scale"]["domainMin"] == 0 and not layers(mb, "rule")


def test_picked_ids_reads_what_the_front_end_reports():
    class Sel:
        value = [{"id": "h100"}]

    assert charts.picked_ids(Sel()) == ["h100"]
    assert charts.picked_ids([{"id": "a"}, {"id": "b"}]) == ["a", "b"]
    assert charts.picked_ids({"id": ["a"]}) == ["a"]
    assert charts.picked_ids({"id": "a"}) == ["a"]
    assert charts.picked_ids(None) == [] and charts.picked_ids([]) == []
