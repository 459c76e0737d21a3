"""How tensor, sequence and pipeline parallelism divide one transformer block's saved tensors.

Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
Table 2; Megatron-LM): per layer, TP alone keeps sbh(10 + 24/t + 5as/(ht)); TP with sequence
parallelism sbh(34/t + 5as/(ht)); full recomputation keeps the block input, 2sbh (2sbh/t with
SP). The 10sbh TP leaves whole are the two norm inputs (2 x 2sbh), the inputs of the QKV and
first MLP linears (the replicated norm outputs a column-parallel linear reads, 2 x 2sbh) and the
two dropout masks after the row-parallel linears' all-reduce (2 x sbh). Everything between a
column- and a row-parallel linear (q, k, v, scores, attention output, MLP hidden) is split by
heads / width. Sequence parallelism splits the replicated part along the sequence: the norm and
dropout regions run on s/t tokens, the linears' inputs are all-gathered (Megatron saves the
sharded input and gathers it again in backward: one full-sequence buffer live at a time) and
the row-parallel outputs reduce-scattered.
"""
from __future__ import annotations

from dataclasses import replace

from ...vec import to_int
from .activations import Kernels, _mlp_saved, _widths, layer_coeffs, selective_terms


def _norm_coeff(arch, k: Kernels) -> float:
    """Bytes per token per hidden unit a norm saves (same rule as activations.layer_coeffs)."""
    r = 4 if (k.mixed or k.p == 4) else k.p
    if k.compile:
        return r
    if arch.norm == "rmsnorm":
        return 4 + (4 if k.mixed else k.p)
    return r


def norm_saved(arch, k: Kernels) -> float:
    """Bytes per token per hidden unit one norm saves for backward (the final norm too):
    HF RMSNorm x.float() and the cast-back normed tensor, a fused / compiled norm its input."""
    return _norm_coeff(arch, k)


def replicated_coeff(arch, k: Kernels, keep: dict | None = None) -> float:
    """sbh coefficient of a block's saved tensors that tensor parallelism without sequence
    parallelism keeps whole on every rank (10 for Korthikanti's p = 2 layer with dropout)."""
    keep = keep or {"qkv": True, "o": True, "up": True, "down": True}
    # the two hidden-dropout masks: what the dropout switch adds to the walk (1 B each)
    masks = layer_coeffs(arch, k, keep)[0] - layer_coeffs(arch, replace(k, dropout=False), keep)[0]
    lin = 1.0 if k.float8 else k.p
    lin_mixed = 2 if k.mixed else lin
    c = 2 * _norm_coeff(arch, k)
    c += lin_mixed * (int(bool(keep["qkv"])) + int(bool(keep["up"])))
    c += masks
    return c


def tp_layer(c: float, score: float, rep: float, tensor: int, sp: bool) -> tuple[float, float]:
    """(sbh coefficient, score coefficient) per rank of one block under `tensor`-way TP: the
    split part over t, the replicated part `rep` whole (or over t with sequence parallelism)."""
    t = max(1, tensor)
    if t == 1:
        return c, score
    rep = min(rep, c)
    return (rep / t if sp else rep) + (c - rep) / t, score / t


def tp_selective(arch, k: Kernels, tensor: int, sp: bool) -> float:
    """sbh coefficient per rank that op-level selective recomputation keeps per block under
    `tensor`-way TP (activations.selective_terms; torchtitan applies TP with DTensor's
    ColwiseParallel / RowwiseParallel, torch/distributed/tensor/parallel/style.py):
    * the block input, the checkpoint's saved input: whole on every TP rank, the sequence shard
      (over t) with sequence parallelism (Korthikanti et al. 2022 s.4: the block input is 2sbh,
      2sbh/t with SP);
    * the saved column-parallel matmul outputs (q, v, gate), the attention kernel output and its
      logsumexp: split by heads / width, over t;
    * a saved row-parallel matmul output (down): the local matmul makes the full-size partial
      sum before its all-reduce / reduce-scatter, so the saved output is whole on every rank;
    * with SP, the reduce-scatter outputs of o_proj and down (`reduce_scatter_tensor` is in the
      save list): two block-width tensors over t.
    With t = 1 this is activations.selective_coeff."""
    block_in, col, row = selective_terms(arch, k)
    t = max(1, tensor)
    if t == 1:
        return block_in + col + row
    rs = 2 * k.p / t if sp else 0.0
    return (block_in / t if sp else block_in) + col / t + row + rs


