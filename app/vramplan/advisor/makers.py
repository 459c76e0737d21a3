"""Lever makers for serving engines, diffusion pipelines, volumes, arrays and frames (the
training and layout ones are in `levers.py`): each takes the plan's `Ctx` and proposes
(title, changes to the scenario dict) or None where it does not apply."""
from __future__ import annotations

from ..vocab import QUANTISED

WIDE = ("fp32", "tf32")
DTYPE_DOWN = {"float64": "float32", "complex128": "complex64", "float32": "float16"}


def _add(ctx, key: str, name: str):
    cur = tuple(getattr(ctx.sc, key))
    if name in cur or not ctx.offers(key, name):
        return None
    return {key: sorted(cur + (name,))}


def _half(ctx) -> str:
    return "bf16" if ctx.supports("bf16") else "fp16"


# ---- serving ----------------------------------------------------------------------------------

def serving(key, title, value):
    def make(ctx):
        sv = ctx.sc.serving
        if ctx.task != "serve" or sv is None:
            return None
        v = value(ctx, sv)
        if v is None or v == getattr(sv, key):
            return None
        return title(v) if callable(title) else title, serving_change(ctx.sc, key, v)
    return make


def serving_change(sc, key: str, v) -> dict:
    """The changes that set serving.<key> to `v` and let the scenario re-derive what follows
    from it (`scenario.keys.derive`: max_num_batched_tokens from max_model_len, batch_size
    from max_num_seqs, seq_len from max_model_len) unless those were given; a given seq_len
    longer than the new max_model_len is cut to it."""
    given = sc.given_dict()
    ch = {"serving": {**given.get("serving", {}), key: v}}
    coupled = {"max_model_len": "seq_len", "max_num_seqs": "batch_size"}.get(key)
    if coupled is not None and coupled not in given:
        ch[coupled] = None                    # derived: it follows the new value
    elif coupled is not None:                 # given: at most the new value
        ch[coupled] = min(getattr(sc, coupled), v)
    return ch


def fitting_utilisation(ctx, sv):
    """The gpu_memory_utilization that brings device used under the limit (None if it
    fits already or would fall below 0.3)."""
    over = ctx.est.device_used_bytes - ctx.limit
    if over <= 0:
        return None
    u = int((sv.gpu_memory_utilization - over / ctx.traits.usable_bytes) * 100) / 100
    return u if u >= 0.3 else None


# ---- diffusion ------------------------------------------------------------------------------

def _components(ctx, kinds):
    cfg = ctx.spec.config.get("components", {}) if ctx.family == "diffusion" else {}
    return [n for n, c in cfg.items() if c["kind"] in kinds]


def text_encoders_16bit(ctx):
    names = [n for n in _components(ctx, ("clip-text", "t5-encoder"))
             if ctx.sc.precision_for(n) in WIDE]
    if not names or ctx.prec in WIDE:
        return None
    cur = ctx.sc.precision if isinstance(ctx.sc.precision, dict) else {"default": ctx.prec}
    return "text encoders in 16 bit", {"precision": {**cur, **{n: _half(ctx) for n in names}}}


def quantise_t5(ctx):
    names = [n for n in _components(ctx, ("t5-encoder",))
             if ctx.sc.precision_for(n) not in QUANTISED]
    if not names or ctx.training or ctx.prec in QUANTISED:
        return None
    cur = ctx.sc.precision if isinstance(ctx.sc.precision, dict) else {"default": ctx.prec}
    return "T5 text encoder in int8", {"precision": {**cur, **{n: "int8" for n in names}}}


def layerwise_fp8(ctx):
    den = [n for n in _components(ctx, ("unet", "flux", "mmdit", "dit", "transformer",
                                         "cogvideox", "pixart")) if n in ("unet", "transformer")]
    ch = _add(ctx, "options", "layerwise-casting")
    if not den or not ch or ctx.training or ctx.prec in QUANTISED:
        return None
    cur = ctx.sc.precision if isinstance(ctx.sc.precision, dict) else {"default": ctx.prec}
    return ("denoiser weights stored in fp8, upcast layer by layer",
            {**ch, "precision": {**cur, den[0]: "fp8"}})


# ---- volumes, arrays, frames ------------------------------------------------------------------

def array_dtype(ctx):
    ex = ctx.sc.extra
    if ctx.task == "volume" and ex.get("dtype") in DTYPE_DOWN:
        return f"voxels in {DTYPE_DOWN[ex['dtype']]}", {"dtype": DTYPE_DOWN[ex["dtype"]]}
    if ctx.task == "array" and ex.get("arrays"):
        arrs = [dict(a) for a in ex["arrays"]]
        hit = [a for a in arrs if a.get("dtype", "float32") in DTYPE_DOWN]
        if not hit:
            return None
        for a in hit:
            a["dtype"] = DTYPE_DOWN[a.get("dtype", "float32")]
        return "arrays in half the width (float64 -> float32, float32 -> float16)", \
            {"arrays": arrs}
    return None


def fewer_copies(ctx):
    c = ctx.sc.extra.get("copies")
    if ctx.task not in ("volume", "array") or not c or c < 2:
        return None
    return f"{c} -> {c - 1} copies resident (work in place)", {"copies": c - 1}


def fft_in_place(ctx):
    wb = ctx.sc.extra.get("work_buffers") or {}
    if wb.get("fft") != "out-of-place":
        return None
    return "in-place FFT", {"work_buffers": {**wb, "fft": "in-place"}}


def render(key, title, value):
    def make(ctx):
        if ctx.task != "render":
            return None
        cur = ctx.sc.extra.get(key)
        v = value(cur)
        return (title(cur, v), {key: v}) if v is not None and v != cur else None
    return make


def formats_down(targets):
    """Render targets with RGBA32F narrowed to RGBA16F (None if there is none)."""
    if not targets:
        return None
    out = [dict(t, format="rgba16f") if t.get("format") == "rgba32f" else dict(t)
           for t in targets]
    return out if out != list(targets) else None
