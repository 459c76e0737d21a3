"""What a plan asks of the GPU generation, checked against `hwdb/generations.toml`: bf16
arithmetic, FP8 tensor cores, the FlashAttention-2 kernels. Plain strings in, warnings out
(the footprints put them in their notes); reads device traits or a Device.

Facts and sources: generations.toml (Transformer Engine support matrix: bf16 needs compute
capability 8.0+, FP8 8.9+; FlashAttention README: FA2 runs on Ampere, Ada, Hopper and newer).
A device whose generation is unknown (non-NVIDIA, a user entry) gets no warning.
"""
from __future__ import annotations

# the dense-throughput key (hwdb `throughput`) whose rate a precision's matmuls run at
_DTYPE = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "fp16-mixed": "fp16", "bf16": "bf16",
          "bf16-mixed": "bf16", "fp8": "fp8", "int8": "fp16", "int4": "fp16", "nf4": "fp16"}


def compute_dtype(precision: str, options=()) -> str:
    """The throughput key a plan's matmuls use: the 16-bit type of AMP and pure 16-bit plans,
    fp8 for fp8 weights (W8A8) and float8 training, fp16 for weight-only int8/int4/nf4
    (dequantised into fp16 matmuls, as bitsandbytes / GPTQ loads run)."""
    if "float8-linears" in set(options or ()):
        return "fp8"
    return _DTYPE.get(precision, "bf16")


def _supports(device, cap: str):
    if device is None:
        return None
    f = getattr(device, "supports", None)
    if callable(f):
        return f(cap)
    return (getattr(device, "capabilities", None) or {}).get(cap)


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
