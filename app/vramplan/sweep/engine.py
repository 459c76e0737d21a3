"""Evaluate one scenario on every GPU at once, to the byte of `estimate`.

`estimate` runs, per (scenario, GPU): footprint(scenario, spec, traits) -> reserved(footprint,
scenario) -> device_used = reserved + what `overhead.device_used_bytes` adds outside the
allocator (CUDA context, NCCL, CUDA graphs, paged states). A footprint reads only a few device
traits (a training step: the compute capability, for the software era; a serving engine: the
usable memory, which sizes its KV pool). The engine learns which by reading them through a
`Recorder`, and computes one footprint per distinct answer: every GPU whose traits give the
same values shares it (the function is deterministic in what it reads). A trait read inside
one of the runtime's pure functions of (scenario, device) (`FACTS`: the software era, the
CUDA context, NCCL) counts as that function's answer instead of the raw value: a training step
asks only "pre-Ampere software stack?" of the compute capability, so the 71 GPUs of the
database share two footprints, not one per compute capability. A sweep reports numbers, not
notes: reads inside functions that only word notes (`NOTE_ONLY`, e.g. the plan's warnings
naming the GPU) split no group. What device_used adds to
reserved is cached the same way, as one vector over all GPUs per distinct value of the
scenario and footprint fields it read. The fit is then numpy over the GPUs.

The batch axis is numpy too (`evaluate_batch`): the footprint is called once per GPU group with
`batch_size` an int64 array of every batch value of the grid, and the workload's own functions
evaluate them together (`vramplan.vec`: the same code, array-transparent), so one call gives
(batch values x GPUs) figures. Where a footprint cannot take the array (a branch that differs
between batch values, a serving engine's pool, a refusal), `VectorFallback` says so and the
sweep calls it once per batch value instead.

Nothing here models memory: every figure comes from the estimator's own functions.
"""
from __future__ import annotations

import sys

import numpy as np

from .. import overhead, runtime, vec
from ..errors import VramplanError
from ..hardware import default_db, traits_of
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


# pure functions of their arguments that read device traits: a trait read while one of them
# runs is that function's answer (evaluated for every GPU), not the trait's value
FACTS = {f.__code__: f for f in (runtime.legacy_stack, runtime.cuda_context_bytes,
                                   runtime.nccl_bytes)}
# functions whose answer only words notes (the numbers never depend on it): (module, name)
NOTE_ONLY = {("vramplan.hardware.capabilities", "plan_warnings")}
_STOP = workload_footprint.__code__
_PLAIN = (int, float, str, bool, type(None), tuple, list, dict, frozenset)


class DeviceRecorder(Recorder):
    """A Recorder of device traits that attributes a read made inside a `FACTS` function to
    that call (its function and arguments) instead of the raw value."""

    __slots__ = ("_facts",)

    def __init__(self, obj):
        super().__init__(obj)
        object.__setattr__(self, "_facts", {})

    def __getattr__(self, name):
        f = sys._getframe(1)
        while f is not None and f.f_code is not _STOP:
            if (f.f_globals.get("__name__"), f.f_code.co_name) in NOTE_ONLY:
                return getattr(self._obj, name)
            fn = FACTS.get(f.f_code)
            if fn is not None:
                code = f.f_code
                args = tuple(f.f_locals[a] for a in code.co_varnames[:code.co_argcount])
                slot = next((k for k, a in enumerate(args) if a is self), None)
                if slot is not None:
                    key = (code, slot) + tuple(id(a) for a in args)
                    self._facts.setdefault(key, (fn, args, slot))
                    return getattr(self._obj, name)
            f = f.f_back
        return Recorder.__getattr__(self, name)


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

    __slots__ = ("allocated", "reserved", "used", "fits", "capacity", "errors", "footprints")

    def __init__(self, n: int):
        self.allocated = np.zeros(n, dtype=np.int64)
        self.reserved = np.zeros(n, dtype=np.int64)
        self.used = np.zeros(n, dtype=np.int64)
        self.fits = np.zeros(n, dtype=bool)
        self.capacity = np.full(n, -1, dtype=np.int64)   # batch_capacity, -1 where none
        self.errors: dict[int, str] = {}                  # device index -> error message
        self.footprints: list = []                        # (footprint, device indices)

    @property
    def ok(self) -> np.ndarray:
        m = np.ones(len(self.used), dtype=bool)
        if self.errors:
            m[list(self.errors)] = False
        return m


