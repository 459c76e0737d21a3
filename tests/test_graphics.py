from hypothesis import given, settings, strategies as st

from vramplan.scenario import Scenario
from vramplan.workloads.dispatch import footprint
from vramplan.workloads.graphics.footprint import target_bytes


def fp(**kw):
    sc = Scenario.from_dict({"task": "render", **kw})
    return footprint(sc, None, None)


def test_4k_rgba8_target_is_exact():
    assert target_bytes(3840, 2160, "rgba8") == 33_177_600


def test_default_frame_and_driver_allocator():
    f = fp(resolution=[2160, 3840])
    assert f.allocator == "driver"
    assert f.components["frame_buffers"] == 33_177_600 * 2          # rgba8 + d32f
    assert f.components["swapchain"] == 3 * 33_177_600
    rt = f.bandwidth["rule_of_thumb"]
    assert rt["bandwidth_bytes_per_s"] == 33_177_600 * 60           # the seed's 1.9 GB/s
    assert f.bandwidth["bytes_per_s"] > 10 * rt["bandwidth_bytes_per_s"]


def test_msaa_and_gbuffer():
    one = fp(resolution=[1080, 1920]).components["frame_buffers"]
    four = fp(resolution=[1080, 1920], msaa=4).components["frame_buffers"]
    assert four == 4 * one
    g = fp(resolution=[1080, 1920], render_targets=[
        {"format": "rgba16f"}, {"format": "rgba8", "count": 2}, {"format": "d24s8"}])
    assert g.components["frame_buffers"] == 1920 * 1080 * (8 + 8 + 4)
    assert "lighting" in g.bandwidth["by_pass_per_frame"]


def test_video_three_4k_encodes_far_below_seed():
    f = fp(resolution=[2160, 3840], render_targets=[], video={"streams": 3})
    total = sum(f.components.values())
    assert 3 * 3840 * 2160 * 1.5 < total < 12e9 / 10
    assert "why_different" in f.bandwidth["video_check"]


@settings(max_examples=25, deadline=None)
@given(st.integers(64, 4096), st.integers(64, 4096), st.integers(1, 200))
def test_memory_grows_with_resolution(h, w, d):
    a = fp(resolution=[h, w]).peak_allocated_bytes
    b = fp(resolution=[h + d, w]).peak_allocated_bytes
    assert b > a
