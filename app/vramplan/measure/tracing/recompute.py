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
