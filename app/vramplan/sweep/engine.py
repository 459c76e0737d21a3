"""Evaluate one scenario on every GPU at once, to the byte of `estimate`.

`estimate` runs, per (scenario, GPU): footprint(scenario, spec, traits) -> reserved(footprint,
scenario) -> device_used = reserved + what `overhead.device_used_bytes` adds outside the
allocator (CUDA context, NCCL, CUDA graphs, paged states). A footprint reads only a few device
traits (a training step: the compute capability, for the software era; a serving engine: the
usable memory, which sizes its KV pool), and each family says which in
`workloads/dispatch.py` (`DEVICE_TRAITS`, by task). The engine computes one footprint per
distinct answer of those traits: every GPU whose declared traits give the same values shares
it (the function is deterministic in what it reads). A declared trait may be one of the
runtime's pure functions of (scenario, device) (`DERIVED`: the software era, the CUDA context,
NCCL) instead of the raw value behind it: a training step asks only "pre-Ampere software
stack?" of the compute capability, so the GPUs of the database share two footprints, not one
per compute capability. A sweep reports numbers, not notes: traits read only to word notes
(the plan's warnings naming the GPU) are not declared. What device_used adds to reserved is
cached as one vector over all GPUs per distinct value of the scenario and footprint fields it
read (a `Recorder` notes which). The fit is then numpy over the GPUs.

The batch axis is numpy too (`evaluate_batch`): the footprint is called once per GPU group with
`batch_size` an int64 array of every batch value of the grid, and the workload's own functions
evaluate them together (`vramplan.vec`: the same code, array-transparent), so one call gives
(batch values x GPUs) figures. Where a footprint cannot take the array (a branch that differs
between batch values, a serving engine's pool, a refusal), `VectorFallback` says so and the
sweep calls it once per batch value instead.

Nothing here models memory: every figure comes from the estimator's own functions.
"""
from __future__ import annotations

import numpy as np

from .. import overhead, runtime, vec
from .. import parallel as par
from ..errors import VramplanError
from ..scenario import rules
from ..hardware import default_db, traits_of
from ..workloads.dispatch import device_traits
from ..workloads.dispatch import footprint as workload_footprint


