"""Sweeps: a scenario over grids (every GPU x batch x sequence / resolution x precision x
checkpointing x parallel degree ...), max batch per GPU, memory curves, and how many GPUs of
each kind a plan needs. Every figure equals `estimate`'s for the same point to the byte
(tests/test_sweep.py checks every point of its grids); `engine.py` says how it is shared.

    from vramplan.sweep import sweep, max_batch, curve, gpus_needed
    r = sweep({"model": "gpt2", "task": "train"}, {"batch_size": "1..64", "gpu": "all"})
    r.used            # (points, GPUs) int64 device-used bytes;  r.rows() for tables
"""
from __future__ import annotations

import itertools
import time

import numpy as np

from ..errors import ScenarioError, VramplanError
from ..estimate import MAX_BATCH_CAP, largest_fitting
from .engine import Engine, Recorder, freeze, spec_of
from .grid import (MAX_POINTS, BatchVariants, changes_for, gpu_classes, gpu_ids,
                   parse_values, parse_vary)

__all__ = ["sweep", "SweepResult", "max_batch", "curve", "gpus_needed", "Engine", "Recorder",
           "freeze", "parse_vary", "parse_values", "gpu_ids", "engine", "LAYOUTS"]

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


def _maker(scenario):
    """(base Scenario, point changes -> Scenario). A dict is varied as written (the changes
    go into the dict, so a serving plan's batch still sets its max_num_seqs, as in a file);
    a Scenario as `Scenario.replace` does."""
    from ..scenario import Scenario
    if isinstance(scenario, Scenario):
        return scenario, lambda ch: scenario.replace(**ch) if ch else scenario
    base = Scenario.from_dict(scenario)
    return base, lambda ch: Scenario.from_dict({**scenario, **ch}) if ch else base


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


class SweepResult:
    """Points x GPUs arrays (`allocated`, `reserved`, `used`, `fits`, `max_batch`) with the
    axis values of each point (`points`: one dict per row) and the GPU ids (columns)."""

    def __init__(self, axes, points, gpus, arrays, errors, seconds, footprints):
        self.axes, self.points, self.gpus = axes, points, gpus
        self.allocated, self.reserved, self.used, self.fits, self.usable, self.max_batch = \
            arrays
        self.errors = errors            # {(row, col): message}
        self.seconds = seconds
        self.footprint_calls = footprints

    @property
    def size(self) -> int:
        return len(self.points) * len(self.gpus)

    def rows(self):
        """One dict per (point, GPU), in point order then GPU order."""
        for r, pt in enumerate(self.points):
            for c, g in enumerate(self.gpus):
                row = {**pt, "gpu": g}
                if (r, c) in self.errors:
                    row["error"] = self.errors[(r, c)]
                    yield row
                    continue
                row.update(peak_allocated_bytes=int(self.allocated[r, c]),
                           peak_reserved_bytes=int(self.reserved[r, c]),
                           device_used_bytes=int(self.used[r, c]), fits=bool(self.fits[r, c]),
                           headroom_bytes=int(self.usable[c] - self.used[r, c]))
                if self.max_batch is not None:
                    row["max_batch_size"] = int(self.max_batch[r, c])
                yield row

    def to_dict(self) -> dict:
        return {"axes": {k: list(v) for k, v in self.axes.items()}, "gpus": list(self.gpus),
                "points": list(self.rows()), "points_evaluated": self.size,
                "seconds": round(self.seconds, 6)}


