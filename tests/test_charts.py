"""vramplan.charts: charts are checked as Vega-Lite dicts (chart.to_dict()), not pictures."""
from __future__ import annotations

import pytest

pytest.importorskip("altair")

from vramplan import charts  # noqa: E402
from vramplan.units import GiB  # noqa: E402

DEVICES = [  # the Device.to_dict() keys the chart reads
    {"id": "nvidia-a100-sxm4-80gb", "vendor": "NVIDIA", "name": "NVIDIA A100 SXM4 80GB",
     "memory_bytes": 80 * GiB, "usable_memory_bytes": None, "memory_type": "HBM2e",
     "bandwidth_gbs": 2039.0, "year": 2020},
    {"id": "amd-mi300x", "vendor": "AMD", "name": "AMD Instinct MI300X",
     "memory_bytes": 192 * GiB, "usable_memory_bytes": 191 * GiB, "memory_type": "HBM3",
     "bandwidth_gbs": 5300.0, "year": 2023},
    {"id": "nvidia-t4", "vendor": "NVIDIA", "name": "NVIDIA T4",
     "memory_bytes": 16 * GiB, "usable_memory_bytes": None, "memory_type": "GDDR6",
     "bandwidth_gbs": 320.0, "year": 2018},
    {"id": "odd-one", "vendor": "Acme", "name": "Acme X1",
     "memory_bytes": 32 * GiB, "memory_type": "GDDR6", "bandwidth_gbs": 500.0},
]


def _values(spec: dict) -> list[dict]:
    if "values" in spec.get("data", {}):
        return spec["data"]["values"]
    return [row for rows in spec["datasets"].values() for row in rows]


def test_device_rows_units_and_selection():
    rows = charts.device_rows(DEVICES, selected="AMD-MI300X")
    by_id = {r["id"]: r for r in rows}
    assert by_id["nvidia-a100-sxm4-80gb"]["memory_gib"] == 80.0       # binary GiB
    assert by_id["amd-mi300x"]["usable_gib"] == 191.0
    assert by_id["nvidia-a100-sxm4-80gb"]["bandwidth_gbs"] == 2039.0  # decimal GB/s as quoted
    assert [r["id"] for r in rows if r["selected"]] == ["amd-mi300x"]  # case-insensitive id
    # labels of points in the right half of the (log) x range go to the left of the point
    assert by_id["amd-mi300x"]["label_side"] == "left"
    assert by_id["nvidia-t4"]["label_side"] == "right"


def test_device_rows_accepts_device_objects_and_skips_unplaceable():
    class Dev:
        def __init__(self, d):
            self.d = d

        def to_dict(self):
            return self.d

    no_bw = dict(DEVICES[0], id="no-bw", bandwidth_gbs=None)
    rows = charts.device_rows([Dev(DEVICES[0]), Dev(no_bw)])
    assert [r["id"] for r in rows] == ["nvidia-a100-sxm4-80gb"]


def test_capacity_bandwidth_chart_spec():
    spec = charts.capacity_bandwidth_chart(DEVICES, selected="nvidia-t4").to_dict()
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    points, ring, *labels = spec["layer"]
    assert points["mark"]["type"] == "circle"
    enc = points["encoding"]
    assert enc["x"]["field"] == "memory_gib" and enc["x"]["scale"]["type"] == "log"
    assert enc["y"]["field"] == "bandwidth_gbs" and enc["y"]["scale"]["type"] == "log"
    assert enc["color"]["field"] == "vendor"
    # vendor colours are fixed: NVIDIA green, AMD red, unknown vendors grey
    scale = enc["color"]["scale"]
    colors = dict(zip(scale["domain"], scale["range"]))
    assert colors == {"AMD": "#ed1c24", "NVIDIA": "#76b900", "Acme": charts.OTHER_COLOR}
    tips = {t["field"] for t in enc["tooltip"]}
    assert {"name", "vendor", "memory_gib", "memory_type", "bandwidth_gbs", "year"} <= tips
    # the chosen device: a ring and a label, both filtered to the selected row
    assert ring["mark"]["type"] == "point" and ring["mark"]["filled"] is False
    assert {"filter": "datum.selected"} in ring["transform"]
    assert all(lab["mark"]["type"] == "text" and lab["encoding"]["text"]["field"] == "name"
               for lab in labels)
    assert charts.selected_ids(spec) == ["nvidia-t4"]
    assert len(_values(spec)) == 4


