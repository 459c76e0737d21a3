"""Bandwidth need vs achievable, the roofline and the memory hierarchy, as Vega-Lite dicts."""
from __future__ import annotations

import pytest

pytest.importorskip("altair")

from vramplan import charts  # noqa: E402
from vramplan.charts import theme  # noqa: E402
from vramplan.units import GiB  # noqa: E402


def subtitle(spec: dict) -> str:
    """The chart's subtitle as one text (the theme breaks a long one into lines)."""
    sub = spec["title"]["subtitle"]
    return " ".join(sub) if isinstance(sub, list) else sub


def layer_rows(spec: dict, layer: dict) -> list[dict]:
    """The rows a layer plots: its own data, else the chart's (altair lifts shared data)."""
    data = layer.get("data") or spec.get("data") or {}
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


def layers(spec: dict, mark: str) -> list[dict]:
    return [lay for lay in spec["layer"] if lay["mark"]["type"] == mark]


# 6 GB per step at 1500 GB/s achievable: 4 ms; 1.2 TFLOP per step: 200 FLOP/byte
BW = {"bytes_per_step": 6_000_000_000, "datasheet_bandwidth_gbs": 2039.0,
      "achievable_bandwidth_gbs": 1500.0, "memory_floor_s": 0.004, "min_step_time_s": 0.005,
      "flops_per_step": 1.2e12, "compute_floor_s": 0.005}
DEV = {"id": "a100", "name": "NVIDIA A100 SXM4 80GB", "bandwidth_gbs": 2039.0,
       "achievable_bandwidth_fraction": 0.9,
       "throughput_tflops_dense": {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}}


def test_bandwidth_rows_need_from_bytes_and_compute_floor():
    rows = {r["key"]: r for r in charts.bandwidth_rows(BW)}
    assert rows["needed"]["gbs"] == 6e9 / 0.005 / 1e9 == 1200.0      # bytes / compute floor
    assert rows["needed"]["color"] == theme.FIT_COLOR                  # 1200 <= 1500 sustained
    assert rows["achievable"]["gbs"] == 1500.0 and rows["datasheet"]["gbs"] == 2039.0
    assert rows["achievable"]["text"] == "1,500 GB/s"
    assert rows["needed"]["text"] == "1,200 GB/s · 0.8x achievable"
    over = charts.bandwidth_rows(dict(BW, needed_bandwidth_gbs=1800.0))  # the physics' own key
    assert over[0]["gbs"] == 1800.0 and over[0]["color"] == theme.NO_FIT_COLOR
    # no FLOP count: no need bar, nothing made up
    assert [r["key"] for r in charts.bandwidth_rows({"achievable_bandwidth_gbs": 1.0})] == \
        ["achievable"]


def test_bandwidth_chart_spec():
    est = {"bandwidth": BW}                       # the whole estimate dict works too
    spec = charts.bandwidth_chart(est, gpu_name="A100").to_dict()
    assert theme.title_text(spec) == "Bandwidth needed vs achievable on A100 (GB/s)"
    assert "5.59 GiB moved per step" in subtitle(spec)      # 6e9 B / 2^30
    assert "memory floor 4 ms/step" in subtitle(spec)
    bars, = layers(spec, "bar")
    assert bars["encoding"]["x"]["title"] == "Memory bandwidth (GB/s)"
    scale = bars["encoding"]["x"]["scale"]      # from 0 to at least 1.3x the longest bar
    assert scale["domainMin"] == 0
    assert f"max({round(2039.0 * 1.3, 1):.6g}," in scale["domainMax"]["expr"]
    assert "compute floor 5 ms/step" in subtitle(spec)
    assert [r["gbs"] for r in layer_rows(spec, bars)] == [1200.0, 1500.0, 2039.0]
    scale = bars["encoding"]["color"]["scale"]
    assert scale["range"] == [theme.FIT_COLOR, theme.CHOSEN_COLOR, theme.NEUTRAL_COLOR]
    empty = charts.bandwidth_chart({}).to_dict()
    assert "need unknown" in subtitle(empty)
    # decode needs hundreds of times the bandwidth: a log axis, bars from its start
    decode = charts.bandwidth_chart(dict(BW, needed_bandwidth_gbs=990_000.0)).to_dict()
    bars, = layers(decode, "bar")
    assert bars["encoding"]["x"]["scale"]["type"] == "log"
    assert bars["encoding"]["x"]["title"] == "Memory bandwidth (GB/s, log scale)"
    lo = bars["encoding"]["x"]["scale"]["domainMin"]
    assert lo == 1500.0 / 3 and {r["base"] for r in layer_rows(decode, bars)} == {lo}
    assert layer_rows(decode, bars)[0]["text"] == "990,000 GB/s · 660x achievable"


