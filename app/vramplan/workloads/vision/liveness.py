"""Liveness of a vision layer graph (`layers.Graph`): the bytes alive along one step.

`liveness(graph, outputs, checkpoint)` replays the forward pass (a tensor lives from its
producer to its last consumer, or until backward when saved), the backward pass in reverse (a
saved tensor is freed after the backward of its earliest saver; the gradient of a tensor lives
from the backward of its last consumer to that of its producer; parameter gradients appear op
by op) and returns `Curves`: the live bytes per op, split in per-sample and batch-independent
rows, so `Curves.at(batch)` (one batch or an array of them) reads the peaks of each phase.
Split out of layers.py (the graph builder) along the build / analyse seam.
"""
from __future__ import annotations

from ...vec import is_array, to_int

DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i64": 8, "u8": 1}


def effective_savers(g, checkpoint: bool) -> tuple[dict, dict]:
    """Savers per tensor; with `checkpoint` (torch.utils.checkpoint around every block),
    tensors saved only inside a block are dropped from the forward and come back, per
    block, when backward recomputes it; the block's inputs are what it saves."""
    savers = {id(t): list(t.savers) for t in g.tensors}
    recompute: dict[int, tuple[int, int]] = {}
    if not checkpoint or not g.blocks:
        return savers, recompute
    where = {}
    for b, (s, e) in enumerate(g.blocks):
        for i in range(s, e):
            where[i] = b
    for t in g.tensors:
        sv = savers[id(t)]
        if sv and all(i in where for i in sv) and t.producer in where and \
                all(where[i] == where[t.producer] for i in sv):
            # recomputed when backward reaches the block, freed after its earliest saver
            recompute[id(t)] = (min(sv), g.blocks[where[t.producer]][1])
            savers[id(t)] = []
    for s, e in g.blocks:             # block inputs: produced before, consumed inside
        for t in g.tensors:
            if t.producer < s and any(s <= c < e for c in t.consumers) and (
                    t.requires_grad or t.producer >= 0):
                savers[id(t)] = savers[id(t)] + [s]
    return savers, recompute


def _storages(g, outs: set, savers: dict, n: int) -> dict:
    """Per storage: [per-sample bytes, const bytes, first producer, last use, backward free]."""
    st: dict[int, list] = {}
    for t in g.tensors:
        b = t.numel * DTYPE_BYTES[t.dtype]
        last = max(t.consumers) if t.consumers else (n if id(t) in outs else t.producer)
        if not t.batched or id(t) in outs:   # autocast weight cache: until forward ends
            last = n
        s = st.setdefault(t.storage, [0, 0, 10 ** 9, -1, n + 1])
        s[0 if t.batched else 1] = max(s[0 if t.batched else 1], b)
        s[2] = min(s[2], max(t.producer, 0))
        s[3] = max(s[3], min(last, n))
        if savers[id(t)] and g.training:
            s[4] = min(s[4], min(savers[id(t)]))
    for sid, until in getattr(g, "held", {}).items():   # Graph.hold (inference only)
        if sid in st:
            st[sid][3] = max(st[sid][3], min(until, n))
    return st


def _bytes_row(t):
    """A tensor's bytes as the (per-sample, constant) pair."""
    import numpy as np
    return np.array([t.numel * DTYPE_BYTES[t.dtype], 0]) if t.batched else \
        np.array([0, t.numel * DTYPE_BYTES[t.dtype]])


def _activation_events(st: dict, n: int) -> tuple:
    """(forward, inference, backward) allocation / free events per op of the storages, the
    bytes saved for backward and the largest storage."""
    import numpy as np
    z = lambda: np.zeros((2, n + 2))  # noqa: E731  rows: per-sample, constant
    fwd, inf, bwd = z(), z(), z()
    saved = np.zeros(2)
    largest = np.zeros(2)
    for pb, cb, lo, end, free in st.values():
        v = np.array([pb, cb])
        largest = np.maximum(largest, v)
        inf[:, lo] += v
        inf[:, end + 1] -= v
        if free <= n:
            saved += v
            fwd[:, lo] += v
            bwd[:, free] += v        # alive in backward for ops >= free
        else:
            fwd[:, lo] += v
            fwd[:, end + 1] -= v
    return fwd, inf, bwd, saved, largest


def _recomputed_events(g, recompute: dict, bwd) -> None:
    """Recomputed block internals (checkpointing), alive during their block's backward."""
    seen = set()
    for t in g.tensors:              # recomputed block internals, during its backward
        if id(t) in recompute and t.storage not in seen:
            seen.add(t.storage)
            bs, be = recompute[id(t)]
            v = _bytes_row(t)
            bwd[:, bs] += v
            bwd[:, be] -= v


