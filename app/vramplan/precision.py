"""Bytes per element for each precision of the contract, and weight-storage formats.

Why: weights, activations and optimizer states each take their own dtype under a precision
setting; quantised formats (int8 / int4 / nf4 / fp8 / mxfp4 / nvfp4) add scales and keep some layers in 16 bit.
"""
from __future__ import annotations

from .vocab import PRECISIONS  # noqa: F401 (re-exported: diffusion reads P.PRECISIONS)
from .vocab import QUANTISED as QUANTIZED

# Bytes per stored weight element of the format, scales included (per quantised parameter).
#   int8: bitsandbytes LLM.int8 (Int8Params): 1 B + one fp32 row scale (SCB) per output row,
#         ~4/hidden B/param -> counted as 1 B + 4 B per 4096 params.
#   int4: GPTQ (auto-gptq / exllama, group_size 128): packed int32 qweight 0.5 B + fp16 scale and
#         packed 4-bit zero per group of 128 inputs per output: (2 + 0.5) / 128 B.
#   nf4:  bitsandbytes / torchao NF4 with double quantisation: 0.5 B + int8 absmax per 64-block
#         (1/64 B) + fp32 scale per 256 absmax values (4 / (64*256) B).
#   fp8:  e4m3 storage + one fp32 scale per output channel (optimum-quanto / torchao): 1 B + ~0.
#   mxfp4: OCP Microscaling v1.0 (MXFP4): 4-bit E2M1 values + one 8-bit E8M0 shared scale per
#         block of 32 -> 0.5 + 1/32 B = 4.25 bits (transformers integrations/mxfp4.py stores
#         `_blocks` uint8 [.., 16] and `_scales` uint8 [..] per 32 values).
#   nvfp4: NVIDIA NVFP4: 4-bit E2M1 values + one FP8 E4M3 scale per block of 16 + one fp32
#         per-tensor scale (~0 per param) -> 0.5 + 1/16 B = 4.5 bits (TensorRT Model Optimizer /
#         compressed-tensors "nvfp4-pack-quantized": weight_packed, weight_scale, weight_global_scale).
# The exact format of a checkpoint that ships quantised (its group size, double quantisation,
# block scales) is read from config.json's `quantization_config` (catalog/weight_formats.py).
WEIGHT_FORMAT_BYTES = {
    "int8": 1.0 + 4.0 / 4096,
    "int4": 0.5 + 2.5 / 128,
    "nf4": 0.5 + 1.0 / 64 + 4.0 / (64 * 256),
    "fp8": 1.0 + 4.0 / 4096,
    "mxfp4": 0.5 + 1.0 / 32,
    "nvfp4": 0.5 + 1.0 / 16,
}


def dtype_bytes(dtype: str) -> int:
    """Bytes of a plain torch dtype name: fp32/tf32 4, fp16/bf16 2, fp8/int8 1."""
    return {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}[dtype]


def is_mixed(precision: str) -> bool:
    """AMP (autocast): fp32 parameters, 16-bit compute."""
    return precision in ("fp16-mixed", "bf16-mixed")


def is_quantized(precision: str) -> bool:
    return precision in QUANTIZED


def param_bytes(precision: str) -> int:
    """Bytes of a trainable (unquantised) parameter tensor: fp32 for fp32/tf32 and AMP (master
    weights are the parameters), 2 for pure fp16/bf16 and for the 16-bit layers of quantised
    models (bitsandbytes and GPTQ loads force torch_dtype float16)."""
    if precision in ("fp32", "tf32", "fp16-mixed", "bf16-mixed"):
        return 4
    return 2


def activation_bytes(precision: str) -> int:
    """Bytes of an activation element: 4 for fp32/tf32 (tf32 only changes matmul precision),
    else 2 (AMP, pure 16-bit, and the 16-bit compute of quantised formats)."""
    return 4 if precision in ("fp32", "tf32") else 2


def weight_bytes_per_param(precision: str) -> float:
    """Bytes per parameter of a layer stored in `precision` (quantised layers include scales)."""
    if precision in WEIGHT_FORMAT_BYTES:
        return WEIGHT_FORMAT_BYTES[precision]
    return float(param_bytes(precision))


def weights_bytes(quantizable: int, kept: int, precision: str) -> int:
    """Resident weights: `quantizable` parameters (the linear layers of the blocks) in the
    format, `kept` parameters (embeddings, lm_head, norms, biases) in 16 bit when quantised."""
    if is_quantized(precision):
        return int(quantizable * WEIGHT_FORMAT_BYTES[precision]) + 2 * kept
    return param_bytes(precision) * (quantizable + kept)
