"""Live-bytes accounting: a TorchDispatchMode that sees every op's outputs.

Each new storage an op returns is counted once (views share their storage) with its byte size
rounded up to 512 B, as PyTorch's CUDA caching allocator rounds a request (`allocated` figures);
a weakref callback on the storage subtracts it when it is freed. Storages that exist before the
mode (parameters, buffers, inputs) are registered explicitly.

Each storage carries a category and a module group, updated as the run learns more:
  weights           parameters and buffers
  gradients         a parameter's .grad (marked by a post-accumulate-grad hook)
  optimizer_states  tensors held in optimizer.state (marked after each step)
  activations       allocated in forward (and in recomputation during backward)
  kv_cache          marked by the generate loop
  temporary         allocated in backward or in the optimizer step and not kept
Category and module totals are kept incrementally, so the breakdown *at the peak* is a copy of
two small dicts each time the total reaches a new maximum.
"""
from __future__ import annotations

import weakref
from collections import defaultdict

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

ROUND = 512
CATEGORIES = ("weights", "gradients", "optimizer_states", "activations", "kv_cache", "temporary")


_aten = torch.ops.aten
_STATE_FACTORIES = {_aten.zeros_like, _aten.empty_like, _aten.ones_like, _aten.full_like,
                    _aten.zeros, _aten.clone}


def _wait_tensor_op():
    """`_c10d_functional.wait_tensor` (DTensor's and the functional collectives' wait), or
    None. Its eager kernel returns the tensor it waits on (torch 2.13: `wait_tensor(x) is x`
    on a CPU tensor), but under FakeTensorMode it returns a tensor with a new storage (its
    schema has no alias annotation), so every DTensor collective's output would be
    counted twice until the first copy dies (+1 gathered tensor at an all-gather). The counter
    hands back the input, as the real kernel does."""
    try:
        return torch.ops._c10d_functional.wait_tensor.default
    except (AttributeError, RuntimeError):
        return None


_WAIT_TENSOR = _wait_tensor_op()


def rounded(n: int, to: int = ROUND) -> int:
    return ((n + to - 1) // to) * to if n else 0


class MemoryCounter(TorchDispatchMode):
    def __init__(self, round_to: int = ROUND, timeline: bool = True):
        super().__init__()
        self.round_to = round_to
        self.rec: dict[int, list] = {}      # id(storage) -> [rounded, raw, category, module, weakref]
        self.cur = self.cur_raw = 0
        self.peak = self.peak_raw = 0
        self.peak_event, self.peak_phase, self.peak_step = -1, "setup", 0
        self.cat = defaultdict(int)
        self.mod = defaultdict(int)
        self.peak_cat: dict[str, int] = {}
        self.peak_mod: dict[str, int] = {}
        self.peak_largest = 0
        self.phase_peaks: dict[str, dict] = {}
        self.phase, self.step = "setup", 0
        self.module_of = lambda: None         # set by the runner: current module group
        self.recompute = lambda: False        # set by the runner: forward running inside backward
        self.events = 0
        self.ops = 0
        self.allocs = 0
        self.record_timeline = timeline
        self.timeline: list[tuple[int, str, int]] = []
        self.closed = False
        self.comm = 0

    # -- the category a new storage gets from where the run is
    def _default_category(self) -> str:
        if self.comm:   # inside an FSDP collective: its buffers (sharded.py)
            return "temporary"
        if self.phase in ("forward", "prefill", "decode"):
            return "activations"
        if self.phase == "backward":
            return "activations" if self.recompute() else "temporary"
        if self.phase == "setup":
            return "weights"
        return "temporary"

    def track(self, t, category: str | None = None, module: str | None = None) -> None:
        """Count t's storage if new; re-label it when category / module is given."""
        if not isinstance(t, torch.Tensor):
            return
        t = getattr(t, "_local_tensor", t)   # DTensor (FSDP2 shards): count the local shard
        st = t.untyped_storage()
        key = id(st)
        r = self.rec.get(key)
        if r is not None:
            nb = st.nbytes()
            if nb != r[1]:  # resized in place (FSDP2 frees / re-allocates storages this way)
                d, draw = rounded(nb, self.round_to) - r[0], nb - r[1]
                r[0], r[1] = r[0] + d, nb
                self._change(r, d, draw)
            if category and category != r[2] or module and module != r[3]:
                self._relabel(r, category or r[2], module or r[3])
            return
        nb = st.nbytes()
        cat = category or self._default_category()
        mod = module or self.module_of() or f"({self.phase})"
        r = [rounded(nb, self.round_to), nb, cat, mod, None]
        r[4] = weakref.ref(st, lambda _w, key=key: self._free(key))
        self.rec[key] = r
        self.allocs += 1
        self._change(r, r[0], r[1])

    def _relabel(self, r, cat, mod):
        self.cat[r[2]] -= r[0]
        self.mod[r[3]] -= r[0]
        r[2], r[3] = cat, mod
        self.cat[cat] += r[0]
        self.mod[mod] += r[0]

    def _change(self, r, d, draw):
        self.cur += d
        self.cur_raw += draw
        self.cat[r[2]] += d
        self.mod[r[3]] += d
        self.events += 1
        if self.record_timeline:
            self.timeline.append((self.events, self.phase, self.cur))
        if d > 0:
            pp = self.phase_peaks.get(self.phase)
            if pp is None or self.cur > pp["bytes"]:
                self.phase_peaks[self.phase] = {"bytes": self.cur, "step": self.step,
                                                "components": {k: v for k, v in self.cat.items() if v}}
            if self.cur > self.peak:
                self.peak, self.peak_raw = self.cur, self.cur_raw
                self.peak_event, self.peak_phase, self.peak_step = self.events, self.phase, self.step
                self.peak_cat = {k: v for k, v in self.cat.items() if v}
                self.peak_mod = {k: v for k, v in self.mod.items() if v}
                self._peak_dirty = True

    def _free(self, key):
        if self.closed:
            return
        r = self.rec.pop(key, None)
        if r is not None:
            self._change(r, -r[0], -r[1])

    def largest_live(self) -> int:
        return max((r[0] for r in self.rec.values()), default=0)

    def close(self):
        self.closed = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is _WAIT_TENSOR:   # the real kernel returns its input (see _wait_tensor_op)
            return args[0]
        self.ops += 1
        # optimizer state is created lazily in the first step by factory ops (zeros_like, clone):
        # label it at birth; the runner re-labels exactly from optimizer.state after the step
        cat = ("optimizer_states" if self.phase == "optimizer-step"
               and func.overloadpacket in _STATE_FACTORIES else None)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                lt = getattr(t, "_local_tensor", t)
                self.track(lt, cat) if cat and id(lt.untyped_storage()) not in self.rec else self.track(lt)
        if self.peak_event == self.events and getattr(self, "_peak_dirty", False):
            self.peak_largest = self.largest_live()
            self._peak_dirty = False
        return out
