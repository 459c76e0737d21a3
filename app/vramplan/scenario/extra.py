"""The values of the workload-specific keys (render, volume, array, video): their vocabularies
and the readers of their structured values. Each reader returns the value normalised (plain
JSON: ints of bytes, lists, dicts) or raises a ScenarioError naming the key, dotted for nested
parts (`render_targets[1].format`, `video.codec`).

The keys themselves (type, range, tasks, default, doc) are rows of the key table,
`vramplan.scenario.keys`; docs/scenario-keys.md is generated from it.
"""
from __future__ import annotations

from typing import Any

from ..errors import ScenarioError
from ..readers import (read_bool, read_choice, read_int, read_list, read_name, read_num,
                       read_obj, read_shape)

__all__ = ["PIXEL_FORMATS", "ARRAY_DTYPES", "VIDEO_CODECS", "VIDEO_MODES",
           "VIDEO_SURFACE_FORMATS", "SOLVERS", "FFT_MODES", "MSAA_SAMPLES", "dtype_bytes",
           "format_bytes_per_pixel", "render_targets", "msaa", "patch", "arrays",
           "work_buffers", "video"]

# Bytes per pixel (per sample) of render-target formats (Vulkan / D3D formats of those names).
# d24s8 packs 24-bit depth + 8-bit stencil into 4 bytes; d32fs8 is stored as 8 bytes per
# sample on NVIDIA (32-bit depth plane + 8-bit stencil padded), a stated assumption.
PIXEL_FORMATS: dict[str, int] = {
    "r8": 1, "rg8": 2, "rgba8": 4, "bgra8": 4, "srgba8": 4, "rgb10a2": 4, "r11g11b10f": 4,
    "r16f": 2, "rg16f": 4, "rgba16f": 8, "rgba16": 8, "r32f": 4, "rg32f": 8, "rgba32f": 16,
    "r32ui": 4, "d16": 2, "d24s8": 4, "d32f": 4, "d32fs8": 8,
}

# Bytes per element of scientific array / voxel dtypes (numpy names).
ARRAY_DTYPES: dict[str, int] = {
    "bool": 1, "uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "float16": 2, "bfloat16": 2,
    "uint32": 4, "int32": 4, "float32": 4, "uint64": 8, "int64": 8, "float64": 8,
    "complex64": 8, "complex128": 16,
}

VIDEO_CODECS = ("h264", "hevc", "av1")
VIDEO_MODES = ("encode", "decode", "transcode")
# Bytes per pixel of NVENC/NVDEC surface formats: NV12 4:2:0 8-bit = 1.5 B/pixel,
# P010/P016 4:2:0 16-bit containers = 3 B/pixel, YUV444 8-bit = 3, YUV444 16-bit = 6.
VIDEO_SURFACE_FORMATS: dict[str, float] = {"nv12": 1.5, "p010": 3.0, "yuv444": 3.0,
                                           "yuv444-16": 6.0}
SOLVERS = ("none", "cg", "bicgstab", "gmres")
FFT_MODES = ("none", "in-place", "out-of-place")
FFT_DTYPES = ("complex64", "complex128")
SOLVER_DTYPES = ("float32", "float64", "complex64", "complex128")
MSAA_SAMPLES = (1, 2, 4, 8, 16)


def dtype_bytes(name: str) -> int:
    return ARRAY_DTYPES[name]


def format_bytes_per_pixel(name: str) -> int:
    return PIXEL_FORMATS[name]


def _choice(key: str, v: Any, allowed) -> str:
    return read_choice(key, v, allowed, fold_case=True)


def _int(key: str, v: Any, lo: int, hi: int) -> int:
    return read_int(key, v, lo, hi, whole_floats=True)


# --- render -----------------------------------------------------------------------------------