def freeze(v):
    """A hashable, comparable stand-in for a value read (dicts and lists by content)."""
    if isinstance(v, dict):
        return ("{}",) + tuple(sorted((str(k), freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return ("[]",) + tuple(freeze(x) for x in v)
    if isinstance(v, (set, frozenset)):
        return ("set",) + tuple(sorted(freeze(x) for x in v))
    if isinstance(v, np.ndarray):
        return ("nd", v.dtype.str, v.shape, v.tobytes())
    return v


class VectorFallback(Exception):
    """A scenario whose batch axis the footprint did not evaluate as one array (the reason
    is the message): evaluate its batch values one at a time. `divergent`: a branch differed
    between batch values (vec.Divergent), so parts of the axis may still go as arrays."""

    def __init__(self, why: str, divergent: bool = False):
        super().__init__(why)
        self.divergent = divergent


class Recorder:
    """Stands in for an object and remembers what was read of it: each attribute and its value,
    and each call of one of its methods, with its arguments and answer."""

    __slots__ = ("_obj", "_reads")

    def __init__(self, obj):
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_reads", {})

    def _note(self, key, value) -> None:
        if key not in self._reads:
            self._reads[key] = freeze(value)

    def __getattr__(self, name):
        v = getattr(self._obj, name)      # AttributeError passes through: getattr(x, n, d)
        if callable(v) and getattr(v, "__self__", None) is self._obj:
            def call(*args, _name=name, _v=v):
                out = _v(*args)
                self._note((_name, args), out)
                return out
            return call
        self._note(name, v)
        return v


def probe(obj, key):
    """What `key` of a Recorder's reads is on another object: an attribute's value, or a
    method's answer to the same arguments."""
    if isinstance(key, tuple):
        name, args = key
        return freeze(getattr(obj, name)(*args))
    return freeze(getattr(obj, key))


# the runtime's answers of (scenario, device) a footprint may declare it reads
# (workloads/dispatch.py DEVICE_TRAITS) instead of the raw traits behind them
DERIVED = {
    "legacy_stack": lambda sc, t: runtime.legacy_stack(sc, t),
    "cuda_context_bytes": lambda sc, t: runtime.cuda_context_bytes(t, sc),
    "nccl_bytes": lambda sc, t: runtime.nccl_bytes(par.layout_of(sc.parallel), t),
}


def spec_of(sc):
    """The model of a scenario, found as `estimate` finds it (None for model-less tasks)."""
    from ..catalog import get_model, spec_from_architecture
    if sc.model:
        return get_model(sc.model)
    if sc.architecture:
        return spec_from_architecture(sc.architecture)
    return None


class Point:
    """One scenario on every GPU of an engine: arrays indexed like `Engine.devices`."""

    __slots__ = ("allocated", "reserved", "used", "fits", "capacity", "starts", "errors",
                 "footprints")

    def __init__(self, n: int):
        self.allocated = np.zeros(n, dtype=np.int64)
        self.reserved = np.zeros(n, dtype=np.int64)
        self.used = np.zeros(n, dtype=np.int64)
        self.fits = np.zeros(n, dtype=bool)
        self.capacity = np.full(n, -1, dtype=np.int64)   # batch_capacity, -1 where none
        self.starts = np.ones(n, dtype=bool)              # a serving engine starts (estimate)
        self.errors: dict[int, str] = {}                  # device index -> error message
        self.footprints: list = []                        # (footprint, device indices)

    @property
    def ok(self) -> np.ndarray:
        m = np.ones(len(self.used), dtype=bool)
        if self.errors:
            m[list(self.errors)] = False
        return m

    def holds(self, limit) -> np.ndarray:
        """Per GPU, whether the plan fits under `limit` (bytes: one per GPU, or one for all) as
        the advisor means it (advisor.solver.fits_with, one GPU at a time): no error, device
        used within the limit, a serving engine that starts, and a batch capacity of at least
        one (-1: the footprint has none; a serving pool must hold one whole request)."""
        return self.ok & (self.used <= limit) & self.starts & (self.capacity != 0)


class Engine:
    """The GPUs of a sweep (default: the whole hardware database) and the caches."""

    def __init__(self, devices=None):
        devs = list(default_db().devices if devices is None else devices)
        self.devices = devs
        self.traits = [traits_of(d) for d in devs]
        self.index = {d.id: i for i, d in enumerate(devs)}
        self.usable = np.array([t.usable_bytes for t in self.traits], dtype=np.int64)
        self.n = len(devs)
        self._groups: dict = {}
        self._sc_reads: dict = {}        # declared traits -> scenario fields DERIVED read
        self._off_names: set = set()
        self._off_order: tuple = ()
        self._offsets: dict = {}
        self.footprint_calls = 0

    def subset(self, ids) -> np.ndarray:
        return np.array([self.index[i] for i in ids], dtype=np.int64)

    # ---- footprints, shared by every GPU whose traits answer alike ----------------------
    def _groups_key(self, sc, names: tuple) -> tuple:
        return (names,) + tuple(probe(sc, k) for k in self._sc_reads.get(names, ()))

    def groups(self, sc, names: tuple) -> list[np.ndarray]:
        """The GPUs whose declared traits (`names`: DeviceTraits fields or DERIVED answers for
        `sc`) are equal, as index arrays in device order, cached by the names and the values
        of the scenario fields the DERIVED functions read."""
        key = self._groups_key(sc, names)
        out = self._groups.get(key)
        if out is not None:
            return out
        rs = Recorder(sc)
        cols = [[freeze(DERIVED[n](rs, t)) if n in DERIVED else freeze(getattr(t, n))
                 for t in self.traits] for n in names]
        by: dict = {}
        for i, k in enumerate(zip(*cols) if cols else [()] * self.n):
            by.setdefault(k, []).append(i)
        out = [np.array(v, dtype=np.int64) for v in by.values()]
        seen = set(self._sc_reads.get(names, ()))
        if not set(rs._reads) <= seen:
            self._sc_reads[names] = tuple(sorted(seen | set(rs._reads), key=repr))
            key = self._groups_key(sc, names)
        self._groups[key] = out
        return out

    def footprints(self, sc, spec, mask: np.ndarray | None = None) -> list:
        """[(footprint or the VramplanError it raised, device indices)] covering `mask`: one
        footprint per group of GPUs whose declared traits answer alike."""
        todo = np.ones(self.n, dtype=bool) if mask is None else mask
        try:
            names = device_traits(sc, spec)
        except VramplanError as exc:          # a task the family does not take: everywhere
            return [(exc, np.flatnonzero(todo))] if todo.any() else []
        out = []
        for idx in self.groups(sc, names):
            idx = idx[todo[idx]]
            if not len(idx):
                continue
            self.footprint_calls += 1
            try:
                fp = workload_footprint(sc, spec, self.traits[int(idx[0])])
            except VramplanError as exc:
                fp = exc
            out.append((fp, idx))
        return out

    # ---- what device_used adds to reserved ----------------------------------------------
    def _offset_key(self, fp, sc) -> tuple:
        return tuple(probe(sc if o == "s" else fp, k) for o, k in self._off_order)

    def offsets(self, fp, sc) -> np.ndarray:
        """device_used - reserved on every GPU (CUDA context, NCCL, engine extras)."""
        key = self._offset_key(fp, sc)
        vec = self._offsets.get(key)
        if vec is not None:
            return vec
        vals = []
        names = set()
        for i, t in enumerate(self.traits):
            rs, rf = Recorder(sc), Recorder(fp)
            vals.append(overhead.device_used_bytes(rf, rs, t, 0)["total"])
            names |= {("s", k) for k in rs._reads} | {("f", k) for k in rf._reads}
        # one value per GPU; (GPUs, batch values) where extras follow a batch array
        shape = np.broadcast_shapes(*(np.shape(v) for v in vals))
        vec = np.stack([np.broadcast_to(np.asarray(v, dtype=np.int64), shape) for v in vals])
        if not names <= self._off_names:
            self._off_names |= names
            self._off_order = tuple(sorted(self._off_names, key=repr))
            self._offsets.clear()
            key = self._offset_key(fp, sc)
        self._offsets[key] = vec
        return vec

    # ---- one scenario on every GPU --------------------------------------------------------
    def evaluate(self, sc, spec=None, mask: np.ndarray | None = None) -> Point:
        """The estimate's allocated / reserved / device-used bytes and fit of `sc` on every
        GPU in `mask` (default all); a scenario the workload refuses is an error there."""
        spec = spec_of(sc) if spec is None else spec
        pt = Point(self.n)
        for fp, idx in self.footprints(sc, spec, mask):
            pt.footprints.append((fp, idx))
            if isinstance(fp, Exception):
                for i in idx:
                    pt.errors[int(i)] = str(fp)
                continue
            reserved = overhead.reserved_bytes(fp, sc)
            pt.allocated[idx] = fp.peak_allocated_bytes
            pt.reserved[idx] = reserved
            pt.used[idx] = reserved + self.offsets(fp, sc)[idx]
            if fp.batch_capacity is not None:
                pt.capacity[idx] = fp.batch_capacity
            if not fp.serving.get("engine_starts", True):   # as estimate(): vLLM's check
                pt.starts[idx] = False
        pt.fits = (pt.used <= self.limit(sc)) & pt.starts
        if pt.errors:
            pt.fits &= pt.ok
        if mask is not None:
            pt.fits &= mask
        return pt

    def limit(self, sc) -> np.ndarray:
        """The one memory limit per GPU (estimate.memory_limit): usable memory less the
        scenario's safety margin."""
        return np.asarray(rules.memory_limit(getattr(sc, "safety_margin", None), self.usable),
                          dtype=np.int64)

    def evaluate_batch(self, sc, spec, mask: np.ndarray, size: int) -> "BatchPoint":
        """`evaluate` of a scenario whose batch_size is an int64 array of `size` values: one
        footprint call per GPU group evaluates them all (vramplan.vec); arrays of shape
        (size, GPUs). VectorFallback where a group's footprint cannot take the array or
        refuses the plan."""
        bp = BatchPoint(self.n, size)
        try:
            groups = self.footprints(sc, spec, mask)
        except VramplanError as exc:          # raised outside the footprint proper
            raise VectorFallback(str(exc)) from None
        except (TypeError, ValueError, IndexError, AttributeError) as exc:   # not array-wise
            raise VectorFallback(f"{type(exc).__name__}: {exc}",
                                 isinstance(exc, vec.Divergent)) from None
        for fp, idx in groups:
            if isinstance(fp, Exception):
                raise VectorFallback(f"refused: {fp}")
            try:
                reserved = overhead.reserved_bytes(fp, sc)
                off = self.offsets(fp, sc)[idx]
            except (TypeError, ValueError, IndexError) as exc:
                raise VectorFallback(f"{type(exc).__name__}: {exc}") from None
            col = np.reshape(np.asarray(reserved, dtype=np.int64), (-1, 1))
            bp.allocated[:, idx] = np.reshape(
                np.asarray(fp.peak_allocated_bytes, dtype=np.int64), (-1, 1))
            bp.reserved[:, idx] = col
            bp.used[:, idx] = col + (off.T if off.ndim == 2 else off)
            if fp.batch_capacity is not None:
                bp.capacity[:, idx] = np.reshape(
                    np.asarray(fp.batch_capacity, dtype=np.int64), (-1, 1))
            bp.footprints.append((fp, idx))
        bp.fits = (bp.used <= self.limit(sc)) & mask
        return bp


class BatchPoint:
    """One scenario at `size` batch values on every GPU: (batch values, GPUs) arrays."""

    __slots__ = ("allocated", "reserved", "used", "fits", "capacity", "footprints")

    def __init__(self, n: int, size: int):
        self.allocated = np.zeros((size, n), dtype=np.int64)
        self.reserved = np.zeros((size, n), dtype=np.int64)
        self.used = np.zeros((size, n), dtype=np.int64)
        self.fits = np.zeros((size, n), dtype=bool)
        self.capacity = np.full((size, n), -1, dtype=np.int64)
        self.footprints: list = []

    def row(self, j: int) -> Point:
        """The Point of the j-th batch value (for max_batch's base point)."""
        pt = Point(self.used.shape[1])
        pt.allocated, pt.reserved, pt.used, pt.fits, pt.capacity = (
            self.allocated[j], self.reserved[j], self.used[j], self.fits[j], self.capacity[j])
        pt.footprints = list(self.footprints)
        return pt
