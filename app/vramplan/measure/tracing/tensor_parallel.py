"""Tensor parallel (with and without sequence parallel, loss parallel) for the compact decoder,
traced as rank 0 of `t` on a fake process group: DTensor `parallelize_module`.

The plan is torchtitan's Llama plan (torchtitan/models/llama3/infra/parallelize.py,
`apply_tp`), on our modules' names:
* q/k/v, gate/up: `ColwiseParallel` (heads / MLP width split); o, down: `RowwiseParallel`
  (all-reduce of the output, or reduce-scatter to `Shard(1)` with sequence parallel);
* `embed_tokens`: `RowwiseParallel` (vocab-sharded table); `lm_head`: `ColwiseParallel`
  (vocab-sharded; its output all-gathered to `Replicate`, or kept `Shard(-1)` with loss
  parallel, the loss then runs under `loss_parallel()`);
* sequence parallel: the norms run `SequenceParallel` on s/t tokens, the residual stream stays
  sharded along the sequence, and each attention / MLP input is all-gathered by
  `PrepareModuleInput` before its column-parallel linears.
The attention modules then compute with their local heads (`h / t`, `kv / t`, as torchtitan
sets `n_heads` per rank). DTensor and FSDP2 run under `FakeTensorMode` on 'cpu' on the fake
backend in torch 2.13 (collectives allocate their outputs and move no data), so rank 0's bytes
are what a real rank allocates; the counter counts a DTensor by its local tensor.

Two sequence-parallel implementations differ in memory, and both are traced:
* `style="megatron"` (default; Megatron-LM `LinearWithGradAccumulationAndAsyncCommunication`
  with sequence parallel, Korthikanti et al. 2022 section 4.2.2): the column-parallel linears
  save their *sharded* input and all-gather it again in backward; the gathered input is a
  temporary of the forward and of the backward. Traced with `_GatherLinear` below (an autograd
  Function on the local tensors: all-gather on the fake group, matmul, save the shard).
* `style="dtensor"` (torchtitan / plain DTensor): the gathered input is what the linears'
  matmuls save, so each block keeps two gathered (full-sequence) inputs as TP alone does; only
  the norms and dropouts are split.

torch is imported when this module is imported: import it lazily (measure/trace.py does).
"""
from __future__ import annotations

import contextlib

import torch
from torch import nn

from ...errors import ScenarioError

STYLES = ("megatron", "dtensor")


def check(arch, tensor: int, sp: bool) -> None:
    """What the traced TP plan needs: heads, KV heads and widths divisible by t; rotary
    positions for sequence parallel (a learned position table would add a replicated tensor
    to the sequence-sharded stream)."""
    t = tensor
    bad = [n for n, v in (("num_attention_heads", arch.heads), ("num_key_value_heads", arch.kv_heads),
                          ("intermediate_size", arch.ffn), ("vocab_size", arch.vocab)) if v % t]
    if bad:
        raise ScenarioError("parallel", f"trace of tensor parallel {t} needs {', '.join(bad)} "
                                        f"divisible by {t} (Megatron would replicate KV heads)")
    if arch.kind != "decoder" or arch.is_moe or arch.mla:
        raise ScenarioError("parallel", "trace of tensor parallel builds dense decoders only")
    if sp and arch.learned_positions:
        raise ScenarioError("parallel", "trace of sequence parallel needs rotary positions "
                                        "(Llama style); learned position tables are not planned")


class _GatherLinear(torch.autograd.Function):
    """Megatron sequence-parallel column linear on local tensors: y = all_gather_s(x) @ W^T (+b);
    saves the sharded x, gathers it again in backward, reduce-scatters the input gradient."""

    @staticmethod
    def forward(ctx, x, weight, bias, group):
        full = _all_gather_seq(x, group)
        y = torch.nn.functional.linear(full, weight, bias)
        del full
        ctx.save_for_backward(x, weight)
        ctx.group, ctx.has_bias = group, bias is not None
        return y

    @staticmethod
    def backward(ctx, gy):
        x, weight = ctx.saved_tensors
        full = _all_gather_seq(x, ctx.group)
        gw = gy.reshape(-1, gy.shape[-1]).t().matmul(full.reshape(-1, full.shape[-1]))
        del full
        gfull = gy.matmul(weight)
        gx = _reduce_scatter_seq(gfull, ctx.group)
        gb = gy.sum(dim=tuple(range(gy.dim() - 1))) if ctx.has_bias else None
        return gx, gw, gb, None


