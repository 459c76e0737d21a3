"""Sweeps: a scenario over grids (every GPU x batch x sequence / resolution x precision x
checkpointing x parallel degree ...), max batch per GPU, memory curves, and how many GPUs of
each kind a plan needs. Every figure equals `estimate`'s for the same point to the byte
(tests/test_sweep.py checks every point of its grids); `engine.py` says how it is shared.

The batch axis goes through each workload's own footprint as one int64 array per (grid point,
GPU group) (`vramplan.vec`; `rows.py`), so a grid of hundreds of batch values costs about one
footprint call per GPU group and other axis value. Evaluated one batch value at a time instead
(`SweepResult.fallbacks` names the reason, benchmarks/sweep_speed.py prints it): serving
plans (the batch sets max_num_seqs and sizes the KV pool), pipeline-parallel training (the
worst stage is chosen per plan), MoE inference (routed experts per token count), diffusion
training / LoRA and CogVideoX's 3-D VAE decode, and any plan whose footprint refuses the
array; where only a branch differs between batch values (e.g. a CNN's batch-1 layout), the
axis is split and the parts go as arrays.

    from vramplan.sweep import sweep, max_batch, curve, gpus_needed
    r = sweep({"model": "gpt2", "task": "train"}, {"batch_size": "1..64", "gpu": "all"})
    r.used            # (points, GPUs) int64 device-used bytes;  r.rows() for tables
"""
from __future__ import annotations

import itertools
import time

import numpy as np

from ..errors import ScenarioError, VramplanError
from ..scenario.rules import memory_limit
from .engine import Engine, Recorder, freeze, spec_of  # noqa: F401 (advisor imports spec_of)
from .grid import MAX_POINTS, gpu_classes, gpu_ids, parse_values, parse_vary
from .rows import _gpu_mask, _Job, _parallel, _rows, _scenario, _workers, engine, max_batch

__all__ = ["sweep", "SweepResult", "max_batch", "curve", "gpus_needed", "Engine", "Recorder",
           "freeze", "parse_vary", "parse_values", "gpu_ids", "engine", "LAYOUTS"]


def _maker(scenario):
    """(base Scenario, point changes -> Scenario). A dict is varied as written (the changes
    go into the dict, so a serving plan's batch still sets its max_num_seqs, as in a file);
    a Scenario as `Scenario.replace` does."""
    from ..scenario import Scenario
    if isinstance(scenario, Scenario):
        return scenario, lambda ch: scenario.replace(**ch) if ch else scenario
    base = Scenario.from_dict(scenario)
    return base, lambda ch: Scenario.from_dict({**scenario, **ch}) if ch else base


class SweepResult:
    """Points x GPUs arrays (`allocated`, `reserved`, `used`, `fits`, `max_batch`) with the
    axis values of each point (`points`: one dict per row) and the GPU ids (columns).
    `vector_groups`: (grid point, GPU group) pairs whose batch axis one footprint call gave;
    `fallbacks`: {reason: pairs} evaluated one batch value at a time instead."""

    vector_groups: int = 0
    fallbacks: dict = {}

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
    given = scenario if isinstance(scenario, dict) else base.given_dict()   # what was given
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
    vector, fallbacks = 0, {}
    for p in parts:
        errors.update({(r + off, c): m for (r, c), m in p[6].items()})
        off += len(p[5])
        points += p[5]
        calls += p[7]
        vector += p[8]["vector"]
        for why, k in p[8]["fallback"].items():
            fallbacks[why] = fallbacks.get(why, 0) + k
    arrays = (alloc, res, used, fits, eng.limit(base)[cols], mb)   # headroom: to the limit
    out = SweepResult({**axes, **({"batch_size": batch} if batch else {})}, points,
                      [eng.devices[i].id for i in cols], arrays, errors,
                      time.perf_counter() - t0, calls)
    out.vector_groups, out.fallbacks = vector, fallbacks
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
                counts=COUNTS, headroom=None, eng: Engine | None = None) -> list[dict]:
    """For each GPU kind: the fewest GPUs (of `counts`) with which the plan fits within the
    one memory limit (usable less the scenario's safety_margin; `headroom`, when given, in
    its place: a share or bytes, as safety_margin), and the layout that does it (one GPU:
    the scenario's own layout)."""
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
    margin = base.safety_margin if headroom is None else headroom
    limit = np.asarray(memory_limit(margin, eng.usable), dtype=np.int64)
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
            ok = todo & pt.holds(limit)
            for i in np.flatnonzero(ok):
                best[int(i)] = {"gpu": eng.devices[i].id, "gpus": n, "layout": name,
                                "parallel": sc.parallel.to_dict(),
                                "device_used_bytes": int(pt.used[i]),
                                "usable_bytes": int(eng.usable[i])}
            todo &= ~ok
    return [best.get(int(i), {"gpu": eng.devices[i].id, "gpus": None, "layout": None})
            for i in np.flatnonzero(mask)]
