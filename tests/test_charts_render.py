"""Every new chart compiles and renders (vl-convert, offline) with no Vega-Lite warning, carries
no NaN/inf, and speaks the shared visual language of charts/theme.py."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

pytest.importorskip("altair")
vlc = pytest.importorskip("vl_convert")

from vramplan import charts  # noqa: E402
from vramplan.charts import theme  # noqa: E402
from vramplan.units import GiB  # noqa: E402

DEV = {"id": "nvidia-h100-sxm5-80gb", "vendor": "NVIDIA", "name": "NVIDIA H100 SXM5 80GB",
       "memory_bytes": 80 * GiB, "usable_memory_bytes": 79 * GiB, "memory_type": "HBM3",
       "bandwidth_gbs": 3350.0, "achievable_bandwidth_fraction": 0.9,
       "hierarchy": {"compute_units": 132, "compute_unit_kind": "SM",
                     "regfile_kib_per_unit": 256, "l1_smem_kib_per_unit": 256, "l2_mib": 50},
       "throughput_tflops_dense": {"bf16": 989.4, "fp16": 989.4},
       "interconnect": {"scaleup": "NVLink 4", "scaleup_gbs_per_direction": 450,
                        "pcie_gen": 5, "pcie_lanes": 16}}
BW = {"bytes_per_step": 6.7e9, "flops_per_step": 8.7e11, "datasheet_bandwidth_gbs": 3350.0,
      "achievable_bandwidth_gbs": 3015.0, "memory_floor_s": 0.0022, "compute_floor_s": 0.0009}
PHASES = {"forward": {"weights": GiB, "activations": GiB}, "backward": {"weights": GiB,
                                                                        "activations": 2 * GiB},
          "optimizer-step": {"weights": GiB, "gradients": GiB, "optimizer_states": 2 * GiB}}
ADVICE = {"recommendations": [{"id": "a", "title": "Checkpointing", "saves_bytes": 10 * GiB,
                               "cost": {"step_time_fraction": 0.3}}], "plans": []}
ROWS = [{"id": "h100", "name": "H100", "vendor": "NVIDIA", "usable_bytes": 79 * GiB,
         "fits": True, "headroom_bytes": 9 * GiB, "gpus_needed": 1, "max_batch_size": 9},
        {"id": "t4", "name": "T4", "vendor": "NVIDIA", "usable_bytes": 15 * GiB,
         "fits": False, "headroom_bytes": -55 * GiB, "gpus_needed": 5, "max_batch_size": 0}]
POINTS = [{"x": b, "device_used_bytes": (60 + 2 * b) * GiB} for b in (1, 2, 4, 8, 16)]


def build(empty: bool = False) -> dict:
    """Every new builder, on typical data or (empty=True) on nothing at all."""
    if empty:
        return {
            "memory_curve": charts.memory_curve_chart([]),
            "gpu_comparison": charts.gpu_comparison_chart([]),
            "bandwidth": charts.bandwidth_chart({}),
            "roofline": charts.roofline_chart({}, {}),
            "waterfall": charts.savings_waterfall_chart({}, peak_bytes=GiB),
            "hierarchy": charts.hierarchy_chart({}),
            "phases": charts.phases_chart({}),
            "timeline": charts.timeline_chart([]),
        }
    return {
        "memory_curve": charts.memory_curve_chart(POINTS, gpu=DEV, pinned=[
            {"name": "B200", "usable_bytes": 180 * GiB}], max_x=9),
        "gpu_comparison": charts.gpu_comparison_chart(ROWS, selected="t4"),
        "gpu_comparison_batch": charts.gpu_comparison_chart(ROWS, metric="max_batch"),
        "bandwidth": charts.bandwidth_chart(BW, gpu_name="H100"),
        "roofline": charts.roofline_chart(BW, DEV, precision="bf16"),
        "waterfall": charts.savings_waterfall_chart(ADVICE, peak_bytes=85 * GiB,
                                                    usable_bytes=79 * GiB),
        "hierarchy": charts.hierarchy_chart(DEV),
        "phases": charts.phases_chart({"phases": PHASES, "peak_phase": "optimizer-step"}),
        "timeline": charts.timeline_chart([(i, "forward" if i < 5 else "backward", i * GiB)
                                           for i in range(10)], usable_bytes=79 * GiB),
    }


@pytest.fixture(scope="module")
def specs() -> dict:
    return {k: c.to_dict() for k, c in build().items()} | \
        {f"{k}_empty": c.to_dict() for k, c in build(empty=True).items()}


def _numbers(node):
    if isinstance(node, dict):
        for v in node.values():
            yield from _numbers(v)
    elif isinstance(node, list):
        for v in node:
            yield from _numbers(v)
    elif isinstance(node, float):
        yield node


def _colors(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("color", "stroke", "fill") and isinstance(v, str) and v.startswith("#"):
                yield v
            elif k == "range" and isinstance(v, list):
                yield from (c for c in v if isinstance(c, str))
            elif k == "value" and isinstance(v, str) and v.startswith("#"):
                yield v
            else:
                yield from _colors(v)
    elif isinstance(node, list):
        for v in node:
            yield from _colors(v)


def test_every_chart_renders_to_svg_without_nan(specs):
    for name, spec in specs.items():
        svg = vlc.vegalite_to_svg(spec)
        assert svg.startswith("<svg"), name
        # an empty or null extent shows up as NaN coordinates in the SVG
        assert "NaN" not in svg and "Infinity" not in svg, name


def test_no_vega_lite_warnings(specs, tmp_path):
    """vl-convert prints compile warnings ('WARN ...') from its own thread: render in a child
    process and read everything it printed once it has exited."""
    import altair as alt

    code = ("import json, sys, vl_convert as v\n"
            "for s in json.load(open(sys.argv[1])).values():\n"
            "    v.vegalite_to_vega(s, show_warnings=True)\n")

    def printed(batch: dict) -> str:
        path = tmp_path / "specs.json"
        path.write_text(json.dumps(batch))
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout + out.stderr

    # the check itself: a step height under width="container" is a known warning
    control = alt.Chart(alt.Data(values=[{"a": "x", "b": 1}])).mark_bar().encode(
        y="a:N", x="b:Q").properties(width="container", height=alt.Step(18))
    assert "WARN" in printed({"control": control.to_dict()})
    text = printed(specs)
    assert "WARN" not in text, text


def test_no_nan_or_inf_anywhere_in_the_specs(specs):
    for name, spec in specs.items():
        assert all(math.isfinite(x) for x in _numbers(spec)), name
        json.dumps(spec, allow_nan=False)   # strict JSON, as the browser reads it


def test_one_visual_language(specs):
    allowed = set(theme.OKABE_ITO.values()) | {
        theme.FIT_COLOR, theme.NO_FIT_COLOR, theme.CHOSEN_COLOR, theme.LIMIT_COLOR,
        theme.NEUTRAL_COLOR, theme.LIGHT_COLOR, theme.INK, theme.MUTED, theme.GRID,
        theme.DOMAIN, theme.OTHER_COMPONENT, *theme.COMPONENT_PALETTE.values(), "white"}
    for name, spec in specs.items():
        assert spec["width"] == "container", name
        assert spec["config"]["font"] == theme.FONT, name
        assert spec["config"]["axis"]["labelFontSize"] == theme.LABEL_SIZE, name
        assert spec["title"]["fontSize"] == theme.TITLE_SIZE, name
        assert spec["title"]["anchor"] == "start", name
        used = set(_colors(spec))
        assert used <= allowed, (name, used - allowed)


def test_titles_carry_units(specs):
    for name in ("memory_curve", "gpu_comparison", "bandwidth", "waterfall", "phases",
                 "timeline"):
        title = theme.title_text(specs[name])
        assert any(u in title for u in ("GiB", "GB/s")), (name, title)
    assert "TFLOPS" in theme.title_text(specs["roofline"])
    assert "(samples)" in theme.title_text(specs["gpu_comparison_batch"])


def test_palette_is_okabe_ito():
    assert theme.OKABE_ITO == {
        "black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9",
        "bluish_green": "#009E73", "yellow": "#F0E442", "blue": "#0072B2",
        "vermillion": "#D55E00", "reddish_purple": "#CC79A7"}
    assert len(set(theme.PALETTE)) == 8
    assert theme.FIT_COLOR != theme.NO_FIT_COLOR


def test_charts_from_a_real_estimate_and_device():
    """The pipeline's own dicts go straight in: estimate(...).to_dict() and Device.to_dict()."""
    from vramplan.estimate import estimate
    from vramplan.hardware import get_gpu
    sc = {"model": "gpt2", "task": "train", "gpu": "nvidia-a100-sxm4-80gb"}
    est = estimate(sc).to_dict()
    dev = get_gpu(sc["gpu"]).to_dict()
    built = [charts.bandwidth_chart(est, gpu_name=dev["name"]), charts.roofline_chart(est, dev),
             charts.phases_chart(est), charts.hierarchy_chart(dev),
             charts.memory_curve_chart([{"x": est["scenario"]["batch_size"],
                                         "device_used_bytes":
                                             est["per_gpu"]["device_used_bytes"]}],
                                       gpu=est["gpu"], max_x=est["max_batch_size"])]
    for chart in built:
        spec = chart.to_dict()
        assert "NaN" not in vlc.vegalite_to_svg(spec)
    phase_totals = {r["phase"] for r in charts.phase_rows(est)}
    assert phase_totals == set(est["phases"])
