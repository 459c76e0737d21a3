"""Every GPU of the database on one plan, and the GPUs a step up from the chosen one: the
figures the page's comparison and memory-curve charts draw, computed here (advice stage) from
the sweep, so the page only renders them.

- `gpu_rows(sc, db, batched, filters, bandwidth)`: one row per GPU that passes the filters:
  usable bytes, fits, headroom, max batch, where the plan does not fit the fewest GPUs of that
  kind that hold it (`sweep.gpus_needed`), and its shortest step (or image) on that GPU;
- `larger_gpus(db, device)`: the next sizes up, each at least 1.4x the last.
"""
from __future__ import annotations

from ..errors import VramplanError


def larger_gpus(db, device, n: int = 2, step: float = 1.4) -> list:
    """GPUs to draw beside the chosen one: the next sizes up, each at least `step` times the
    last (an RTX 4090 -> A100 40GB, H100 80GB), of the same vendor where it has one."""
    out, floor = [], device.usable_bytes * step
    for _i in range(n):
        bigger = [d for d in db.devices if d.usable_bytes >= floor]
        same = [d for d in bigger if d.vendor == device.vendor]
        bigger = same or bigger
        if not bigger:
            break
        size = min(d.usable_bytes for d in bigger)
        pick = min((d for d in bigger if d.usable_bytes == size),
                   key=lambda d: (d.vendor != device.vendor, -(d.year or 0), d.name))
        out.append(pick)
        floor = pick.usable_bytes * step
    return out


def step_time(bandwidth: dict | None, dev) -> tuple[float | None, str]:
    """(seconds, 'step' or 'image'): the plan's shortest step on `dev` from its bytes and FLOPs
    per step (`estimate.bandwidth_on`: achievable bandwidth and dense rate, the larger floor);
    per image where the plan makes images (diffusion: bytes_per_image / bytes_per_step of the
    step's time). (None, 'step') without bytes per step."""
    from ..estimate import bandwidth_on
    bw = dict(bandwidth or {})
    if not bw.get("bytes_per_step"):
        return None, "step"
    t = bandwidth_on(bw, dev)[0].get("min_step_time_s")
    if t is not None and bw.get("bytes_per_image"):
        return t * bw["bytes_per_image"] / bw["bytes_per_step"], "image"
    return t, "step"


def gpu_rows(sc, db, batched: bool, filters: dict | None = None,
             bandwidth: dict | None = None) -> list[dict]:
    """One row per GPU of the database for this plan, from the sweep (the same figures as
    `estimate` on each GPU) and, where it does not fit, how many GPUs it needs. `filters`:
    `HardwareDB.filter` keywords (vendor, min_memory, min_bandwidth: the GPU picker's) that
    choose the GPUs; `bandwidth`: the plan's estimate's bandwidth section, to price its step on
    each GPU (`step_time`: step_s and per 'step' / 'image')."""
    from ..sweep import gpus_needed, sweep
    devices = db.filter(**{k: v for k, v in (filters or {}).items() if v}) if filters else \
        list(db.devices)
    ids = [d.id for d in devices]
    if not ids:
        return []
    r = sweep(sc, {"gpu": ids}, with_max_batch=batched)
    rows = {p["gpu"]: p for p in r.rows() if "error" not in p}
    short = [g for g, p in rows.items() if not p["fits"]]
    need = {}
    if short:
        try:
            need = {x["gpu"]: x["gpus"] for x in gpus_needed(sc, gpus=short)}
        except VramplanError:
            need = {}
    out = []
    for d in devices:
        p = rows.get(d.id)
        if p is None:
            continue
        t, per = step_time(bandwidth, d)
        out.append({"id": d.id, "name": d.name, "vendor": d.vendor,
                    "usable_bytes": d.usable_bytes, "fits": p["fits"],
                    "headroom_bytes": p["headroom_bytes"],
                    "max_batch_size": p.get("max_batch_size"),
                    "gpus_needed": need.get(d.id), "step_s": t, "per": per})
    return out
