"""Resident weight bytes under a checkpoint's shipped format (catalog/weight_formats.py).

A model whose config.json carries a `quantization_config` is stored in that format; when the
plan's precision is the format's precision the weights are counted group by group: the groups
the format quantises (TransformerArch.param_groups: attention, mlp, experts, router) at its
bytes per parameter with scales (fan-in = hidden for per-row scales), everything else
(embeddings, lm_head, norms and the groups it keeps, e.g. gpt-oss's attention and router) in
16 bit. Any other precision converts the checkpoint: the generic rule of precision.py applies
(every block linear in the new format), and the notes say so.
"""
from __future__ import annotations

from ... import precision as prec_mod

QUANTISABLE = ("attention", "mlp", "experts", "router")


def shipped(arch, fmt: str):
    """The arch's WeightFormat when `fmt` is the precision it ships as, else None."""
    wf = arch.weight_format
    return wf if wf is not None and wf.precision == fmt else None


def split(arch, wf) -> tuple[int, int]:
    """(quantised, 16-bit) parameters of the whole model under format `wf`."""
    g = arch.param_groups()
    q = sum(g[k] for k in QUANTISABLE if k not in wf.kept)
    return q, sum(g.values()) - q


def weight_bytes(ctx, fmt: str) -> int:
    """Resident weights on this GPU (the stage's share over tensor ranks) in `fmt`."""
    wf = shipped(ctx.arch, fmt)
    if wf is None:
        return prec_mod.weights_bytes(ctx.blocks_g, ctx.norms_g + ctx.embed_g, fmt)
    q, kept = split(ctx.arch, wf)
    share = ctx.params_g / max(1, ctx.arch.param_count())
    return int(q * share * wf.bytes_per_param(ctx.arch.hidden) + 2 * kept * share)


def expert_bytes_per_param(arch, fmt: str) -> float:
    """Bytes per routed-expert parameter in `fmt` (its shipped format's when it applies)."""
    wf = shipped(arch, fmt)
    if wf is None:
        return prec_mod.weights_bytes(1_000_000, 0, fmt) / 1_000_000
    return 2.0 if "experts" in wf.kept else wf.bytes_per_param(arch.hidden)


def note(arch, fmt: str) -> str:
    """How the weights are stored, for the estimate's notes ('' for unquantised checkpoints)."""
    wf = arch.weight_format
    if wf is None:
        return ""
    if wf.precision == fmt:
        return f"weights as shipped: {wf.describe(arch.hidden)}"
    return (f"the checkpoint ships {wf.label} (precision '{wf.precision}'); precision '{fmt}' "
            f"is a conversion (dequantised / re-quantised at load), counted in '{fmt}'")