def _gradient_events(g, outs: set, n: int):
    """Activation gradients: from the backward of a tensor's last consumer to its producer's."""
    import numpy as np
    grd = np.zeros((2, n + 2))
    for t in g.tensors:
        if g.training and t.requires_grad and t.producer >= 0:
            hi = n - 1 if (id(t) in outs or not t.consumers) else min(max(t.consumers), n - 1)
            v = _bytes_row(t)
            grd[:, t.producer] += v
            grd[:, hi + 1] -= v
    return grd


def liveness(g, outputs: list | None, checkpoint: bool) -> "Curves":
    """The Curves of graph `g` keeping `outputs` to the end (the loss, kept tensors);
    `checkpoint`: torch.utils.checkpoint around every block."""
    import numpy as np
    n = len(g.ops)
    outs = set(id(t) for t in (outputs or []))
    savers, recompute = effective_savers(g, checkpoint and g.training)
    st = _storages(g, outs, savers, n)
    fwd, inf, bwd, saved, largest = _activation_events(st, n)
    _recomputed_events(g, recompute, bwd)
    grd = _gradient_events(g, outs, n)
    c = Curves()
    c.forward = np.cumsum(fwd, axis=1)[:, : n + 1]
    c.inference = np.cumsum(inf, axis=1)[:, : n + 1]
    c.backward = (np.cumsum(bwd, axis=1) + np.cumsum(grd, axis=1))[:, :n]
    c.grads = np.cumsum(grd, axis=1)[:, :n]
    c.saved, c.largest = saved, largest
    tr = np.array([op.params if (op.trainable and g.training) else 0 for op in g.ops],
                  dtype=float)
    tot = tr.sum() or 1.0
    # share of trainable parameter grads produced once backward reaches op i (reverse order)
    c.param_frac = np.cumsum(tr[::-1])[::-1] / tot
    c.active = np.array([op.output is None or op.output.requires_grad for op in g.ops])
    return c


class Curves:
    """Live activation bytes along a step: rows are (per-sample, batch-independent) bytes; each
    column is one op (forward: after op i; backward: while op i's backward runs)."""

    forward = inference = backward = grads = saved = largest = param_frac = active = None

    @staticmethod
    def _at(rows, batch):
        return rows[0] * batch + rows[1]

    def at(self, batch: int, param_grad_bytes: int = 0) -> dict:
        """Bytes for micro-batch `batch`; `param_grad_bytes`: gradients that appear during
        backward (zero when gradients are pre-allocated), so the backward peak can sit at the
        op where activations + gradients so far are largest."""
        import numpy as np
        if is_array(batch):      # a sweep's batch axis (vramplan.vec): one value per batch
            return self._at_many(batch, param_grad_bytes)
        fwd = self._at(self.forward, batch)
        res = {"saved": int(self._at(self.saved, batch)),
               "forward_peak": int(fwd.max()), "end_of_forward": int(fwd[-1]),
               "inference_peak": int(self._at(self.inference, batch).max()),
               "largest": int(max(self.largest[0] * batch, self.largest[1])),
               "backward_peak": 0, "backward_grads": 0, "backward_param_frac": 0.0}
        if self.backward is not None and self.backward.shape[1]:
            bwd = self._at(self.backward, batch) + self.param_frac * param_grad_bytes
            bwd = np.where(self.active, bwd, 0)
            i = int(bwd.argmax())
            res["backward_peak"] = int(self._at(self.backward, batch)[i])
            res["backward_grads"] = int(self._at(self.grads, batch)[i])
            res["backward_param_frac"] = float(self.param_frac[i])
        return res

    def _at_many(self, batch, param_grad_bytes) -> dict:
        """`at` for an int64 array of batch values, element by element the same arithmetic."""
        import numpy as np
        B = batch[:, None]
        fwd = self._at(self.forward, B)
        res = {"saved": to_int(self._at(self.saved, batch)),
               "forward_peak": to_int(fwd.max(axis=1)), "end_of_forward": to_int(fwd[:, -1]),
               "inference_peak": to_int(self._at(self.inference, B).max(axis=1)),
               "largest": to_int(np.maximum(self.largest[0] * batch, self.largest[1])),
               "backward_peak": 0, "backward_grads": 0, "backward_param_frac": 0.0}
        if self.backward is not None and self.backward.shape[1]:
            back = self._at(self.backward, B)
            bwd = np.where(self.active, back + self.param_frac * param_grad_bytes, 0)
            i, rows = bwd.argmax(axis=1), np.arange(len(batch))   # the first top, as argmax
            res["backward_peak"] = to_int(back[rows, i])
            res["backward_grads"] = to_int(self._at(self.grads, B)[rows, i])
            res["backward_param_frac"] = self.param_frac[i]
        return res