def sweep(scenario, vary: dict, *, gpus=None, with_max_batch: bool = False,
          eng: Engine | None = None, workers: int | None = None) -> SweepResult:
    """`scenario` (a Scenario or dict) at every point of the grid `vary` ({key: values or
    the text of `--vary`}; `gpu` among them: the GPUs, else the scenario's or `gpus`).

    `workers`: processes that share a large grid (forked, each with the caches of this one;
    the rows are independent). None: as many as the CPUs allow (at most 8) for a grid of
    PARALLEL_ROWS rows or more when called from a single-threaded program, else 1."""
    t0 = time.perf_counter()
    base, make = _maker(scenario)
    given = scenario if isinstance(scenario, dict) else base.to_dict()
    eng = eng or engine()
    axes = {k: (parse_values(k, v, base) if isinstance(v, str) else list(v))
            for k, v in (vary or {}).items()}
    ids = axes.pop("gpu", None) or gpus
    mask = _gpu_mask(eng, base, ids)
    cols = np.flatnonzero(mask)
    batch = axes.pop("batch_size", None)
    keys = list(axes)
    combos = list(itertools.product(*(axes[k] for k in keys)))
    n_points = len(combos) * len(batch or [None])
    if n_points * len(cols) > MAX_POINTS:
        raise VramplanError(f"the grid has {n_points * len(cols):,} points; at most "
                            f"{MAX_POINTS:,} (narrow an axis)")
    job = _Job(make, given, base, keys, batch, mask, cols, with_max_batch, eng,
               gpu_classes(scenario, eng, mask))
    n = _workers(workers, n_points, len(combos))
    parts = _parallel(job, combos, n) if n > 1 else [_rows(job, combos)]
    alloc, res, used, fits = (np.concatenate([p[i] for p in parts]) for i in range(4))
    mb = np.concatenate([p[4] for p in parts]) if with_max_batch else None
    points, errors, calls, off = [], {}, 0, 0
    for p in parts:
        errors.update({(r + off, c): m for (r, c), m in p[6].items()})
        off += len(p[5])
        points += p[5]
        calls += p[7]
    arrays = (alloc, res, used, fits, eng.usable[cols], mb)
    return SweepResult({**axes, **({"batch_size": batch} if batch else {})}, points,
                       [eng.devices[i].id for i in cols], arrays, errors,
                       time.perf_counter() - t0, calls)


PARALLEL_ROWS = 2000          # below this a grid takes well under a second on one CPU
MAX_WORKERS = 8


class _Job:
    def __init__(self, make, given, base, keys, batch, mask, cols, with_max_batch, eng,
                 classes):
        self.make, self.given, self.base, self.keys, self.batch = make, given, base, keys, batch
        self.mask, self.cols, self.with_max_batch, self.eng = mask, cols, with_max_batch, eng
        self.classes = classes          # [(GPU id or None, mask)]: gpu_classes


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
    points: list[dict] = []
    errors: dict = {}
    calls0 = eng.footprint_calls
    specs: dict = {}
    classes = [(rep, cmask, np.flatnonzero(cmask[cols])) for rep, cmask in job.classes]
    for combo in combos:
        point = dict(zip(job.keys, combo))
        per_class = []
        for rep, cmask, pos in _merged(job, point, classes):
            try:
                ch0 = changes_for(job.given, job.base, point)
                if rep is not None:
                    ch0["gpu"] = rep
                sc0 = job.make(ch0)
            except ScenarioError as exc:
                per_class.append((exc, None, None, cmask, pos, [None]))
                continue
            key = (sc0.model, freeze(sc0.architecture))
            spec = specs[key] if key in specs else specs.setdefault(key, spec_of(sc0))
            variants = BatchVariants(sc0, batch or (),
                                     make=lambda b, ch0=ch0: job.make({**ch0, "batch_size": b}))
            per_class.append((sc0, spec, variants, cmask, pos, [None]))
        for b in (batch or [None]):
            r = len(points)
            points.append({**point, "batch_size": b} if b is not None else dict(point))
            for sc0, spec, variants, cmask, pos, combo_mb in per_class:
                sc = sc0 if (b is None or isinstance(sc0, Exception)) else variants.get(b)
                if isinstance(sc, Exception):
                    for c in pos:
                        errors[(r, int(c))] = str(sc)
                    continue
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
    return alloc, res, used, fits, mb, points, errors, eng.footprint_calls - calls0


