"""Bytes per element for each precision of the contract, and weight-storage formats.

Why: weights, activations and optimizer states each take their own dtype under a precision
setting; quantised formats (int8 / int4 / nf4 / fp8 / mxfp4 / nvfp4) add scales and keep some layers in 16 bit.
"""
from __future__ import annotations

from dataclasses import dataclass

from .vocab import LOW_PRECISION_TRAINING as _LOWP_NAMES
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


# ---- low-precision training (torchao / torchtitan) -----------------------------------------
@dataclass(frozen=True)
class TrainingFormat:
    """How a low-precision training recipe casts a linear's matmul operands: `element` bytes per
    value, one `scale` byte per `block` values along the reduction dim, `tensor_scale` fp32
    bytes per tensor; whether the linear saves its input (and the weight's transposed copy)
    in the format for backward instead of the bf16 tensors; the share of the last decoder
    blocks the recipe keeps in bf16. Parameters, gradients, optimizer states, norms,
    embeddings and the LM head stay bf16 (the model's dtype) in both recipes."""
    element: float
    block: int
    scale: int
    tensor_scale: int
    saves_low_precision: bool
    bf16_tail: float

    def cast_bytes(self, n: int) -> int:
        """Bytes of one tensor of `n` values cast to the format, scales included."""
        return int(n * self.element) + -(-n // self.block) * self.scale + self.tensor_scale


# mxfp8-train: torchao prototype/moe_training/mxfp8_linear.py (pytorch/ao@36027d8) `mx_mm`, the
#   linear torchtitan's MXFP8LinearConverter swaps in (components/quantization/mx.py,
#   pytorch/torchtitan@b5bcd76; mxfp8.md: "block size of 1x32 ... data dtype
#   torch.float8_e4m3fn, scale factor dtype torch.float8_e8m0fnu"): every call casts input and
#   weight to MXFP8 (1 B + one e8m0 byte per 32), backward casts grad_output (dim0, dim1), the
#   weight (dim1) and the input (dim1); `ctx.save_for_backward(input_hp, weight_hp)`: the
#   saved tensors stay the bf16 ones. All Linear modules are converted (empty fqns).
# nvfp4-train: torchao prototype/moe_training/nvfp4_training/nvfp4_linear.py `nvfp4_mm_triton`
#   (same commit), torchtitan's NVFP4LinearConverter (components/quantization/nvfp4.py, nvfp4.md):
#   E2M1 values (0.5 B) + one e4m3 scale per 16 + an fp32 per-tensor scale; forward saves
#   `x_col_codes, x_col_sf, x_col_amax, Wt_fp4_x2, Wt_sf, W_amax` ("Saves only FP4 codes+scales
#   for backward"): the input and the weight's transposed copy in NVFP4, not the bf16 input.
#   torchtitan's recipe (nvfp4_bf16_tail_fqns) keeps the last ceil(0.15 L) decoder blocks and
#   the LM head in bf16 (Llama 3 8B: layers 0-26 NVFP4, 27-31 bf16).
LOW_PRECISION_TRAINING = {
    "mxfp8-train": TrainingFormat(element=1.0, block=32, scale=1, tensor_scale=0,
                                  saves_low_precision=False, bf16_tail=0.0),
    "nvfp4-train": TrainingFormat(element=0.5, block=16, scale=1, tensor_scale=4,
                                  saves_low_precision=True, bf16_tail=0.15),
}
assert tuple(LOW_PRECISION_TRAINING) == _LOWP_NAMES


def training_format(precision) -> TrainingFormat | None:
    """The low-precision training recipe a precision names (None for every other one)."""
    return LOW_PRECISION_TRAINING.get(precision) if isinstance(precision, str) else None
