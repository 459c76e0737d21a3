"""One pipeline stage of a decoder, traced with its 1F1B schedule emulated in this process.

`Stage(lm, i, pp)` keeps stage i's slice of a `transformer.CausalLM`: ceil(layers / pp) blocks
(`parallel.stage_layers`), the token (and position) embedding on the first stage, the final
norm, the head and the loss on the last; a tied head is the last stage's own copy (Megatron
keeps a copy of the embedding on the last stage and all-reduces their gradients).

`one_f_one_b(...)` runs the schedule stage i runs in a 1F1B (PipeDream-flush) step of m
micro-batches (Narayanan et al. 2021; Megatron-LM `forward_backward_pipelining_without_
interleaving`): min(pp - i - 1, m) warm-up forwards, then one forward and one backward per
step, then the remaining backwards. So stage i holds min(pp - i, m) micro-batches' graphs at
once. torch.distributed.pipelining does not run on the fake backend here (no peers to send
to), so the neighbours are emulated, as honestly as memory needs:
* the received activation of a later stage is a fresh tensor of the micro-batch's hidden
  states (requires grad; held until its backward, its gradient is what is sent back);
* a non-last stage's output is sent and then its data freed (Megatron
  `deallocate_output_tensor`: `out.data = torch.empty(1)`; its backward runs through the
  engine directly, `custom_backward`), the received output gradient is a fresh tensor.
Collectives between stages move no data in a fake run anyway: only where buffers live matters.

torch is imported when this module is imported: import it lazily (measure/trace.py does).
"""
from __future__ import annotations

from collections import deque

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import ScenarioError
from . import transformer as T
from .recompute import checkpoint, op_sac_checkpoint