class Engine:
    """The GPUs of a sweep (default: the whole hardware database) and the caches."""

    def __init__(self, devices=None):
        devs = list(default_db().devices if devices is None else devices)
        self.devices = devs
        self.traits = [traits_of(d) for d in devs]
        self.index = {d.id: i for i, d in enumerate(devs)}
        self.usable = np.array([t.usable_bytes for t in self.traits], dtype=np.int64)
        self.n = len(devs)
        self._members: dict = {}
        self._fact_names: dict = {}
        self._groups: dict = {}
        self._fact_vecs: dict = {}
        self._off_names: set = set()
        self._off_order: tuple = ()
        self._offsets: dict = {}
        self.footprint_calls = 0

    def subset(self, ids) -> np.ndarray:
        return np.array([self.index[i] for i in ids], dtype=np.int64)

    # ---- footprints, shared by every GPU whose traits answer alike ----------------------
    def _matching(self, reads: dict) -> np.ndarray:
        key = frozenset(reads.items())
        idx = self._members.get(key)
        if idx is None:
            idx = np.array([i for i, t in enumerate(self.traits)
                            if all(probe(t, a) == v for a, v in key)], dtype=np.int64)
            self._members[key] = idx
        return idx

    def _fact_key(self, fn, args, slot) -> tuple:
        names = self._fact_names.get(fn.__code__, ())
        plain = tuple(freeze(a) for k, a in enumerate(args) if k != slot and
                      isinstance(a, _PLAIN))
        return (fn.__code__, slot, plain) + tuple(probe(args[k], n) for k, n in names)

    def fact_vector(self, fn, args, slot) -> list:
        """fn(*args) with each GPU's traits in the device slot: one answer per GPU, cached by
        the values of what fn read of its other arguments."""
        key = self._fact_key(fn, args, slot)
        vec = self._fact_vecs.get(key)
        if vec is not None:
            return vec
        vec, names = [], set(self._fact_names.get(fn.__code__, ()))
        for t in self.traits:
            call = [Recorder(a) if k != slot and not isinstance(a, _PLAIN) else a
                    for k, a in enumerate(args)]
            call[slot] = t
            vec.append(freeze(fn(*call)))
            names |= {(k, n) for k, r in enumerate(call) if isinstance(r, Recorder)
                      for n in r._reads}
        if names != set(self._fact_names.get(fn.__code__, ())):
            self._fact_names[fn.__code__] = tuple(sorted(names, key=repr))
            self._fact_vecs = {k: v for k, v in self._fact_vecs.items() if k[0] is not
                               fn.__code__}
            self._groups.clear()        # keyed by the identity of the vectors dropped
            key = self._fact_key(fn, args, slot)
        self._fact_vecs[key] = vec
        return vec

    def _group(self, rec: DeviceRecorder, i: int) -> np.ndarray:
        """The GPUs whose raw trait values and fact answers equal GPU i's."""
        facts = []
        for fn, args, slot in rec._facts.values():
            vec = self.fact_vector(fn, args, slot)
            facts.append((id(vec), vec[i], vec))
        key = (frozenset(rec._reads.items()), tuple(f[:2] for f in facts))
        idx = self._groups.get(key)
        if idx is None:
            idx = self._matching(rec._reads)
            for _, mine, vec in facts:
                idx = idx[[vec[j] == mine for j in idx]]
            self._groups[key] = idx
        return idx

    def footprints(self, sc, spec, mask: np.ndarray | None = None) -> list:
        """[(footprint or the VramplanError it raised, device indices)] covering `mask`."""
        todo = np.ones(self.n, dtype=bool) if mask is None else mask.copy()
        out = []
        while todo.any():
            i = int(np.argmax(todo))
            rec = DeviceRecorder(self.traits[i])
            self.footprint_calls += 1
            try:
                fp = workload_footprint(sc, spec, rec)
            except VramplanError as exc:
                fp = exc
            idx = self._group(rec, i)
            idx = idx[todo[idx]]
            if not len(idx):            # a trait read as something it is not: alone
                idx = np.array([i], dtype=np.int64)
            out.append((fp, idx))
            todo[idx] = False
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
        pt.fits = pt.used <= self.usable
        if pt.errors:
            pt.fits &= pt.ok
        if mask is not None:
            pt.fits &= mask
        return pt

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
        bp.fits = (bp.used <= self.usable) & mask
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
