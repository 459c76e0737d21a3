"""Workload-specific scenario keys (the contract lets the project add them; SCENARIO.md).

`EXTRA_KEYS` maps each key to a validator `validator(value) -> normalised value` that raises
`ScenarioError(key, message)` naming the key (dotted for nested parts, e.g.
`render_targets[1].format`). `EXTRA_DEFAULTS(task)` gives the defaults for a task; `KEY_TASKS`
says which tasks read each key. `Scenario.from_dict` accepts these keys and stores them,
normalised, in `scenario.extra`; `normalise_extra(d, task)` does the whole job for a dict.

Everything here is plain data in, plain data out (ints of bytes, lists, dicts), so a scenario
with extra keys still round-trips through JSON and URLs. docs/scenario-keys.md documents each key.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from .errors import ScenarioError
from .units import UnitError, parse_bytes

__all__ = ["EXTRA_KEYS", "EXTRA_DEFAULTS", "KEY_TASKS", "normalise_extra", "PIXEL_FORMATS",
           "ARRAY_DTYPES", "VIDEO_CODECS", "VIDEO_SURFACE_FORMATS", "dtype_bytes", "format_bytes_per_pixel"]

# --- vocabularies -----------------------------------------------------------------------------

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


def dtype_bytes(name: str) -> int:
    return ARRAY_DTYPES[name]


def format_bytes_per_pixel(name: str) -> int:
    return PIXEL_FORMATS[name]


# --- small validators -------------------------------------------------------------------------

def _int(key: str, v: Any, lo: int, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and
                                                                  (not math.isfinite(v) or
                                                                   not v.is_integer())):
        raise ScenarioError(key, f"must be an integer, got {v!r}")
    v = int(v)
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"between {lo} and {hi}"
        raise ScenarioError(key, f"must be {rng}, got {v}")
    return v


def _num(key: str, v: Any, lo: float, hi: float, lo_open: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ScenarioError(key, f"must be a number, got {v!r}")
    if v < lo or v > hi or (lo_open and v == lo):
        op = ">" if lo_open else ">="
        raise ScenarioError(key, f"must be {op} {lo} and <= {hi}, got {v}")
    return float(v)


def _choice(key: str, v: Any, allowed) -> str:
    if not isinstance(v, str):
        raise ScenarioError(key, f"must be a string, one of {', '.join(allowed)}; got {v!r}")
    s = v.strip().lower()
    if s not in allowed:
        raise ScenarioError(key, f"unknown value '{v}'; one of {', '.join(allowed)}")
    return s


def _size(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise ScenarioError(key, f"must be a size such as '2 GiB' or a number of bytes, got {v!r}")
    try:
        n = parse_bytes(v)
    except UnitError as exc:
        raise ScenarioError(key, str(exc)) from None
    except (OverflowError, ValueError):
        raise ScenarioError(key, f"{v!r} is not a size vramplan accepts (too large)") from None
    if n > 2**50:
        raise ScenarioError(key, f"{v!r} is more than 1 PiB: not a GPU budget")
    return n


def _obj(key: str, v: Any, allowed: set[str], required: set[str] = frozenset()) -> dict:
    if not isinstance(v, dict):
        raise ScenarioError(key, f"must be an object, got {type(v).__name__}")
    unknown = sorted(set(v) - allowed)
    if unknown:
        raise ScenarioError(f"{key}.{unknown[0]}", f"unknown key; allowed: {', '.join(sorted(allowed))}")
    missing = sorted(required - set(v))
    if missing:
        raise ScenarioError(f"{key}.{missing[0]}", "is required")
    return v


def _list(key: str, v: Any, max_len: int = 256) -> list:
    if not isinstance(v, (list, tuple)):
        raise ScenarioError(key, f"must be a list, got {type(v).__name__}")
    if len(v) > max_len:
        raise ScenarioError(key, f"at most {max_len} entries, got {len(v)}")
    return list(v)


def _name(key: str, v: Any) -> str:
    if not isinstance(v, str) or not v.strip() or len(v) > 64:
        raise ScenarioError(key, f"must be a non-empty string of at most 64 characters, got {v!r}")
    return v.strip()


def _shape(key: str, v: Any, ndim: tuple[int, int] = (1, 8)) -> list[int]:
    items = _list(key, v, ndim[1])
    if len(items) < ndim[0]:
        raise ScenarioError(key, f"needs {ndim[0]} to {ndim[1]} dimensions, got {len(items)}")
    return [_int(f"{key}[{i}]", x, 1, 2**31) for i, x in enumerate(items)]


# --- render -----------------------------------------------------------------------------------

def render_targets(v: Any) -> list[dict]:
    """List of {"format", "count" (default 1), "name", "scale" (fraction of the resolution per
    side, default 1), "msaa" (true: multisampled with the scenario's msaa, default true for
    colour/depth of the main pass)}."""
    out = []
    for i, t in enumerate(_list("render_targets", v, 64)):
        k = f"render_targets[{i}]"
        t = _obj(k, t, {"format", "count", "name", "scale", "msaa"}, {"format"})
        out.append({
            "name": _name(f"{k}.name", t.get("name", f"target{i}")),
            "format": _choice(f"{k}.format", t["format"], tuple(PIXEL_FORMATS)),
            "count": _int(f"{k}.count", t.get("count", 1), 1, 16),
            "scale": _num(f"{k}.scale", t.get("scale", 1.0), 0.0, 4.0, lo_open=True),
            "msaa": _bool(f"{k}.msaa", t.get("msaa", True)),
        })
    return out


def _bool(key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ScenarioError(key, f"must be true or false, got {v!r}")
    return v


def msaa(v: Any) -> int:
    n = _int("msaa", v, 1, 16)
    if n not in (1, 2, 4, 8, 16):
        raise ScenarioError("msaa", f"must be 1, 2, 4, 8 or 16 samples, got {n}")
    return n


# --- volume -----------------------------------------------------------------------------------

def _patch(v: Any) -> list[int] | None:
    if v is None:
        return None
    return _shape("patch", v, (3, 3))


# --- array ------------------------------------------------------------------------------------

def arrays(v: Any) -> list[dict]:
    """List of {"name", "shape" [ints], "dtype", "count" (copies of it, default 1)}."""
    out, seen = [], set()
    for i, a in enumerate(_list("arrays", v, 256)):
        k = f"arrays[{i}]"
        a = _obj(k, a, {"name", "shape", "dtype", "count"}, {"shape"})
        name = _name(f"{k}.name", a.get("name", f"a{i}"))
        if name in seen:
            raise ScenarioError(f"{k}.name", f"duplicate array name '{name}'")
        seen.add(name)
        out.append({"name": name, "shape": _shape(f"{k}.shape", a["shape"]),
                    "dtype": _choice(f"{k}.dtype", a.get("dtype", "float32"), tuple(ARRAY_DTYPES)),
                    "count": _int(f"{k}.count", a.get("count", 1), 1, 1024)})
    return out


def work_buffers(v: Any) -> dict:
    """{"fft": "none"|"in-place"|"out-of-place" (true = out-of-place), "fft_dtype",
    "solver": "none"|"cg"|"bicgstab"|"gmres", "restart" (GMRES m, default 30), "solver_dtype"}."""
    v = _obj("work_buffers", v, {"fft", "fft_dtype", "solver", "restart", "solver_dtype"})
    fft = v.get("fft", "none")
    if isinstance(fft, bool):
        fft = "out-of-place" if fft else "none"
    return {
        "fft": _choice("work_buffers.fft", fft, FFT_MODES),
        "fft_dtype": _choice("work_buffers.fft_dtype", v.get("fft_dtype", "complex64"),
                             ("complex64", "complex128")),
        "solver": _choice("work_buffers.solver", v.get("solver", "none"), SOLVERS),
        "restart": _int("work_buffers.restart", v.get("restart", 30), 1, 1000),
        "solver_dtype": _choice("work_buffers.solver_dtype", v.get("solver_dtype", "float64"),
                                ("float32", "float64", "complex64", "complex128")),
    }


# --- video ------------------------------------------------------------------------------------

def video(v: Any) -> dict | None:
    """NVENC/NVDEC sessions: {"mode", "codec", "streams", "format", "surfaces", "lookahead"}."""
    if v is None:
        return None
    v = _obj("video", v, {"mode", "codec", "streams", "format", "surfaces", "lookahead", "bframes"})
    return {
        "mode": _choice("video.mode", v.get("mode", "encode"), VIDEO_MODES),
        "codec": _choice("video.codec", v.get("codec", "h264"), VIDEO_CODECS),
        "streams": _int("video.streams", v.get("streams", 1), 1, 128),
        "format": _choice("video.format", v.get("format", "nv12"), tuple(VIDEO_SURFACE_FORMATS)),
        "surfaces": _int("video.surfaces", v.get("surfaces", 0), 0, 64),
        "lookahead": _int("video.lookahead", v.get("lookahead", 0), 0, 32),
        "bframes": _int("video.bframes", v.get("bframes", 0), 0, 4),
    }


# --- the table --------------------------------------------------------------------------------

EXTRA_KEYS: dict[str, Callable[[Any], Any]] = {
    # render (task "render"; allocator 'driver')
    "render_targets": render_targets,
    "msaa": msaa,
    "swapchain_images": lambda v: _int("swapchain_images", v, 1, 8),
    "frames_in_flight": lambda v: _int("frames_in_flight", v, 1, 8),
    "texture_budget": lambda v: _size("texture_budget", v),
    "geometry_budget": lambda v: _size("geometry_budget", v),
    "fps": lambda v: _num("fps", v, 0.0, 1000.0, lo_open=True),
    "overdraw": lambda v: _num("overdraw", v, 1.0, 50.0),
    "texture_bytes_per_pixel": lambda v: _num("texture_bytes_per_pixel", v, 0.0, 1024.0),
    # volume (task "volume")
    "channels": lambda v: _int("channels", v, 1, 4096),
    "dtype": lambda v: _choice("dtype", v, tuple(ARRAY_DTYPES)),
    "copies": lambda v: _int("copies", v, 1, 64),
    "patch": _patch,
    # array (task "array")
    "arrays": arrays,
    "work_buffers": work_buffers,
    # video (task "render" with a `video` object; see docs/workloads.md)
    "video": video,
}

KEY_TASKS: dict[str, tuple[str, ...]] = {
    "render_targets": ("render",), "msaa": ("render",), "swapchain_images": ("render",),
    "frames_in_flight": ("render",), "texture_budget": ("render",),
    "geometry_budget": ("render",), "fps": ("render",), "overdraw": ("render",),
    "texture_bytes_per_pixel": ("render",),
    "channels": ("volume",), "dtype": ("volume", "array"), "copies": ("volume", "array"),
    "patch": ("volume",),
    "arrays": ("array",), "work_buffers": ("array", "volume"),
    "video": ("render",),
}

_DEFAULTS: dict[str, dict[str, Any]] = {
    "render": {
        "render_targets": [
            {"name": "color", "format": "rgba8", "count": 1, "scale": 1.0, "msaa": True},
            {"name": "depth", "format": "d32f", "count": 1, "scale": 1.0, "msaa": True},
        ],
        "msaa": 1, "swapchain_images": 3, "frames_in_flight": 2, "texture_budget": 0,
        "geometry_budget": 0, "fps": 60.0, "overdraw": 2.0, "texture_bytes_per_pixel": 16.0,
        "video": None,
    },
    "volume": {"channels": 1, "dtype": "float32", "copies": 3, "patch": None,
               "work_buffers": work_buffers({})},
    "array": {"arrays": [], "work_buffers": work_buffers({}), "copies": 1},
}


def EXTRA_DEFAULTS(task: str) -> dict:  # noqa: N802 (the name the architecture fixed)
    """Defaults of the extra keys a task reads (a fresh copy; empty for other tasks)."""
    import copy
    return copy.deepcopy(_DEFAULTS.get(task, {}))


def normalise_extra(d: dict, task: str) -> dict:
    """Validate the extra keys present in `d` (a scenario dict; contract keys are ignored) and
    return defaults(task) updated with the normalised values. A key that the task does not read
    is refused, so a typo'd task does not silently ignore a render budget."""
    out = EXTRA_DEFAULTS(task)
    for k, v in d.items():
        if k not in EXTRA_KEYS:
            continue
        tasks = KEY_TASKS.get(k, ())
        if tasks and task not in tasks:
            raise ScenarioError(k, f"applies to task {' / '.join(tasks)}, not '{task}'")
        out[k] = EXTRA_KEYS[k](v)
    return out
