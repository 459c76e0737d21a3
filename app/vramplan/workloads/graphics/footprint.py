"""Graphics frames (task "render"): render targets, swapchain, textures, geometry, and the
memory bandwidth a frame needs at a frame rate. Allocator 'driver': a graphics API allocates
its images and buffers directly, so reserved == allocated.

Memory: each render target is width x height x bytes-per-sample x samples (MSAA applies to
targets marked `msaa`), times `count`; the swapchain holds `swapchain_images` presentable 8-bit
images (also the MSAA resolve destination); textures and geometry are the stated budgets.

Bandwidth per frame (bytes moved through DRAM, no compression or cache reuse assumed):
- geometry pass: each of `overdraw` fragments per pixel tests depth (read + write) and writes
  every colour target of the pass, per MSAA sample, and samples textures
  (`texture_bytes_per_pixel` per fragment);
- deferred lighting when there are several colour targets (a G-buffer): read them once per
  sample and write the first (lit) target;
- MSAA resolve: read every sample of the first colour target, write one pixel to the swapchain;
- present: the display engine scans the swapchain image out once per frame.
The seed articles' rules of thumb sit beside it: "memory = resolution x depth x 3" and
"4K60 = 3840 x 2160 x 4 x 60 = 1.9 GB/s" (one write of the final image per frame).
"""
from __future__ import annotations

import math

from ...scenario.extra import PIXEL_FORMATS
from ...units import counted
from ..base import Footprint, extra_of
from .family import DEFAULT_RESOLUTION
from .video import seed_check, video_bytes

DEPTH_FORMATS = ("d16", "d24s8", "d32f", "d32fs8")


def target_bytes(width: int, height: int, fmt: str, samples: int = 1, count: int = 1,
                 scale: float = 1.0) -> int:
    """Bytes of a render target: 3840 x 2160 rgba8 = 33,177,600."""
    w, h = math.ceil(width * scale), math.ceil(height * scale)
    return w * h * PIXEL_FORMATS[fmt] * samples * count


def frame_bandwidth(width: int, height: int, ex: dict) -> dict[str, int]:
    """Bytes moved per frame, by pass."""
    px = width * height
    ms = ex["msaa"]
    colour = [t for t in ex["render_targets"] if t["format"] not in DEPTH_FORMATS]
    depth = [t for t in ex["render_targets"] if t["format"] in DEPTH_FORMATS]
    od = ex["overdraw"]

    def per_px(ts):
        return sum(PIXEL_FORMATS[t["format"]] * t["count"] * t["scale"] ** 2 *
                   (ms if t["msaa"] else 1) for t in ts)
    out = {
        "depth_test": int(px * od * 2 * per_px(depth)),
        "colour_writes": int(px * od * per_px(colour)),
        "texture_reads": int(px * od * ex["texture_bytes_per_pixel"]),
    }
    if len(colour) > 1 or (colour and colour[0]["count"] > 1):
        first = colour[0]
        out["lighting"] = int(px * per_px(colour) +
                              px * PIXEL_FORMATS[first["format"]] * (ms if first["msaa"] else 1))
    if ms > 1 and colour:
        out["msaa_resolve"] = int(px * PIXEL_FORMATS[colour[0]["format"]] * ms + px * 4)
    out["present_scanout"] = int(px * 4 * (2 if colour else 1))   # final copy/blit + scanout
    return out


def rule_of_thumb(width: int, height: int, fps: float, detailed_bytes_per_s: float,
                  detailed_memory: int) -> dict:
    return {
        "memory_bytes": width * height * 4 * 3,
        "memory_rule": "resolution x depth (4 B) x 3 (frame buffer + texture + Z buffer)",
        "bandwidth_bytes_per_s": width * height * 4 * fps,
        "bandwidth_rule": "resolution x 4 B x fps (4K60 = 1.99 GB/s, the seed's '1.9 GB/s')",
        "why_different": "the rule counts the final image written once per frame; a frame also "
                         "tests and writes depth for every overdrawn fragment, writes every "
                         "G-buffer target, samples textures, resolves MSAA samples and is scanned "
                         "out by the display, and real scenes keep textures and geometry far larger "
                         "than one frame buffer. Detailed: "
                         f"{detailed_memory / 1e9:.2f} GB, {detailed_bytes_per_s / 1e9:.1f} GB/s.",
    }


def footprint(scenario, spec, device) -> Footprint:
    ex = extra_of(scenario, "render")
    res = scenario.resolution or DEFAULT_RESOLUTION
    height, width = int(res[-2]), int(res[-1])
    ms = ex["msaa"]
    targets = sum(target_bytes(width, height, t["format"], ms if t["msaa"] else 1, t["count"],
                               t["scale"]) for t in ex["render_targets"])
    swap = ex["swapchain_images"] * target_bytes(width, height, "bgra8")
    comps = {"frame_buffers": targets, "swapchain": swap if ex["render_targets"] else 0,
             "textures": int(ex["texture_budget"]), "geometry": int(ex["geometry_budget"])}
    notes = [f"render {width}x{height}, MSAA x{ms}, "
             f"{counted(len(ex['render_targets']), 'target kind')}, "
             f"{counted(ex['swapchain_images'], 'swapchain image')}; driver allocations "
             "(reserved = allocated)"]
    bw_parts = frame_bandwidth(width, height, ex) if ex["render_targets"] else {}
    per_frame = sum(bw_parts.values())
    fps = ex["fps"]
    bw = {"bytes_per_frame": int(per_frame), "fps": fps, "bytes_per_s": int(per_frame * fps),
          "by_pass_per_frame": bw_parts}
    if device is not None and getattr(device, "bandwidth_gbs", None):
        avail = device.bandwidth_gbs * 1e9 * float(getattr(device, "achievable_bandwidth_fraction",
                                                           0.85) or 0.85)
        bw["achievable_bytes_per_s"] = int(avail)
        bw["utilisation"] = round(per_frame * fps / avail, 4) if avail else None
        bw["max_fps_by_bandwidth"] = round(avail / per_frame, 1) if per_frame else None
    if ex.get("video"):
        vb = video_bytes(ex["video"], height, width)
        comps.update(vb)
        bw["video_check"] = seed_check(ex["video"], height, width, sum(vb.values()))
        notes.append("video sessions: surfaces from the Video Codec SDK sample counts; the "
                     "driver's per-session scratch is not modelled")
    total = sum(comps.values())
    bw["rule_of_thumb"] = rule_of_thumb(width, height, fps, per_frame * fps, total)
    largest = max([target_bytes(width, height, t["format"], ms if t["msaa"] else 1, 1, t["scale"])
                   for t in ex["render_targets"]] + [0])
    return Footprint(components=comps, peak_phase="frame", largest_allocation=int(largest),
                     allocator="driver", bandwidth=bw, notes=notes,
                     batch_capacity=1)  # batch_size does not apply: one frame / array set
