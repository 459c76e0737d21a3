"""The sweep of a plan as CSV: every GPU of the database at batch sizes 1, 2, 4, ... (past
today's and past the largest max batch), with its memory, fit, headroom and max batch, from
`vramplan.sweep` (each figure equal to `estimate` for that point). The columns are those of
`vramplan sweep --vary batch_size=... --vary gpu=all --max-batch --format csv`."""
from __future__ import annotations

import csv
import io

from ..errors import VramplanError

COLUMNS = ["batch_size", "gpu", "peak_allocated_bytes", "peak_reserved_bytes",
           "device_used_bytes", "fits", "headroom_bytes", "max_batch_size", "error"]
MAX_BATCH = 1024


def batch_sizes(now: int | None, top: int = 64) -> list[int]:
    """1, 2, 4, ... up to max(top, today's batch) and today's batch exactly."""
    now = int(now or 1)
    hi = min(max(top, now), MAX_BATCH)
    vals, b = {now} if now <= MAX_BATCH else set(), 1
    while b <= hi:
        vals.add(b)
        b *= 2
    return sorted(vals)


def sweep_rows(scenario, batches: list[int] | None = None, gpus=None) -> list[dict]:
    """One row per (batch size, GPU); `gpus` default every GPU of the database. A plan with
    no batch (a model-free volume, a load) sweeps its GPUs alone."""
    from ..scenario import Scenario
    from ..sweep import sweep
    sc = scenario if isinstance(scenario, Scenario) else Scenario.from_dict(scenario)
    vary: dict = {"gpu": list(gpus) if gpus else "all"}
    batched = getattr(sc, "batch_size", None) is not None and sc.task != "load"
    if batched:
        vary["batch_size"] = batches or batch_sizes(sc.batch_size)
    r = sweep(sc, vary, with_max_batch=batched)
    if r.size and len(r.errors) == r.size:
        raise VramplanError(f"every point of the sweep was refused; the first: "
                            f"{next(iter(r.errors.values()))}")
    return list(r.rows())


def to_csv(rows: list[dict], columns: list[str] = COLUMNS) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow(["" if row.get(c) is None else row.get(c) for c in columns])
    return buf.getvalue()


def sweep_csv(scenario, batches: list[int] | None = None, gpus=None) -> str:
    return to_csv(sweep_rows(scenario, batches, gpus))