def test_roofline_rows_by_hand():
    r = charts.roofline_rows(BW, DEV, "bf16-mixed")
    assert r["throughput_key"] == "bf16" and r["peak_tflops"] == 312.0
    assert r["ridge"] == pytest.approx(312.0 / 1.5)                    # 208 FLOP/byte
    assert r["intensity"] == pytest.approx(200.0)                      # 1.2e12 / 6e9
    lo, ridge, hi = r["roof"]
    assert ridge["intensity"] == pytest.approx(208.0) and ridge["tflops"] == 312.0
    assert lo["tflops"] == pytest.approx(lo["intensity"] * 1.5, rel=1e-5)   # memory roof
    assert hi["tflops"] == 312.0 and hi["ceiling"] == "compute"
    point, = r["point"]
    assert point["bound"] == "memory" and point["tflops"] == pytest.approx(300.0)
    assert point["text"] == "this step: 200 FLOP/B, memory-bound"
    # the estimate's own ceiling (vramplan.timing's peak_tflops) wins over the device lookup
    own = charts.roofline_rows(dict(BW, peak_tflops=100.0, compute_dtype="fp16"), DEV)
    assert (own["peak_tflops"], own["throughput_key"]) == (100.0, "fp16")
    # the physics' own bound wins; bf16 missing falls back to fp16; fp8 unknown: no ceiling
    assert charts.roofline_rows(dict(BW, bound="compute"), DEV)["point"][0]["bound"] == "compute"
    # the estimate's fallbacks (hardware.capabilities.RATE_FALLBACK): bf16 without a figure runs
    # at the fp32 rate, fp8 on a GPU without it at bf16; no figure at all: no ceiling
    no_bf16 = dict(DEV, throughput_tflops_dense={"fp16": 100.0, "fp32": 14.0})
    assert charts.compute_ceiling(no_bf16, "bf16") == ("fp32", 14.0)
    assert charts.compute_ceiling(DEV, "fp8") == ("bf16", 312.0)
    assert charts.compute_ceiling(dict(DEV, throughput_tflops_dense={}), "fp8") == (None, None)
    assert charts.arithmetic_intensity({"arithmetic_intensity": 7.5}) == 7.5


def test_roofline_chart_spec_is_log_log_with_both_ceilings():
    est = {"bandwidth": BW, "scenario": {"precision": "bf16"}}
    spec = charts.roofline_chart(est, DEV).to_dict()
    assert theme.title_text(spec) == "Roofline of NVIDIA A100 SXM4 80GB (TFLOPS vs FLOP/byte)"
    roof, = layers(spec, "line")
    x, y = roof["encoding"]["x"], roof["encoding"]["y"]
    assert x["scale"]["type"] == "log" and y["scale"]["type"] == "log"
    assert x["title"] == ["Arithmetic intensity (FLOPs per byte,", "log scale)"]   # 2 lines
    assert y["title"] == "Attainable throughput (TFLOPS, log scale)"
    assert max(r["tflops"] for r in layer_rows(spec, roof)) == 312.0
    point, = layers(spec, "point")
    assert layer_rows(spec, point)[0]["intensity"] == pytest.approx(200.0)
    assert point["mark"]["color"] == theme.CHOSEN_COLOR
    texts = [r["text"] for lay in layers(spec, "text") for r in layer_rows(spec, lay)]
    assert "compute: 312 TFLOPS bf16" in texts and "memory: 1,500 GB/s" in texts
    lo, hi = x["scale"]["domain"]
    assert lo < 200 < hi and y["scale"]["domain"][0] > 0
    # no figure for fp8 on this GPU, no FLOP count: only the memory roof, said in the subtitle
    bare = charts.roofline_chart({"achievable_bandwidth_gbs": 1000.0},
                                 dict(DEV, throughput_tflops_dense={}), precision="fp8").to_dict()
    assert "no dense fp8 figure" in subtitle(bare)
    assert "point is not drawn" in subtitle(bare)
    assert not layers(bare, "point")


# -- the memory hierarchy
H100 = {"id": "nvidia-h100-sxm5-80gb", "vendor": "NVIDIA", "name": "NVIDIA H100 SXM5 80GB",
        "memory_bytes": 80 * GiB, "memory_type": "HBM3", "bandwidth_gbs": 3350.0,
        "achievable_bandwidth_fraction": 0.9, "compute_units": 132,
        "hierarchy": {"compute_units": 132, "compute_unit_kind": "SM",
                      "regfile_kib_per_unit": 256, "l1_smem_kib_per_unit": 256, "l2_mib": 50},
        "interconnect": {"scaleup": "NVLink 4", "scaleup_links": 18,
                         "scaleup_gbs_per_direction": 450, "pcie_gen": 5, "pcie_lanes": 16}}