def _all_gather_seq(x, group):
    """All-gather along the sequence (dim 1) into a new full-sequence buffer."""
    import torch.distributed as dist
    t = group.size()
    xt = x.transpose(0, 1).contiguous()
    out = torch.empty((xt.shape[0] * t, *xt.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_single(out, xt, group=group)
    return out.transpose(0, 1)


def _reduce_scatter_seq(g, group):
    """Reduce-scatter along the sequence (dim 1): this rank's summed shard."""
    import torch.distributed as dist
    t = group.size()
    gt = g.transpose(0, 1).contiguous()
    out = torch.empty((gt.shape[0] // t, *gt.shape[1:]), dtype=g.dtype, device=g.device)
    dist.reduce_scatter_single(out, gt, group=group)
    return out.transpose(0, 1)


class _MegatronColumn(nn.Module):
    """Wraps a column-parallel Linear whose input is this rank's sequence shard (a DTensor
    `Shard(1)` or its local tensor): `_GatherLinear` on the local tensors, local output."""

    def __init__(self, lin: nn.Linear, group):
        super().__init__()
        self.lin, self.group = lin, group

    def forward(self, x):
        from torch.distributed.tensor import DTensor
        if isinstance(x, DTensor):
            x = x.to_local()
        w = self.lin.weight
        b = self.lin.bias
        w = w.to_local() if isinstance(w, DTensor) else w
        b = b.to_local() if isinstance(b, DTensor) else b
        if torch.is_autocast_enabled(x.device.type):   # autocast does not see inside a Function
            dt = torch.get_autocast_dtype(x.device.type)
            x, w = x.to(dt), w.to(dt)
            b = b.to(dt) if b is not None else None
        return _GatherLinear.apply(x, w, b, self.group)


class _Reduce(torch.autograd.Function):
    """Megatron `reduce_from_tensor_model_parallel_region` (all-reduce in place, identity
    backward) or, with sequence parallel, `reduce_scatter_to_sequence_parallel_region` (this
    rank's s/t tokens; backward all-gathers the gradient)."""

    @staticmethod
    def forward(ctx, x, group, scatter):
        import torch.distributed as dist
        ctx.group, ctx.scatter = group, scatter
        if scatter:
            return _reduce_scatter_seq(x, group)
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, g):
        return (_all_gather_seq(g, ctx.group) if ctx.scatter else g), None, None


class _VocabParallelEmbedding(nn.Module):
    """Megatron `VocabParallelEmbedding` on rank 0's rows [0, V/t): ids outside them are looked
    up as row 0 and their outputs zeroed, then the partial outputs are summed across ranks, so
    the weight's gradient is this rank's shard only (DTensor's RowwiseParallel embedding
    returns a Replicate, full-vocabulary gradient on every rank in torch 2.13)."""

    def __init__(self, emb: nn.Embedding, mesh, sp: bool):
        super().__init__()
        from torch.distributed.tensor import DTensor, Shard, distribute_tensor
        self.group, self.sp = mesh.get_group(), sp
        self.rows = emb.num_embeddings // mesh.size()
        w = emb.weight
        shard = w if isinstance(w, DTensor) else distribute_tensor(w.detach(), mesh, [Shard(0)])
        self.weight = nn.Parameter(shard, requires_grad=w.requires_grad)

    def forward(self, ids):
        mask = ids >= self.rows                   # rank 0 holds rows [0, rows)
        local = ids.masked_fill(mask, 0)
        out = torch.nn.functional.embedding(local, self.weight.to_local())
        out = out.masked_fill(mask[..., None], 0.0)
        return _Reduce.apply(out, self.group, self.sp)


def parallelize(lm, mesh, sp: bool = False, loss_parallel: bool = False,
                style: str = "megatron") -> nn.Module:
    """Shard a `transformer.CausalLM` (or a pipeline `Stage` of one: the same module names)
    over the 1-D mesh `mesh` (rank 0's shards stay on this process)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                   RowwiseParallel, SequenceParallel,
                                                   parallelize_module)
    if style not in STYLES:
        raise ScenarioError("parallel", f"sequence-parallel style is one of {', '.join(STYLES)}")
    t = mesh.size()
    seq = Shard(1) if sp else Replicate()
    stack = getattr(lm, "model", lm)
    layers = stack.layers
    for blk in layers:
        plan = {"attn.q_proj": ColwiseParallel(), "attn.k_proj": ColwiseParallel(),
                "attn.v_proj": ColwiseParallel(), "attn.o_proj": RowwiseParallel(output_layouts=seq),
                "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel(output_layouts=seq)}
        if getattr(blk.mlp, "gated", False):
            plan["mlp.gate_proj"] = ColwiseParallel()
        if sp:
            plan["norm1"] = SequenceParallel()
            plan["norm2"] = SequenceParallel()
            if style == "dtensor":
                n_in = 5   # Attention.forward(x, rope, mask, cache, pos)
                plan["attn"] = PrepareModuleInput(input_layouts=(Shard(1),) + (None,) * (n_in - 1),
                                                  desired_input_layouts=(Replicate(),) + (None,) * (n_in - 1))
                plan["mlp"] = PrepareModuleInput(input_layouts=(Shard(1),),
                                                 desired_input_layouts=(Replicate(),))
        parallelize_module(blk, mesh, plan)
        if sp and style == "megatron":
            group = mesh.get_group()
            for mod, names in ((blk.attn, ("q_proj", "k_proj", "v_proj")),
                               (blk.mlp, ("gate_proj", "up_proj"))):
                for n in names:
                    if hasattr(mod, n):
                        setattr(mod, n, _MegatronColumn(getattr(mod, n), group))
        blk.attn.h //= t
        blk.attn.kv //= t
    root = {}
    emb, head = getattr(stack, "embed_tokens", None), getattr(lm, "lm_head", None)
    tied = emb is not None and head is not None and head.weight is emb.weight
    if emb is not None:
        if style == "megatron":
            stack.embed_tokens = _VocabParallelEmbedding(stack.embed_tokens, mesh, sp)
        else:
            root[_fqn(lm, stack, "embed_tokens")] = RowwiseParallel(input_layouts=Replicate(),
                                                                    output_layouts=seq)
    if getattr(lm, "lm_head", None) is not None:
        root["lm_head"] = ColwiseParallel(input_layouts=seq,
                                          output_layouts=Shard(-1) if loss_parallel else Replicate(),
                                          use_local_output=not loss_parallel)
    if sp and getattr(stack, "norm", None) is not None:
        root[_fqn(lm, stack, "norm")] = SequenceParallel()
    if root:
        parallelize_module(lm, mesh, root)
    if tied:   # Megatron shares the vocab-parallel table with the output layer
        lm.lm_head.weight = stack.embed_tokens.weight
    _replicate_rest(lm, mesh)
    return lm


def _replicate_rest(model, mesh) -> None:
    """Parameters no style sharded (norms without sequence parallel, a position table) become
    `Replicate` DTensors computing on local inputs (as FSDP2 / torchtitan hold every parameter
    as a DTensor): the optimizer's foreach kernels take no mix of DTensors and tensors."""
    from torch.distributed.tensor import DTensor, Replicate, distribute_module, distribute_tensor

    def part(_name, mod, dm):
        for n, p in list(mod.named_parameters(recurse=False)):
            if not isinstance(p, DTensor):
                mod.register_parameter(n, nn.Parameter(distribute_tensor(p, dm, [Replicate()]),
                                                       requires_grad=p.requires_grad))

    def inp(_mod, args, dm):
        return tuple(DTensor.from_local(a, dm, [Replicate()]) if isinstance(a, torch.Tensor)
                     and not isinstance(a, DTensor) else a for a in args)

    def out(_mod, o, _dm):
        return o.to_local() if isinstance(o, DTensor) else o

    for mod in list(model.modules()):
        if any(not isinstance(p, DTensor) for p in mod.parameters(recurse=False)):
            distribute_module(mod, mesh, part, inp, out)


def _fqn(lm, stack, name):
    return name if stack is lm else f"model.{name}"


def loss_context(loss_parallel: bool):
    """`torch.distributed.tensor.parallel.loss_parallel()` (vocab-sharded cross-entropy; the
    loss and its backward run inside it), or nothing."""
    if not loss_parallel:
        return contextlib.nullcontext()
    from torch.distributed.tensor.parallel import loss_parallel as lp
    return lp()