def test_selected_device_changes_the_spec():
    a = charts.capacity_bandwidth_chart(DEVICES, selected="nvidia-t4").to_dict()
    b = charts.capacity_bandwidth_chart(DEVICES, selected="amd-mi300x").to_dict()
    assert charts.selected_ids(a) == ["nvidia-t4"]
    assert charts.selected_ids(b) == ["amd-mi300x"]
    assert charts.selected_ids(charts.capacity_bandwidth_chart(DEVICES).to_dict()) == []


def test_vendor_label():
    assert charts.vendor_label("nvidia") == "NVIDIA"
    assert charts.vendor_label("Acme") == "Acme"
    assert charts.vendor_label(None) == "other"


def test_chart_from_the_real_database():
    from vramplan.hardware import default_db
    db = default_db()
    spec = charts.capacity_bandwidth_chart(db.devices, selected=db.devices[0].id).to_dict()
    rows = _values(spec)
    assert len(rows) == len(db.devices)  # every device has capacity and bandwidth
    assert charts.selected_ids(spec) == [db.devices[0].id]


# -- memory at the peak: one stacked bar against the usable-memory line
COMPONENTS = {"weights": 15 * GiB, "gradients": 0, "optimizer_states": 26 * 2**20,
              "activations": 4 * GiB, "kv_cache": 0, "temporary": 0,
              "cuda_context": GiB, "allocator_slack": GiB // 2, "nccl": GiB // 4}


def test_breakdown_rows_stack_in_a_fixed_order_and_skip_zeros():
    rows = charts.breakdown_rows(COMPONENTS)
    assert [r["component"] for r in rows] == ["weights", "optimizer_states", "activations",
                                              "allocator_slack", "cuda_context", "nccl"]
    assert rows[0]["start_gib"] == 0 and rows[0]["end_gib"] == 15.0
    for a, b in zip(rows, rows[1:]):
        assert a["end_gib"] == b["start_gib"]                      # contiguous segments
    assert rows[-1]["end_gib"] == round(sum(COMPONENTS.values()) / GiB, 4)
    assert sum(r["bytes"] for r in rows) == sum(COMPONENTS.values())
    by = {r["component"]: r for r in rows}
    assert by["weights"]["label"] == "Weights" and by["nccl"]["label"] == "NCCL buffers"
    assert by["optimizer_states"]["size"] == "26.0 MiB"
    assert by["weights"]["show_label"] and not by["optimizer_states"]["show_label"]


def test_breakdown_chart_spec_has_bars_and_the_usable_line():
    spec = charts.breakdown_chart(COMPONENTS, 24 * GiB, gpu_name="RTX 4090", fits=True).to_dict()
    bars, labels, rule, rule_text = spec["layer"]
    assert bars["mark"]["type"] == "bar"
    assert bars["encoding"]["x"]["field"] == "start_gib"
    assert bars["encoding"]["x2"]["field"] == "end_gib"
    colors = dict(zip(bars["encoding"]["color"]["scale"]["domain"],
                      bars["encoding"]["color"]["scale"]["range"]))
    assert colors["weights"] == charts.COMPONENT_COLORS["weights"]
    assert colors["nccl"] == charts.OTHER_COMPONENT_COLOR
    assert rule["mark"]["type"] == "rule" and rule["encoding"]["x"]["field"] == "usable_gib"
    rows = charts.chart_rows(spec)
    assert {"usable_gib": 24.0, "text": "RTX 4090: 24.00 GiB usable"} in rows   # units.format_gib
    assert bars["encoding"]["x"]["scale"]["domain"][1] >= 24.0
    # a plan that does not fit: the axis runs past the line, which turns red
    big = dict(COMPONENTS, activations=40 * GiB)
    spec2 = charts.breakdown_chart(big, 24 * GiB, fits=False).to_dict()
    assert spec2["layer"][0]["encoding"]["x"]["scale"]["domain"][1] > \
        sum(big.values()) / GiB
    assert spec2["layer"][2]["mark"]["color"] == charts.theme.NO_FIT_COLOR


def test_breakdown_chart_from_a_real_estimate():
    from vramplan.estimate import estimate
    est = estimate({"model": "gpt2", "task": "train", "gpu": "nvidia-a100-sxm4-80gb"}).to_dict()
    comps = est["per_gpu"]["components"]
    rows = {r["component"]: r for r in  # bars and their labels share the rows
            charts.chart_rows(charts.breakdown_chart(comps, 80 * GiB).to_dict())
            if "component" in r}.values()
    assert sum(r["bytes"] for r in rows) == sum(comps.values())
    assert {"cuda_context", "allocator_slack", "weights"} <= {r["component"] for r in rows}
