"""What a plan asks of the GPU generation, checked against `hwdb/generations.toml`: bf16
arithmetic, FP8 tensor cores, the FlashAttention-2 kernels. Plain strings in, warnings out
(the footprints put them in their notes); reads device traits or a Device.

Facts and sources: generations.toml (Transformer Engine support matrix: bf16 needs compute
capability 8.0+, FP8 8.9+; FlashAttention README: FA2 runs on Ampere, Ada, Hopper and newer).
A device whose generation is unknown (non-NVIDIA, a user entry) gets no warning.
"""
from __future__ import annotations

# THE precision -> compute-rate table (the estimate's `vramplan.timing`, the roofline chart and
# every other reader go through `compute_dtype` / `dense_rate` below): the dense-throughput key
# (hwdb `throughput`) whose rate a precision's matmuls run at
COMPUTE_RATE_DTYPE = {
    "fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "fp16-mixed": "fp16", "bf16": "bf16",
    "bf16-mixed": "bf16", "fp8": "fp8", "int8": "fp16", "int4": "fp16", "nf4": "fp16",
    # low-precision training: the converted linears' matmuls run MXFP8 / NVFP4 scaled_mm
    # (torchao mx_mm, nvfp4_mm_triton); where a GPU has no fp4 figure, its fp8 rate
    "mxfp8-train": "fp8", "nvfp4-train": "fp4"}
# when the database has no figure for a dtype (or the GPU's generation cannot compute it): what
# runs instead (bf16 without bf16 tensor cores runs emulated, at the fp32 rate; see plan_warnings)
RATE_FALLBACK = {"fp4": ("fp8",), "fp8": ("bf16", "fp16"), "bf16": ("fp32",), "fp16": ("fp32",),
                 "tf32": ("fp32",), "fp32": ("fp32_matrix",)}
# the throughput keys a generation capability gates
_GATED = {"bf16": "bf16", "fp8": "fp8"}


def compute_dtype(precision: str, options=()) -> str:
    """The throughput key a plan's matmuls use: the 16-bit type of AMP and pure 16-bit plans,
    fp8 for fp8 weights (W8A8) and float8 training, fp16 for weight-only int8/int4/nf4
    (dequantised into fp16 matmuls, as bitsandbytes / GPTQ loads run). A throughput key itself
    maps to itself."""
    if "float8-linears" in set(options or ()):
        return "fp8"
    return COMPUTE_RATE_DTYPE.get(str(precision or "").lower(), "bf16")


def _throughput(device) -> dict:
    if isinstance(device, dict):
        table = device.get("throughput_tflops_dense") or device.get("throughput") or {}
    else:
        table = getattr(device, "throughput", None) or {}
    return dict(table) if isinstance(table, (dict, tuple, list)) else {}


def dense_rate(device, dtype: str) -> tuple[float | None, str]:
    """(dense datasheet TFLOPS, the throughput key it is for) of `dtype` on `device` (a Device,
    DeviceTraits or Device.to_dict()): the dtype itself where the GPU has a figure and its
    generation can compute it, else along RATE_FALLBACK; (None, dtype) when none is known."""
    table = _throughput(device)
    queue, seen = [dtype], set()
    while queue:
        k = queue.pop(0)
        if k in seen:
            continue
        seen.add(k)
        v = table.get(k)
        ok = v is not None and isinstance(v, (int, float)) and v == v and v > 0
        if ok and not (k in _GATED and _supports(device, _GATED[k]) is False):
            return float(v), k
        queue += list(RATE_FALLBACK.get(k, ()))
    return None, dtype


def compute_rate(device, precision: str, options=()) -> tuple[float | None, str]:
    """(dense TFLOPS, throughput key) a plan in `precision` computes at on `device`."""
    return dense_rate(device, compute_dtype(precision, options))


def _supports(device, cap: str):
    if device is None:
        return None
    f = getattr(device, "supports", None)
    if callable(f):
        return f(cap)
    caps = device.get("capabilities") if isinstance(device, dict) else getattr(
        device, "capabilities", None)
    return dict(caps or {}).get(cap)


def _where(device) -> str:
    cc = getattr(device, "compute_capability", None)
    return f"{device.id} (compute capability {cc})" if cc else device.id


def plan_warnings(device, *, precisions=(), attention: str | None = None,
                  options=(), compute: bool = True) -> list[str]:
    """Warnings for a plan on `device`: `precisions` used (names of the contract),
    `attention` kernel, `options`; `compute` False for plans that run no kernels (load)."""
    if device is None or not compute:
        return []
    out = []
    precs = set(precisions)
    if precs & {"bf16", "bf16-mixed"} and _supports(device, "bf16") is False:
        p = "/".join(sorted(precs & {"bf16", "bf16-mixed"}))
        out.append(f"{p} on {_where(device)}: no bf16 tensor cores before compute capability "
                   "8.0 (Transformer Engine support matrix); PyTorch runs bf16 matmuls emulated, "
                   "far slower than fp16, and torch < 1.10 refuses. fp16 / fp16-mixed hold the "
                   "same memory and use the tensor cores (the default precision on this GPU).")
    fp8 = "fp8" in precs or "float8-linears" in set(options or ())
    if fp8 and _supports(device, "fp8") is False:
        out.append(f"fp8 on {_where(device)}: FP8 tensor cores need compute capability 8.9+ "
                   "(Ada, Hopper, Blackwell); torchao float8 training and Transformer Engine "
                   "refuse here, inference engines fall back to weight-only fp8 (e.g. vLLM's "
                   "Marlin kernels): memory as estimated, matmuls in 16 bit")
    if attention == "flash" and _supports(device, "flash_attention_2") is False:
        out.append(f"attention 'flash' on {_where(device)}: FlashAttention-2 needs compute "
                   "capability 8.0+ (Ampere or newer; FlashAttention README); the flash-attn "
                   "package and HF attn_implementation='flash_attention_2' raise here. The "
                   "estimate stands for PyTorch SDPA's memory-efficient kernel, which runs on "
                   "this GPU with the same memory (no s x s scores): use attention 'sdpa'")
    return out