def test_hierarchy_rows_from_the_device_dict():
    rows = {r["level"]: r for r in charts.hierarchy_rows(H100)}
    assert list(rows) == ["Registers", "L1 / shared memory", "L2 cache", "Device memory",
                          "Host link (PCIe)", "GPU-to-GPU link"]
    assert rows["Registers"]["bytes"] == 132 * 256 * 1024                # 33 MiB
    assert rows["Registers"]["text"] == "33 MiB · 132 SM x 256 KiB"
    assert rows["L2 cache"]["bytes"] == 50 * 2**20
    assert rows["Device memory"]["bytes"] == 80 * GiB
    assert rows["Device memory"]["bandwidth_gbs"] == 3350.0
    assert rows["Device memory"]["text"] == \
        "80 GiB · 3,350 GB/s peak, ~3,015 achievable · HBM3"
    # PCIe 5.0: 32 GT/s x 128/130 x 16 lanes / 8 = 63.0 GB/s per direction
    assert rows["Host link (PCIe)"]["bandwidth_gbs"] == 63.0 and \
        rows["Host link (PCIe)"]["bytes"] is None
    assert rows["GPU-to-GPU link"]["bandwidth_gbs"] == 450.0
    assert charts.pcie_gbs(4, 16) == 31.5 and charts.pcie_gbs(6, 16) is None


def test_hierarchy_skips_what_the_database_lacks():
    apple = {"id": "m2", "vendor": "Apple", "name": "M2 Ultra", "memory_bytes": 192 * GiB,
             "memory_type": "LPDDR5", "unified_memory": True, "bandwidth_gbs": 800.0,
             "hierarchy": {"compute_units": 76, "compute_unit_kind": "GPU core"},
             "interconnect": {}}
    rows = charts.hierarchy_rows(apple)
    assert [r["level"] for r in rows] == ["Device memory"]
    assert rows[0]["text"] == "192 GiB · 800 GB/s · LPDDR5, unified with the CPU"
    amd = {"vendor": "AMD", "name": "MI300X", "memory_bytes": 192 * GiB,
           "hierarchy": {"compute_units": 304, "l1_smem_kib_per_unit": 64, "l2_mib": 32,
                         "llc_mib": 256, "llc_kind": "Infinity Cache"},
           "interconnect": {"host_link": "NVLink-C2C to Grace, 900 GB/s"}}
    levels = {r["level"]: r for r in charts.hierarchy_rows(amd)}
    assert list(levels) == ["LDS / L1", "L2 cache", "Infinity Cache", "Device memory",
                            "Host link"]
    assert levels["Infinity Cache"]["bytes"] == 256 * 2**20
    assert levels["Host link"]["bandwidth_gbs"] is None               # text kept, no number
    assert charts.hierarchy_rows({}) == []


def test_hierarchy_chart_spec():
    spec = charts.hierarchy_chart(H100).to_dict()
    assert theme.title_text(spec) == "Memory hierarchy of NVIDIA H100 SXM5 80GB"
    assert spec["height"] == 6 * 40                 # a row holds a label of two lines
    bars, = layers(spec, "bar")
    x = bars["encoding"]["x"]
    assert x["scale"]["type"] == "log" and x["scale"]["base"] == 2
    assert theme.title_text(x["title"]) == "Capacity (bytes, log scale; binary units)"
    assert x["scale"]["domainMin"] == 132 * 256 * 1024 / 4
    # the ticks (none in a phone's narrow plot: each bar's label gives its size)
    values = x["axis"]["values"]["expr"]
    assert values.startswith(f"{theme.IS_NARROW} ? [] : [") and str(2**35) in values
    assert "GiB" in x["axis"]["labelExpr"]
    assert bars["transform"] == [{"filter": "isValid(datum.bytes) && datum.bytes > 0"}]
    assert bars["encoding"]["y"]["sort"][0] == "Registers"
    colors = dict(zip(bars["encoding"]["color"]["scale"]["domain"],
                      bars["encoding"]["color"]["scale"]["range"]))
    assert colors == {"on-chip": theme.OKABE_ITO["orange"], "device": theme.CHOSEN_COLOR}


def test_roofline_ceiling_is_the_estimates_rate_for_an_int8_plan():
    """One precision -> compute-rate table: an int8 (weight-only) plan on an H100 is timed by the
    estimate at the fp16 dense rate, 989.4 TFLOPS (hwdb), and the roofline draws the same
    ceiling; before, the chart's own table mapped int8 -> int8 and drew 1978.9 TOPS."""
    from vramplan.estimate import estimate
    from vramplan.hardware import get_gpu
    from vramplan.scenario import Scenario
    gpu = get_gpu("nvidia-h100-sxm5-80gb")
    sc = Scenario.from_dict({"model": "meta-llama/Meta-Llama-3-8B", "task": "generate",
                             "precision": "int8", "batch_size": 8, "seq_len": 2048})
    est = estimate(sc, gpu)
    assert est.bandwidth["peak_tflops"] == gpu.throughput["fp16"] == 989.4
    for precision in ("int8", None):   # the page passes the scenario precision
        r = charts.roofline_rows(est.to_dict(), gpu.to_dict(), precision)
        assert (r["throughput_key"], r["peak_tflops"]) == ("fp16", 989.4)
    spec = charts.roofline_chart(est.to_dict(), gpu.to_dict(), precision="int8").to_dict()
    assert "compute roof 989.4 TFLOPS dense fp16" in subtitle(spec)
