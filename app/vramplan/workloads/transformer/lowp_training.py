"""Low-precision training of a transformer's block linears: precisions `mxfp8-train` and
`nvfp4-train` (torchao's training prototypes as torchtitan's MXFP8 / NVFP4 converters run
them; the formats and their sources: `vramplan.precision.LOW_PRECISION_TRAINING`).

What the recipes change against a bf16 model (parameters, gradients and optimizer states stay
bf16, as do norms, embeddings and the LM head, which no converter swaps):
- MXFP8 (torchao `mx_mm`): the linears save their bf16 input and weight, as a bf16 linear
  does; each matmul casts its operands to MXFP8 on the fly, so the only extra bytes are the
  casted copies alive during one linear's backward (the weight along dim1, the input along
  dim1, grad_output along dim0 and dim1): a temporary.
- NVFP4 (torchao `nvfp4_mm_triton`): each converted linear saves its input as NVFP4 codes +
  scales instead of the bf16 tensor, and the transposed NVFP4 copy of its weight for the
  input gradient; q, k and v (and gate and up) are separate modules in torchtitan's and HF's
  Llama-style blocks, so each saves its own copy of the shared input. The last ceil(0.15 L)
  blocks stay bf16 (torchtitan `nvfp4_bf16_tail_fqns`). Under activation checkpointing a
  block's saved tensors are dropped and recomputed, so only the block in backward holds its
  weight copies (op-level SAC saves aten.mm outputs; the NVFP4 function runs scaled_mm).
Modelled for attention and dense MLP linears; routed MoE experts (torchao's grouped-GEMM
converters) and MLA projections keep their bf16 accounting.
"""
from __future__ import annotations

import math

from ... import precision as prec_mod
from ...errors import ScenarioError
from .activations import _widths, saves_output

# a full fine-tune keeps every linear's input (activations.layer_coeffs' default)
ALL_KEPT = {"qkv": True, "o": True, "up": True, "down": True}

def converted_layers(arch, fmt) -> int:
    """Decoder blocks whose linears the recipe converts (all but the bf16 tail)."""
    n = arch.total_layers
    return n - math.ceil(n * fmt.bf16_tail)


def linear_shapes(arch) -> list[tuple[int, int]]:
    """(in, out) of the converted linears of one block: q, k, v, o, then gate, up, down (fc1,
    fc2 without a gated MLP); no MLP linears for MoE blocks (experts are grouped GEMMs)."""
    h = arch.hidden
    q, kv = arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    out = [] if arch.mla else [(h, q), (h, kv), (h, kv), (q, h)]
    if not arch.is_moe:
        f = arch.ffn
        out += [(h, f), (h, f), (f, h)] if arch.gated_mlp else [(h, f), (f, h)]
    return out


def check(sc, arch) -> None:
    """Refuse what the recipes do not cover: LoRA / QLoRA (torchtitan converts full training),
    the float8-linears option beside them (one converter per linear)."""
    if sc.task != "train":
        raise ScenarioError("precision", f"'{sc.precision}' is a training recipe (torchao / "
                                         "torchtitan low-precision linears) for task 'train'; "
                                         f"task '{sc.task}' takes e.g. bf16")
    if "float8-linears" in set(sc.options or ()):
        raise ScenarioError("options", f"float8-linears and precision '{sc.precision}' both "
                                       "convert the linears: choose one")


def saved_coeff_delta(arch, fmt, k, keep) -> float:
    """Change of one block's saved bytes per token per hidden unit (activations.layer_coeffs
    units), averaged over the blocks (the bf16 tail unchanged). NVFP4: every converted
    linear's input is kept as codes + e4m3 scales (0.5625 B a value) in place of the bf16
    tensor only it kept: the attention input, the context into o_proj (unless compiled: the
    kernel output is saved anyway), the MLP input and the down projection's input (the gated
    product, or the activation output when its backward reads its input)."""
    if not fmt.saves_low_precision:
        return 0.0
    p, e = k.p, fmt.element + fmt.scale / fmt.block
    qr, _, f = _widths(arch)
    removed = added = 0.0
    if not arch.mla:
        removed += p * (keep["qkv"] + (qr if keep["o"] and (k.attention == "eager"
                                                              or not k.compile) else 0))
        added += e * (3 + qr)                       # wq, wk, wv each save x; wo its input
    if not arch.is_moe:
        gated = arch.gated_mlp
        removed += p * keep["up"] + (p * f if keep["down"] and (gated or not saves_output(arch))
                                     else 0)
        added += e * ((2 if gated else 1) + f)      # w1 (+ w3) save x; w2 its input
    share = converted_layers(arch, fmt) / max(1, arch.total_layers)
    return (added - removed) * share


def saved_weight_bytes(arch, fmt, ckpt: str, live_layers: float, tp: int) -> int:
    """NVFP4: the transposed weight copies (codes + scales + the fp32 amax) the converted
    linears keep from forward to backward, per rank: every live converted block without
    checkpointing, the block in backward (one) under checkpointing."""
    if not fmt.saves_low_precision:
        return 0
    one = sum(fmt.cast_bytes(i * o) for i, o in linear_shapes(arch))
    share = converted_layers(arch, fmt) / max(1, arch.total_layers)
    blocks = 1 if ckpt != "none" else live_layers * share
    return int(one * blocks / max(1, tp))


def cast_temporary_bytes(arch, fmt, tokens: int, tp: int) -> int:
    """The casted operands alive in one converted linear's backward, the widest one, per rank.
    MXFP8: grad_output along dim0 and dim1, the weight along dim1, the input along dim1 (the
    saved tensors are bf16); NVFP4: grad_output's row and column codes (input and weight copies
    are the saved ones)."""
    worst = 0
    for i, o in linear_shapes(arch):
        dy = 2 * fmt.cast_bytes(tokens * o)
        extra = 0 if fmt.saves_low_precision else fmt.cast_bytes(i * o) + \
            fmt.cast_bytes(tokens * i)
        worst = max(worst, dy + extra)
    return int(worst / max(1, tp))


def note(arch, prec: str, fmt) -> str:
    n, total = converted_layers(arch, fmt), arch.total_layers
    fmt_name = prec.removesuffix("-train").upper()
    saved = ("linear inputs and transposed weight copies saved in NVFP4 (0.5 B + one e4m3 "
             "scale per 16, fp32 per tensor)" if fmt.saves_low_precision else
             "linears save their bf16 input and weight (torchao mx_mm); MXFP8 copies (1 B + "
             "one e8m0 scale per 32) are cast per matmul")
    return (f"{fmt_name} training (torchao / torchtitan converter; their kernels need a "
            f"Blackwell GPU, SM100+): {n} of {total} blocks' "
            f"linears converted; parameters, gradients, optimizer states, norms, embeddings and "
            f"LM head bf16; {saved}")


def recipe(prec):
    """The TrainingFormat of a low-precision training precision, else None."""
    return prec_mod.training_format(prec)