def sac_gathered_inputs(k: Kernels, tensor: int, sp: bool) -> float:
    """sbh coefficient one selective (op SAC) block's backward holds beyond a Megatron-style
    block's saved tensors under sequence parallelism: torchtitan's SP is DTensor's
    (torchtitan/models/llama3/parallelize.py `apply_tp`, read at 114151ad4^: PrepareModuleInput
    Shard(1) -> Replicate before `attention` and `feed_forward`), and its op SAC save list
    (torchtitan/distributed/activation_checkpoint.py `_get_default_save_ops`, HEAD b5bcd76c;
    `_op_sac_save_list` before #2357) saves `reduce_scatter_tensor` and `all_to_all_single`
    but not `all_gather_into_tensor`: the backward's replay gathers the attention and MLP inputs
    again, and the recomputed column-parallel matmuls save them whole (full sequence), where
    the Megatron-style block (tp_layer) counts their s/t shards: 2 inputs x (1 - 1/t), in the
    linears' compute dtype. 0 without SP or TP. Traced: toy Llama TP4 x PP2 + SP stage 0,
    DTensor style (tests/test_trace_parallel.py)."""
    t = max(1, tensor)
    if t == 1 or not sp:
        return 0.0
    lin_mixed = 2 if k.mixed else (1.0 if k.float8 else k.p)
    return 2 * lin_mixed * (1 - 1 / t)


# fp32 block-width tensors live at once in the backward of an HF-style RMSNorm (x.float(),
# h * rsqrt(pow(h, 2).mean() + eps), cast back, times the weight; torch's composite rms_norm
# builds the same graph): the mul's input gradient grad * rsqrt waits in the to_copy node's
# input buffer while the pow branch runs; mean's backward (grad.expand() / n, a new tensor);
# pow_backward `grad * (exponent * self.pow(exponent - 1))` (torch/csrc/autograd/
# FunctionsManual.cpp) holds self.pow(1) and exponent * it (C++ temporaries live to the end of
# the expression) while it makes the product: 5 (the saved fp32 input is counted already).
RMSNORM_BACKWARD_FP32 = 5


def norm_backward_extra(arch, k: Kernels, tensor: int, sp: bool) -> float:
    """sbh coefficient one block's backward holds beyond all its saved tensors when its peak is
    inside the second norm's backward (the one before the MLP), for an uncompiled HF-style
    RMSNorm of a dense decoder; 0 otherwise. By then the MLP half's saved tensors are freed
    (its interior, split by t; the norm's output, the gate / up input, and its cast-back, whole
    without SP), while the norm's fp32 temporaries (RMSNORM_BACKWARD_FP32 x 4 B) and the
    residual stream's gradient (4 B under mixed precision or fp32, else p) are whole on every
    TP rank without sequence parallelism (over t with it). Without TP the MLP half's freed
    tensors outweigh them (the MLP's own gradients decide, stage_activations._block_backward);
    with TP and no SP (Korthikanti et al. 2022 s.4: the norm region is replicated) they do
    not. Traced: toy Llama TP4 x PP2 stage 0, full checkpointing (tests/test_trace_parallel.py)."""
    if arch.norm != "rmsnorm" or k.compile or arch.is_moe or arch.kind != "decoder":
        return 0.0
    t = max(1, tensor)
    seq = t if sp else 1
    r = 4 if (k.mixed or k.p == 4) else k.p
    lin_mixed = 2 if k.mixed else (1.0 if k.float8 else k.p)
    keep = {"qkv": True, "o": True, "up": True, "down": True}
    interior = _mlp_saved(0.0, arch, k, keep, k.p, _widths(arch)[2], False) / t
    freed = interior + (lin_mixed + (4 if k.mixed else k.p)) / seq
    return max(0.0, (4 * RMSNORM_BACKWARD_FP32 + r) / seq - freed)


def ring_buffers(arch, p: int, tokens: int, tensor: int, context: int) -> int:
    """Context parallel (ring attention, torch context_parallel / Megatron CP): each rank keeps
    seq/cp tokens (`tokens` is already per rank) and, in a block's backward, receives the next
    neighbour's K and V while it sends its own and rotates the dK / dV partial sums: two K/V
    sized pairs in flight beyond the ones saved. 0 without context parallelism."""
    if context <= 1:
        return 0
    kvw = 2 * arch.kv_heads * arch.head_dim / max(1, tensor)   # K and V of this rank's heads
    return to_int(2 * p * tokens * kvw)


def stages(pipeline: int) -> list[int]:
    """Distinct pipeline stages to report: the first (embedding, most micro-batches in flight),
    the second (the busiest stage without the embedding) when there are more than two, the last
    (head, logits and loss, one micro-batch)."""
    pp = max(1, pipeline)
    return sorted({0, min(1, pp - 1) if pp > 2 else 0, pp - 1})


def stage_name(i: int, pipeline: int) -> str:
    if pipeline > 2 and i == 1:
        return f"stage 1 (stages 1-{pipeline - 2})" if pipeline > 3 else "stage 1"
    return f"stage {i}"
