"""Activation checkpointing for the traced modules, with the kernel emulation inside it.

TorchFunctionModes are not active inside autograd's backward, where checkpoint recomputes the
forward; the runner sets `RECOMPUTE_CONTEXT` to a factory of the emulation mode so that the
recomputation allocates as CUDA kernels would too (`context_fn`).

torch is imported when this module is imported: import it lazily (measure/trace.py does).
"""
from __future__ import annotations

import contextlib

from torch.utils.checkpoint import checkpoint as _checkpoint

RECOMPUTE_CONTEXT = None
"""set by the runner: a factory of the context (kernel emulation) the recomputation runs in"""


def checkpoint(fn, *args, use_reentrant=False):
    make = RECOMPUTE_CONTEXT
    if make is None:
        return _checkpoint(fn, *args, use_reentrant=use_reentrant)
    return _checkpoint(fn, *args, use_reentrant=use_reentrant,
                       context_fn=lambda: (contextlib.nullcontext(), make()))