def _merged(job: _Job, point: dict, classes: list) -> list:
    """The GPU groups of `classes` for one grid point: one group (the scenario as the dict
    gives it) where every group's scenario is the same at this point (e.g. an axis sets the
    precision whose default follows the GPU)."""
    if len(classes) < 2:
        return classes
    try:
        ch = changes_for(job.given, job.base, point)
        plain = job.make(ch).to_dict()
        plain.pop("gpu", None)
        for rep, _, _ in classes:
            d = job.make({**ch, "gpu": rep}).to_dict()
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
    lim = eng.usable if limit is None else np.asarray(limit, dtype=np.int64)
    base = base_point or eng.evaluate(sc, spec, mask)
    variants = BatchVariants(sc, (1, MAX_BATCH_CAP))
    memo: dict = {}
    out = np.full(eng.n, -1, dtype=np.int64)
    # probes are evaluated for the GPUs that share the base point's footprint: one footprint
    # per probe, and every GPU of the group reads its memory off the same probe
    for g, (fp, idx) in enumerate(base.footprints):
        if isinstance(fp, Exception):
            continue
        gmask = np.zeros(eng.n, dtype=bool)
        gmask[idx] = True

        def at(b: int, g=g, gmask=gmask):
            if (g, b) not in memo:
                v = variants.get(b)
                memo[(g, b)] = None if isinstance(v, Exception) else \
                    eng.evaluate(v, spec, gmask)
            return memo[(g, b)]

        for i in idx:
            i = int(i)
            if base.capacity[i] >= 0:   # an engine's pool: its concurrency, as estimate says
                out[i] = base.capacity[i] if base.used[i] <= lim[i] else 0
                continue

            def used_at(b, i=i, at=at):
                p = at(b)
                return None if p is None or i in p.errors else int(p.used[i])

            def fits(b, i=i, used_at=used_at):
                u = used_at(b)
                return u is not None and u <= lim[i]

            out[i] = largest_fitting(fits, used_at, int(lim[i]), MAX_BATCH_CAP)
    return out


def curve(scenario, key: str, values, gpu: str | None = None) -> list[tuple]:
    """Memory along one key on one GPU: [(value, device_used_bytes or None if refused)]."""
    r = sweep(scenario, {key: values}, gpus=[gpu] if gpu else None)
    return [(p[key], None if (i, 0) in r.errors else int(r.used[i, 0]))
            for i, p in enumerate(r.points)]


# layouts for `gpus_needed`: N GPUs -> the parallel object (None where N does not apply)
LAYOUTS = {
    "fsdp": lambda n: {"gpus": n, "data": n, "zero": 3},
    "zero1": lambda n: {"gpus": n, "data": n, "zero": 1},
    "tensor": lambda n: {"gpus": n, "tensor": n} if n <= 8 else None,
    "tensor8+fsdp": lambda n: {"gpus": n, "tensor": 8, "data": n // 8, "zero": 3}
    if n > 8 and n % 8 == 0 else None,
}
COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def gpus_needed(scenario, gpus=None, *, layouts=("fsdp", "tensor", "tensor8+fsdp"),
                counts=COUNTS, headroom: float = 0.0, eng: Engine | None = None) -> list[dict]:
    """For each GPU kind: the fewest GPUs (of `counts`) with which the plan fits, leaving
    `headroom` (a share of usable memory) free, and the layout that does it (one GPU: the
    scenario's own layout)."""
    base = _scenario(scenario)
    eng = eng or engine()
    ids = gpus if gpus is not None else [d.id for d in eng.devices]
    mask = _gpu_mask(eng, base, ids)
    classes = gpu_classes(scenario, eng, mask)
    if len(classes) > 1:            # a dict whose defaults follow the GPU: each group alone
        rows = {}
        for rep, cmask in classes:
            sub = [eng.devices[i].id for i in np.flatnonzero(cmask)]
            for r in gpus_needed({**scenario, "gpu": rep}, sub, layouts=layouts, counts=counts,
                                 headroom=headroom, eng=eng):
                rows[r["gpu"]] = r
        return [rows[eng.devices[i].id] for i in np.flatnonzero(mask)]
    limit = (eng.usable * (1.0 - headroom)).astype(np.int64)
    best: dict[int, dict] = {}
    todo = mask.copy()
    for n in counts:
        if not todo.any():
            break
        cands = [("as given", None)] if n == 1 else \
            [(name, LAYOUTS[name](n)) for name in layouts if LAYOUTS[name](n)]
        for name, par in cands:
            try:
                sc = base if par is None else base.replace(parallel=par)
            except ScenarioError:
                continue
            pt = eng.evaluate(sc, None, todo)
            ok = todo & pt.ok & (pt.used <= limit)
            if pt.capacity.max() >= 0:
                ok &= pt.capacity != 0
            for i in np.flatnonzero(ok):
                best[int(i)] = {"gpu": eng.devices[i].id, "gpus": n, "layout": name,
                                "parallel": sc.parallel.to_dict(),
                                "device_used_bytes": int(pt.used[i]),
                                "usable_bytes": int(eng.usable[i])}
            todo &= ~ok
    return [best.get(int(i), {"gpu": eng.devices[i].id, "gpus": None, "layout": None})
            for i in np.flatnonzero(mask)]
