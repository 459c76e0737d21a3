"""Activation checkpointing for the traced modules, with the kernel emulation inside it.

TorchFunctionModes are not active inside autograd's backward, where checkpoint recomputes the
forward; the runner sets `RECOMPUTE_CONTEXT` to a factory of the emulation mode so that the
recomputation allocates as CUDA kernels would too (`context_fn`). Library checkpointing
(transformers' `gradient_checkpointing_enable`) is given the same `context_fn`: without it the
forward ran the rewritten kernels and the recomputation the CPU ones, and checkpoint refused
the different saved tensors (T5: native_dropout's bool mask vs dropout's input-dtype mask).

torch is imported when this module is imported: import it lazily (measure/trace.py does).
"""
from __future__ import annotations

import contextlib

from torch.utils.checkpoint import checkpoint as _checkpoint

RECOMPUTE_CONTEXT = None
"""set by the runner: a factory of the context (kernel emulation) the recomputation runs in"""


def context_fn():
    """torch.utils.checkpoint's `context_fn`: the forward already runs inside the runner's mode;
    the recomputation runs in a fresh one from `RECOMPUTE_CONTEXT` (read when the checkpointed
    call runs, so a library's checkpoint set up before the runner set it gets it too)."""
    make = RECOMPUTE_CONTEXT
    return contextlib.nullcontext(), (make() if make is not None else contextlib.nullcontext())


def checkpoint(fn, *args, use_reentrant=False):
    return _checkpoint(fn, *args, use_reentrant=use_reentrant, context_fn=context_fn)


def _op_sac_policy():
    """torchtitan's op-level selective activation checkpointing policy (torchtitan/distributed/
    activation_checkpoint.py `_op_sac_save_list` and `_custom_policy`): save the outputs of
    aten.mm, of the fused SDPA kernels and of `_c10d_functional.reduce_scatter_tensor`, except
    every second mm; recompute everything else. `_scaled_dot_product_flash_attention_for_cpu`
    is the CPU form of the flash kernel the traced model calls. torchtitan keeps one counter
    per block for the whole run, so with an odd number of mm per block (7 in a Llama block) the
    saved set alternates between forwards (q, v, gate, down / k, o, up); a fresh counter per
    forward traces the larger set, the one the estimate counts (activations.selective_terms)."""
    from collections import defaultdict

    import torch
    from torch.utils.checkpoint import CheckpointPolicy
    aten = torch.ops.aten
    save = {aten.mm.default, aten._scaled_dot_product_efficient_attention.default,
            aten._scaled_dot_product_flash_attention.default,
            aten._scaled_dot_product_flash_attention_for_cpu.default,
            torch.ops._c10d_functional.reduce_scatter_tensor.default}
    count = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == aten.mm.default:
            count[mode] += 1
        keep = func in save and not (func == aten.mm.default and count[mode] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE
    return policy


def op_sac_checkpoint(fn, *args):
    """`checkpoint(fn, *args)` with torchtitan's op-level selective policy (the scenario's
    `checkpointing: selective`), the kernel emulation inside the recomputation as above."""
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    def contexts():
        fwd, rec = create_selective_checkpoint_contexts(_op_sac_policy())
        make = RECOMPUTE_CONTEXT
        if make is None:
            return fwd, rec
        return fwd, _both(make(), rec)
    return _checkpoint(fn, *args, use_reentrant=False, context_fn=contexts)


@contextlib.contextmanager
def _both(outer, inner):
    """Enter two contexts when the recomputation starts (not when they are made)."""
    with outer, inner:
        yield