class Stage(nn.Module):
    """Stage i of pp of a CausalLM (module names as in CausalLM.model: `layers.N`, ...)."""

    def __init__(self, lm: "T.CausalLM", i: int, pp: int):
        super().__init__()
        t = lm.model
        n = -(-len(t.layers) // pp)
        if n * (pp - 1) >= len(t.layers):
            raise ScenarioError("parallel", f"pipeline {pp} leaves stage {pp - 1} without blocks "
                                            f"({len(t.layers)} layers)")
        self.first, self.last = i == 0, i == pp - 1
        self.layers = nn.ModuleList(list(t.layers)[i * n:(i + 1) * n])
        self.embed_tokens = t.embed_tokens if self.first else None
        self.embed_positions = t.embed_positions if self.first else None
        self.norm = t.norm if self.last else None
        self.lm_head = None
        if self.last:
            self.lm_head = lm.lm_head
            if lm.lm_head.weight is t.embed_tokens.weight and not self.first:
                self.lm_head.weight = nn.Parameter(t.embed_tokens.weight.detach().clone())
        self.offset, self.p, self.full_ckpt = t.offset, t.p, t.full_ckpt
        self.op_sac = t.op_sac
        self.register_buffer("inv_freq", t.inv_freq, persistent=False)
        self.hidden = t.a.hidden

    rope = T.Transformer.rope

    def forward(self, ids, x=None):
        b, s = ids.shape
        if self.first:
            x = self.embed_tokens(ids)
            if self.embed_positions is not None:
                x = x + self.embed_positions(torch.arange(self.offset, self.offset + s,
                                                          device=ids.device))
            x = F.dropout(x, self.p, self.training)
        core = self.layers[0].attn.core
        mask = None
        if core.kernel == "eager":
            tri = torch.ones(s, s, dtype=torch.bool, device=ids.device).tril()
            if core.where_mask:
                mask = tri[None, None]
            else:
                dev = ids.device.type
                dt = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else x.dtype
                mask = torch.zeros(b, 1, s, s, dtype=dt, device=ids.device)
                mask = mask.masked_fill(~tri, torch.finfo(dt).min)
        rope = self.rope(0, s, x.dtype)
        for layer in self.layers:
            if self.full_ckpt and self.training and torch.is_grad_enabled():
                x = checkpoint(layer, x, rope, mask, None, 0, use_reentrant=False)
            elif self.op_sac and self.training and torch.is_grad_enabled():
                x = op_sac_checkpoint(layer, x, rope, mask, None, 0)
            else:
                x = layer(x, rope, mask, None, 0)
        if self.last:
            return self.lm_head(self.norm(x))
        return x


class Chunks(nn.Module):
    """Pipeline rank i's v model chunks in the interleaved schedule: chunk c is global stage
    c pp + i of pp v (Megatron-Core's virtual pipeline layout: rank i holds stages i, i + pp,
    ..., each layers / (pp v) blocks), so stage 0's first chunk has the embedding and the last
    rank's last chunk the head and loss."""

    def __init__(self, lm: "T.CausalLM", i: int, pp: int, v: int):
        super().__init__()
        self.chunks = nn.ModuleList(Stage(lm, c * pp + i, pp * v) for c in range(v))
        self.first, self.last = self.chunks[0].first, self.chunks[-1].last
        self.hidden = self.chunks[0].hidden

    def forward(self, ids, x=None, chunk=0):
        return self.chunks[chunk](ids, x)


def stage_loss(stage: Stage):
    """loss_fn(net, ids, x) of a stage: the LM loss on the last stage, the hidden states else
    (a Chunks rank: the loss on its last chunk of the last rank)."""
    if isinstance(stage, Chunks):
        last = len(stage.chunks) - 1

        def chunk_loss(net, ids, x=None, chunk=0):
            out = net(ids, x, chunk)
            return T.causal_lm_loss(out, ids) if stage.last and chunk == last else out
        return chunk_loss
    if stage.last:
        return lambda net, ids, x=None: T.causal_lm_loss(net(ids, x), ids)
    return lambda net, ids, x=None: net(ids, x)


def one_f_one_b(step_mod, ids, counter, amp_ctx, stage: Stage, pp: int, stage_i: int,
                micro_batches: int, hidden_shape, dtype, loss_ctx=None):
    """Stage `stage_i`'s part of one 1F1B step of `micro_batches` micro-batches (module
    docstring); `hidden_shape` / `dtype`: the activations a later stage receives."""
    import contextlib
    lctx = loss_ctx or contextlib.nullcontext
    m = max(1, micro_batches)
    warm = min(pp - stage_i - 1, m)
    pending = deque()

    def fwd():
        counter.phase = "forward"
        x = None
        if not stage.first:   # the previous stage's activations, received
            x = torch.empty(hidden_shape, dtype=dtype, device=ids.device, requires_grad=True)
        with amp_ctx(), lctx():
            out = step_mod(ids, x)
        if not stage.last:    # sent; Megatron frees the output's data, keeps its graph
            out.data = torch.empty((1,), dtype=out.dtype, device=out.device)
        pending.append((x, out))

    def bwd():
        counter.phase = "backward"
        x, out = pending.popleft()
        if stage.last:
            with lctx():
                out.backward()
        else:                 # the next stage's gradient, received
            g = torch.empty(hidden_shape, dtype=out.dtype, device=ids.device)
            torch.autograd.Variable._execution_engine.run_backward(
                (out,), (g,), False, False, (), True, True)
            del g
        del x, out            # the input gradient (x.grad) is sent and freed with x

    for _ in range(warm):
        fwd()
    for _ in range(m - warm):
        fwd()
        bwd()
    while pending:
        bwd()


def interleaved_1f1b(step_mod, ids, counter, amp_ctx, model: Chunks, pp: int, stage_i: int,
                     micro_batches: int, hidden_shape, dtype, loss_ctx=None):
    """Rank `stage_i`'s part of one interleaved 1F1B step (Megatron-Core pipeline_parallel/
    schedules.py forward_backward_pipelining_with_interleaving, microbatch group = pp):
    m v chunk passes; 2 (pp - i - 1) + (v - 1) pp warm-up forwards (get_pp_rank_microbatches),
    then one forward and one backward, then the remaining backwards; virtual micro-batch k
    runs chunk (k mod pp v) // pp forward, v - 1 minus that backward (get_model_chunk_id).
    Neighbours emulated as in one_f_one_b."""
    import contextlib
    lctx = loss_ctx or contextlib.nullcontext
    v = len(model.chunks)
    total = max(1, micro_batches) * v
    warm = min(2 * (pp - stage_i - 1) + (v - 1) * pp, total)
    pending = [deque() for _ in range(v)]

    def chunk_of(k: int, forward: bool) -> int:
        c = (k % (pp * v)) // pp
        return c if forward else v - 1 - c

    def fwd(k):
        counter.phase = "forward"
        c = chunk_of(k, True)
        head, tail = model.first and c == 0, model.last and c == v - 1
        x = None if head else torch.empty(hidden_shape, dtype=dtype, device=ids.device,
                                          requires_grad=True)
        with amp_ctx(), lctx():
            out = step_mod(ids, x, c)
        if not tail:
            out.data = torch.empty((1,), dtype=out.dtype, device=out.device)
        pending[c].append((x, out))

    def bwd(k):
        counter.phase = "backward"
        c = chunk_of(k, False)
        x, out = pending[c].popleft()
        if model.last and c == v - 1:
            with lctx():
                out.backward()
        else:
            g = torch.empty(hidden_shape, dtype=out.dtype, device=ids.device)
            torch.autograd.Variable._execution_engine.run_backward(
                (out,), (g,), False, False, (), True, True)
            del g
        del x, out

    for k in range(warm):
        fwd(k)
    for k in range(total - warm):
        fwd(warm + k)
        bwd(k)
    for k in range(total - warm, total):
        bwd(k)