def render_targets(v: Any) -> list[dict]:
    """List of {"format", "count" (default 1), "name", "scale" (fraction of the resolution per
    side, default 1), "msaa" (true: multisampled with the scenario's msaa, default true for
    colour/depth of the main pass)}."""
    out = []
    for i, t in enumerate(read_list("render_targets", v, 64)):
        k = f"render_targets[{i}]"
        t = read_obj(k, t, ("format", "count", "name", "scale", "msaa"), ("format",))
        out.append({
            "name": read_name(f"{k}.name", t.get("name", f"target{i}")),
            "format": _choice(f"{k}.format", t["format"], tuple(PIXEL_FORMATS)),
            "count": _int(f"{k}.count", t.get("count", 1), 1, 16),
            "scale": read_num(f"{k}.scale", t.get("scale", 1.0), 0.0, 4.0, lo_open=True,
                              as_float=True),
            "msaa": read_bool(f"{k}.msaa", t.get("msaa", True)),
        })
    return out


def msaa(v: Any) -> int:
    n = _int("msaa", v, 1, 16)
    if n not in MSAA_SAMPLES:
        raise ScenarioError("msaa", f"must be 1, 2, 4, 8 or 16 samples, got {n}")
    return n


# --- volume -----------------------------------------------------------------------------------

def patch(v: Any) -> list[int] | None:
    if v is None:
        return None
    return read_shape("patch", v, (3, 3))


# --- array ------------------------------------------------------------------------------------

def arrays(v: Any) -> list[dict]:
    """List of {"name", "shape" [ints], "dtype", "count" (copies of it, default 1)}."""
    out, seen = [], set()
    for i, a in enumerate(read_list("arrays", v, 256)):
        k = f"arrays[{i}]"
        a = read_obj(k, a, ("name", "shape", "dtype", "count"), ("shape",))
        name = read_name(f"{k}.name", a.get("name", f"a{i}"))
        if name in seen:
            raise ScenarioError(f"{k}.name", f"duplicate array name '{name}'")
        seen.add(name)
        out.append({"name": name, "shape": read_shape(f"{k}.shape", a["shape"]),
                    "dtype": _choice(f"{k}.dtype", a.get("dtype", "float32"),
                                     tuple(ARRAY_DTYPES)),
                    "count": _int(f"{k}.count", a.get("count", 1), 1, 1024)})
    return out


def work_buffers(v: Any) -> dict:
    """{"fft": "none"|"in-place"|"out-of-place" (true = out-of-place), "fft_dtype",
    "solver": "none"|"cg"|"bicgstab"|"gmres", "restart" (GMRES m, default 30), "solver_dtype"}."""
    v = read_obj("work_buffers", v, ("fft", "fft_dtype", "solver", "restart", "solver_dtype"))
    fft = v.get("fft", "none")
    if isinstance(fft, bool):
        fft = "out-of-place" if fft else "none"
    return {
        "fft": _choice("work_buffers.fft", fft, FFT_MODES),
        "fft_dtype": _choice("work_buffers.fft_dtype", v.get("fft_dtype", "complex64"),
                             FFT_DTYPES),
        "solver": _choice("work_buffers.solver", v.get("solver", "none"), SOLVERS),
        "restart": _int("work_buffers.restart", v.get("restart", 30), 1, 1000),
        "solver_dtype": _choice("work_buffers.solver_dtype", v.get("solver_dtype", "float64"),
                                SOLVER_DTYPES),
    }


# --- video ------------------------------------------------------------------------------------

def video(v: Any) -> dict | None:
    """NVENC/NVDEC sessions: {"mode", "codec", "streams", "format", "surfaces", "lookahead",
    "bframes"}."""
    if v is None:
        return None
    v = read_obj("video", v, ("mode", "codec", "streams", "format", "surfaces", "lookahead",
                              "bframes"))
    return {
        "mode": _choice("video.mode", v.get("mode", "encode"), VIDEO_MODES),
        "codec": _choice("video.codec", v.get("codec", "h264"), VIDEO_CODECS),
        "streams": _int("video.streams", v.get("streams", 1), 1, 128),
        "format": _choice("video.format", v.get("format", "nv12"), tuple(VIDEO_SURFACE_FORMATS)),
        "surfaces": _int("video.surfaces", v.get("surfaces", 0), 0, 64),
        "lookahead": _int("video.lookahead", v.get("lookahead", 0), 0, 32),
        "bframes": _int("video.bframes", v.get("bframes", 0), 0, 4),
    }
