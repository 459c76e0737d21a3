"""Beyond one GPU and one plan: which GPUs of the database hold the plan unchanged or with one
change (the sweep engine: one footprint per distinct device answer, numpy over the GPUs), and
how far a plan that fits can grow (batch, sequence, resolution, concurrency) and still leave
the headroom."""
from __future__ import annotations

import numpy as np

from ..errors import ScenarioError
from ..estimate import MAX_BATCH_CAP, estimate, largest_fitting
from .costs import arch_of


def _needs(rec) -> tuple[str, ...]:
    """Capabilities a recommendation's change asks of a GPU (bf16, fp8, FlashAttention-2)."""
    ch = rec.changes
    vals = [ch.get("precision")] + list((ch.get("precision") or {}).values()
                                         if isinstance(ch.get("precision"), dict) else [])
    need = []
    if any(isinstance(v, str) and v.startswith("bf16") for v in vals):
        need.append("bf16")
    if any(v == "fp8" for v in vals) or "float8-linears" in (ch.get("options") or ()):
        need.append("fp8")
    if ch.get("attention") == "flash":
        need.append("flash_attention_2")
    return tuple(need)


def _ok_on(traits, need) -> bool:
    f = getattr(traits, "supports", None)
    return all((f(c) if callable(f) else None) is not False for c in need)


def gpu_table(ctx, recs, limit_of) -> list[dict]:
    """Every GPU of the database: does the plan fit unchanged (with the headroom), else the
    cheapest single recommendation that makes it fit there (None if none does).
    `limit_of(usable_bytes array) -> the bytes each GPU may use`."""
    from ..sweep import engine
    eng = engine()
    limit = np.asarray(limit_of(eng.usable), dtype=np.int64)
    base = eng.evaluate(ctx.sc, ctx.spec)
    fit0 = base.holds(limit)          # the one rule, as sweep.gpus_needed reads it
    best: dict[int, tuple] = {}
    for r in sorted(recs, key=lambda r: r.cost.score):
        try:
            pt = eng.evaluate(r.scenario, ctx.spec, ~fit0)
        except ScenarioError:
            continue
        need = _needs(r)
        moves = "offload" in r.changes      # to CPU memory: on unified memory, the same bytes
        for i in np.flatnonzero(pt.holds(limit) & ~fit0):
            i = int(i)
            if moves and getattr(eng.devices[i], "unified_memory", False):
                continue
            if i not in best and _ok_on(eng.traits[i], need):
                best[i] = (r, int(pt.used[i]))
    rows = []
    for i, dev in enumerate(eng.devices):
        row = {"gpu": dev.id, "usable_bytes": int(eng.usable[i]),
               "device_used_bytes": None if i in base.errors else int(base.used[i]),
               "fits": bool(fit0[i]), "with_one_change": None}
        if i in base.errors:
            row["error"] = base.errors[i]
        if i in best:
            r, used = best[i]
            row["with_one_change"] = {"id": r.id, "title": r.title, "device_used_bytes": used,
                                      "score": round(r.cost.score, 4)}
        rows.append(row)
    rows.sort(key=lambda r: (not r["fits"], r["with_one_change"] is None, r["usable_bytes"]))
    return rows


def _search(make, limit: int, dev, cap: int) -> int:
    """Largest j in [1, cap] whose plan make(j) fits under `limit` (0 if j = 1 does not)."""
    used: dict = {}

    def used_at(j):
        if j not in used:
            try:
                e = estimate(make(j), dev, with_max_batch=False)
                used[j] = e.device_used_bytes if (e.footprint.batch_capacity is None or
                                                  (e.max_batch_size or 0) >= 1) else None
            except ScenarioError:
                used[j] = None
        return used[j]

    def fits(j):
        u = used_at(j)
        return u is not None and u <= limit

    return largest_fitting(fits, used_at, limit, cap)


def growth(ctx, limit: int, what=("batch_size", "seq_len", "resolution")) -> dict:
    """How far a plan can grow on its GPU and leave the headroom: the largest batch, sequence
    (transformers), resolution (images, volumes, frames: scaled in steps of 1/8 keeping the
    aspect) and, for a serving engine, the concurrency its pool holds."""
    sc, dev = ctx.sc, ctx.dev
    out: dict = {}
    if ctx.est.footprint.batch_capacity is not None:
        if sc.task == "serve":
            out["concurrency"] = int(ctx.est.max_batch_size or 0)
    elif "batch_size" in what and ctx.offers("batch_size"):
        b = _search(lambda j: sc.replace(batch_size=j), limit, dev, MAX_BATCH_CAP)
        out["batch_size"] = None if b >= MAX_BATCH_CAP else b
    a = arch_of(ctx.spec)
    if "seq_len" in what and a is not None and sc.seq_len and sc.task != "serve":
        cap = a.max_positions if a.learned_positions else 1 << 20
        cap -= int(sc.new_tokens or 0)
        s = _search(lambda j: sc.replace(seq_len=j), limit, dev, max(1, cap))
        out["seq_len"] = s
    if "resolution" in what and sc.resolution and ctx.offers("resolution"):
        res = list(sc.resolution)
        step = {"diffusion": 64, None: 8}.get(ctx.family, 32)

        def at(j):
            return sc.replace(resolution=[max(step, r * j // 8 // step * step) for r in res])

        j = _search(at, limit, dev, 64)
        out["resolution"] = [max(step, r * j // 8 // step * step) for r in res] if j else None
    return out
