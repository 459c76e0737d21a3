"""The rows of a sweep: each grid point on every GPU group, its batch axis in one footprint
call where the workload takes it (`Engine.evaluate_batch`), else one call per batch value;
the max batch per GPU (`max_batch`); forked workers for large grids. `sweep()` in
`__init__.py` assembles the rows."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..errors import ScenarioError, VramplanError
from ..estimate import MAX_BATCH_CAP, largest_fitting
from .engine import Engine, VectorFallback, freeze, spec_of
from .grid import BatchVariants, changes_for, gpu_classes, with_batch

_ENGINE: Engine | None = None


def engine() -> Engine:
    """The shared engine over the hardware database (its caches persist between sweeps)."""
    global _ENGINE
    from ..hardware import default_db
    devs = default_db().devices
    if _ENGINE is None or _ENGINE.devices != list(devs):
        _ENGINE = Engine(devs)
    return _ENGINE


def _scenario(s):
    from ..scenario import Scenario
    return s if isinstance(s, Scenario) else Scenario.from_dict(s)


def _gpu_mask(eng: Engine, base, ids) -> np.ndarray:
    if ids is None:
        if not base.gpu:
            raise VramplanError("no GPU given: the scenario has no \"gpu\"; vary gpu=... or "
                                "add one")
        ids = [base.gpu]
    mask = np.zeros(eng.n, dtype=bool)
    for i in ids:
        if i not in eng.index:
            raise VramplanError(f"GPU '{i}' is not in the hardware database")
        mask[eng.index[i]] = True
    return mask


PARALLEL_ROWS = 2000          # below this a grid takes well under a second on one CPU
MAX_WORKERS = 8


class _Job:
    def __init__(self, make, given, base, keys, batch, mask, cols, with_max_batch, eng,
                 classes):
        self.make, self.given, self.base, self.keys, self.batch = make, given, base, keys, batch
        self.mask, self.cols, self.with_max_batch, self.eng = mask, cols, with_max_batch, eng
        self.classes = classes          # [(GPU id or None, mask)]: gpu_classes
        self._made: dict = {}

    def made(self, ch: dict):
        """make(ch), remembered for the grid point at hand (`forget` between points); a
        ScenarioError is raised again."""
        key = freeze(ch)
        got = self._made.get(key)
        if got is None:
            try:
                got = self.make(ch)
            except ScenarioError as exc:
                got = exc
            self._made[key] = got
        if isinstance(got, Exception):
            raise got
        return got

    def forget(self) -> None:
        self._made.clear()


def _workers(workers, n_rows: int, n_combos: int) -> int:
    import os
    import threading
    if workers is not None:
        return max(1, min(int(workers), n_combos))
    if n_rows < PARALLEL_ROWS or threading.active_count() > 1 or \
            threading.current_thread() is not threading.main_thread():
        return 1
    try:
        import multiprocessing as mp
        mp.get_context("fork")
    except (ImportError, ValueError):
        return 1
    return max(1, min(MAX_WORKERS, (os.cpu_count() or 1) - 1, n_combos))


_JOB: _Job | None = None


def _part(combos):
    return _rows(_JOB, combos)


def _parallel(job, combos, n: int) -> list:
    """The rows of `combos` in n forked processes, in order."""
    global _JOB
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    step = -(-len(combos) // n)
    chunks = [combos[i:i + step] for i in range(0, len(combos), step)]
    _JOB = job
    try:
        with ProcessPoolExecutor(max_workers=len(chunks),
                                 mp_context=mp.get_context("fork")) as ex:
            return list(ex.map(_part, chunks))
    finally:
        _JOB = None


def _rows(job: _Job, combos) -> tuple:
    """(allocated, reserved, used, fits, max batch, points, errors, footprint calls) of the
    rows of `combos` (each with every batch of the grid)."""
    eng, cols, batch = job.eng, job.cols, job.batch
    n_rows = len(combos) * len(batch or [None])
    shape = (n_rows, len(cols))
    alloc, res, used = (np.zeros(shape, dtype=np.int64) for _ in range(3))
    fits = np.zeros(shape, dtype=bool)
    mb = np.zeros(shape, dtype=np.int64) if job.with_max_batch else None
    out = SimpleNamespace(alloc=alloc, res=res, used=used, fits=fits, mb=mb, errors={})
    points: list[dict] = []
    calls0 = eng.footprint_calls
    specs: dict = {}
    classes = [(rep, cmask, np.flatnonzero(cmask[cols])) for rep, cmask in job.classes]
    stats: dict = {"vector": 0, "fallback": {}}
    vb = _batch_array(batch)
    for combo in combos:
        job.forget()
        point = dict(zip(job.keys, combo))
        per_class = _point_classes(job, point, classes, specs, vb, stats)
        r0 = len(points)
        for entry in per_class:
            _fill_segments(job, out, r0, entry)
        for j, b in enumerate(batch or [None]):
            r = len(points)
            points.append({**point, "batch_size": b} if b is not None else dict(point))
            for entry in per_class:
                _fill_point(job, out, r, j, b, entry)
    return (alloc, res, used, fits, mb, points, out.errors, eng.footprint_calls - calls0,
            stats)


def _point_classes(job: _Job, point: dict, classes: list, specs: dict, vb, stats: dict) -> list:
    """Per GPU group of one grid point: (scenario or its ScenarioError, spec, batch variants,
    GPU mask, columns, [the point's max batch], the vector Segments or None)."""
    eng, batch = job.eng, job.batch
    per_class = []
    for rep, cmask, pos in _merged(job, point, classes):
        try:
            ch0 = changes_for(job.given, job.base, point)
            if rep is not None:
                ch0["gpu"] = rep
            sc0 = job.made(ch0)
        except ScenarioError as exc:
            per_class.append((exc, None, None, cmask, pos, [None], None))
            continue
        key = (sc0.model, freeze(sc0.architecture))
        spec = specs[key] if key in specs else specs.setdefault(key, spec_of(sc0))
        variants = BatchVariants(sc0, batch or (),
                                 make=lambda b, ch0=ch0: job.make({**ch0, "batch_size": b}))
        per_class.append((sc0, spec, variants, cmask, pos, [None],
                          _vector(eng, sc0, spec, variants, cmask, vb, stats)))
    return per_class


def _fill_segments(job: _Job, out, r0: int, entry: tuple) -> None:
    """The rows from r0 that one GPU group's vector calls (Segments) gave, and their max
    batch."""
    eng, cols, batch = job.eng, job.cols, job.batch
    alloc, res, used, fits, mb = out.alloc, out.res, out.used, out.fits, out.mb
    sc0, spec, variants, cmask, pos, combo_mb, segs = entry
    at = cols[pos]
    for lo, hi, bp in segs or ():
        rows = slice(r0 + lo, r0 + hi)
        alloc[rows, pos], res[rows, pos], used[rows, pos], fits[rows, pos] = (
            bp.allocated[:, at], bp.reserved[:, at], bp.used[:, at], bp.fits[:, at])
        if mb is None:
            continue
        if (bp.capacity >= 0).any():     # an engine's capacity: each row's own
            for j in range(lo, hi):
                mb[r0 + j, pos] = max_batch(variants.get(batch[j]), mask=cmask,
                                            eng=eng, spec=spec,
                                            base_point=bp.row(j - lo))[at]
            continue
        if combo_mb[0] is None:          # one max batch per grid point, as below
            combo_mb[0] = max_batch(variants.get(batch[lo]), mask=cmask, eng=eng,
                                    spec=spec, base_point=bp.row(0))[at]
        mb[rows, pos] = combo_mb[0]


def _fill_point(job: _Job, out, r: int, j: int, b, entry: tuple) -> None:
    """Row r (batch value b, the j-th of the grid) of one GPU group where no vector call
    covered it: one footprint call, its errors and its max batch."""
    eng, cols = job.eng, job.cols
    alloc, res, used, fits, mb, errors = out.alloc, out.res, out.used, out.fits, out.mb, \
        out.errors
    sc0, spec, variants, cmask, pos, combo_mb, segs = entry
    if segs is not None and segs.covers(j):
        return
    sc = sc0 if (b is None or isinstance(sc0, Exception)) else variants.get(b)
    if isinstance(sc, Exception):
        for c in pos:
            errors[(r, int(c))] = str(sc)
        return
    pt = eng.evaluate(sc, spec, cmask)
    at = cols[pos]
    alloc[r, pos], res[r, pos], used[r, pos], fits[r, pos] = (
        pt.allocated[at], pt.reserved[at], pt.used[at], pt.fits[at])
    for i, msg in pt.errors.items():
        errors[(r, int(np.searchsorted(cols, i)))] = msg
    if mb is not None:
        # the max batch of a point does not depend on its own batch where the
        # variants differ in the batch field alone (not a serving pool: capacity)
        reuse = variants.fast and not pt.errors and pt.capacity.max() < 0
        if reuse and combo_mb[0] is not None:
            mb[r, pos] = combo_mb[0]
        else:
            mb[r, pos] = max_batch(sc, mask=cmask, eng=eng, spec=spec,
                                   base_point=pt)[at]
            combo_mb[0] = mb[r, pos].copy() if reuse else None


def _batch_array(batch):
    """The batch axis as an int64 array for one footprint call (two or more plain ints),
    else None."""
    if not batch or len(batch) < 2 or \
            not all(isinstance(b, int) and not isinstance(b, bool) for b in batch):
        return None
    return np.asarray(batch, dtype=np.int64)


class Segments(list):
    """[(first, last + 1, BatchPoint)]: the runs of a grid point's batch axis that one
    footprint call each gave."""

    def covers(self, j: int) -> bool:
        return any(lo <= j < hi for lo, hi, _ in self)


def _vector(eng, sc0, spec, variants, cmask, vb, stats):
    """The batch axis of one grid point and GPU group in as few footprint calls as the
    workload allows (Segments), or None: then one call per batch value (the reason counted
    in stats). Where a branch differs between batch values (vec.Divergent) the first value
    is tried alone (a layout that changes at batch 1 is the common case), then the rest is
    halved until each part takes one branch; a part of one value goes alone."""
    if vb is None or isinstance(sc0, Exception):
        return None
    if not variants.fast:
        why = "the batch sets other keys (e.g. a serving plan's max_num_seqs)"
        stats["fallback"][why] = stats["fallback"].get(why, 0) + 1
        return None
    segs = Segments()

    def run(lo: int, hi: int, peel: bool = False) -> None:
        if hi - lo < 2:                 # one value: the scalar call
            return
        try:
            segs.append((lo, hi, eng.evaluate_batch(with_batch(sc0, vb[lo:hi]), spec, cmask,
                                                    hi - lo)))
            stats["vector"] += 1
        except VectorFallback as exc:
            if exc.divergent:
                mid = lo + 1 if peel else (lo + hi) // 2
                run(lo, mid)
                run(mid, hi)
                return
            why = str(exc)
            stats["fallback"][why] = stats["fallback"].get(why, 0) + 1

    run(0, len(vb), peel=True)
    return segs or None


def _merged(job: _Job, point: dict, classes: list) -> list:
    """The GPU groups of `classes` for one grid point: one group (the scenario as the dict
    gives it) where every group's scenario is the same at this point (e.g. an axis sets the
    precision whose default follows the GPU)."""
    if len(classes) < 2:
        return classes
    try:
        ch = changes_for(job.given, job.base, point)
        plain = job.made(ch).to_dict()
        plain.pop("gpu", None)
        for rep, _, _ in classes:
            d = job.made({**ch, "gpu": rep}).to_dict()
            d.pop("gpu", None)
            if d != plain:
                return classes
    except ScenarioError:
        return classes
    return [(None, job.mask, np.arange(len(job.cols)))]


def max_batch(scenario, gpus=None, *, mask=None, limit=None, eng: Engine | None = None,
              spec=None, base_point=None) -> np.ndarray:
    """`estimate`'s max_batch_size on every GPU of the engine (0 where batch 1 does not fit;
    -1 outside `mask` / the GPUs asked for): an engine-wide array. `limit`: the bytes each GPU
    may use (default its usable memory; less for a headroom). Probes are shared by all GPUs:
    one probe gives every GPU's memory at that batch."""
    sc = _scenario(scenario)
    eng = eng or engine()
    if mask is None:
        mask = _gpu_mask(eng, sc, gpus) if gpus is not None or sc.gpu else \
            np.ones(eng.n, dtype=bool)
    classes = gpu_classes(scenario, eng, mask)
    if len(classes) > 1:            # a dict whose defaults follow the GPU: each group alone
        out = np.full(eng.n, -1, dtype=np.int64)
        for rep, cmask in classes:
            got = max_batch({**scenario, "gpu": rep}, mask=cmask, limit=limit, eng=eng)
            out[cmask] = got[cmask]
        return out
    spec = spec_of(sc) if spec is None else spec
    lim = eng.limit(sc) if limit is None else np.asarray(limit, dtype=np.int64)
    base = base_point or eng.evaluate(sc, spec, mask)
    variants = BatchVariants(sc, (1, MAX_BATCH_CAP))
    out = np.full(eng.n, -1, dtype=np.int64)
    # probes are evaluated for the GPUs that share the base point's footprint, and the GPUs'
    # searches (estimate's own largest_fitting) run in lockstep: each runs until it needs a
    # batch not probed yet (_Need), the batches needed go as one array call (vramplan.vec),
    # and the searches run again, replaying what they probed, until each has its answer
    for fp, idx in base.footprints:
        if isinstance(fp, Exception):
            continue
        gmask = np.zeros(eng.n, dtype=bool)
        gmask[idx] = True
        probes = _Probes(eng, variants, spec, gmask)
        todo = []
        for i in idx:
            i = int(i)
            if base.capacity[i] >= 0:   # an engine's pool: its concurrency, as estimate says
                out[i] = base.capacity[i] if base.used[i] <= lim[i] else 0
            else:
                todo.append(i)
        while todo:
            need: dict = {}
            for i in todo:
                try:
                    out[i] = largest_fitting(*probes.search(i, int(lim[i])), MAX_BATCH_CAP)
                except _Need as n:
                    need.setdefault(n.b, []).append(i)
            probes.probe(sorted(need))
            todo = sorted(i for ids in need.values() for i in ids)
    return out


class _Need(Exception):
    """A search needs the memory at batch `b`, not probed yet."""

    def __init__(self, b: int):
        super().__init__(b)
        self.b = b


class _Probes:
    """The memory of one GPU group at the batches probed so far: {batch: (used per GPU,
    errors) or None where the scenario refuses the batch}."""

    def __init__(self, eng, variants, spec, gmask):
        self.eng, self.variants, self.spec, self.gmask = eng, variants, spec, gmask
        self.got: dict = {}

    def probe(self, bs: list) -> None:
        """Evaluate the batches `bs`: as one array where the batch is a plain field and the
        workload takes the array, else one by one (and whatever the array call refused)."""
        todo = [b for b in bs if b not in self.got]
        if len(todo) > 1 and self.variants.fast and todo[0] >= self.variants.lo and \
                todo[-1] <= self.variants.hi:
            vb = np.asarray(todo, dtype=np.int64)
            try:
                bp = self.eng.evaluate_batch(with_batch(self.variants.sc, vb), self.spec,
                                             self.gmask, len(vb))
                for k, b in enumerate(todo):
                    self.got[b] = (bp.used[k], {})
                return
            except VectorFallback:
                pass
        for b in todo:
            v = self.variants.get(b)
            if isinstance(v, Exception):
                self.got[b] = None
            else:
                pt = self.eng.evaluate(v, self.spec, self.gmask)
                self.got[b] = (pt.used, pt.errors)

    def search(self, i: int, limit: int):
        """(fits, used_at, limit) for largest_fitting on GPU i; _Need where a batch is new."""
        def used_at(b):
            if b not in self.got:
                raise _Need(b)
            p = self.got[b]
            return None if p is None or i in p[1] else int(p[0][i])

        def fits(b):
            u = used_at(b)
            return u is not None and u <= limit
        return fits, used_at, limit

