"""The fit solver: for a plan that does not fit, the cheapest combinations of changes that fit
with a stated headroom; a small Pareto set of alternatives over compute overhead,
communication time, GPUs and accuracy risk; the fewest GPUs of the plan's kind. Every plan is
re-estimated (`estimate`) and kept only if that estimate fits with the headroom.

Search (one GPU): a beam search over the best recommendations (one per slot), every step
estimated, additions ordered by the memory they are predicted to leave over the limit plus
their cost; each plan found is pruned of the changes it does not need. A second search keeps
to changes without accuracy risk. More GPUs: for 2, 4, 8, ... GPUs of the same kind, the
sharded layouts (ZeRO-3 / FSDP, tensor, tensor x pipeline), alone and then with changes that
cost no accuracy, until more GPUs stop lowering the memory per GPU. The result is the Pareto
set plus the cheapest plan of each kind it lacks (`choose`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import ScenarioError
from ..estimate import estimate
from ..parallel import bubble_share
from . import costs as C
from .levers import BY_ID, Lever
from .makers import serving_change
from .recommend import Recommendation, how_for, layout_comm, one_gpu_sizes
from .split import split_counts, splits

MAX_COMBO = 4
TOP = 12
MAX_TRIES = 80
COUNTS = (2, 4, 8, 16, 32, 64, 128, 256, 512)
SCALE_OUT = Lever("scale-out", ("zero", "layout"), "zero", lambda ctx: None, "scale-out")


@dataclass
class Plan:
    changes: list                 # [{"id", "title"}] in the order applied
    scenario: object
    estimate: object
    cost: C.Cost

    @property
    def gpus(self) -> int:
        return int(self.scenario.parallel.gpus)

    def key(self) -> tuple:
        """GPU-seconds per step weighted by accuracy risk and a change to the job
        (costs.toml [ranking]); plans without a step time rank by their score after."""
        c, rk = self.cost, C.table()["ranking"]
        gs = c.gpu_seconds
        w = 1 + rk["risk_weight"][c.accuracy_risk] + (rk["job_change_weight"] if
                                                       c.changes_job else 0.0)
        first = (0, round(gs * w, 9)) if gs else (1, round(c.score, 6))
        return first + (self.gpus, len(self.changes))

    def to_dict(self, full: bool = True) -> dict:
        out = {"changes": self.changes, "gpus": self.gpus, "gpu": self.estimate.gpu.id,
               "cost": self.cost.to_dict(), "source": list(self.cost.sources),
               "device_used_bytes": int(self.estimate.device_used_bytes),
               "headroom_bytes": int(self.estimate.headroom_bytes)}
        if full:
            out["scenario"] = self.scenario.to_dict()
            out["estimate"] = self.estimate.to_dict()
        return out


def fits_with(est, limit: int) -> bool:
    """The plan fits leaving the headroom (a serving pool must hold one full request)."""
    if est.device_used_bytes > limit:
        return False
    return est.footprint.batch_capacity is None or (est.max_batch_size or 0) >= 1


def merge(sc, recs) -> dict:
    """The changes of several recommendations as one `Scenario.replace` dict: lists
    (options, offload) united, objects (parallel, serving, precision) merged field by field
    where a recommendation changed them."""
    base = sc.to_dict()
    given = sc.given_dict()
    out: dict = {}
    for r in recs:
        for k, v in r.changes.items():
            if k in ("options", "offload"):
                out[k] = sorted(set(out.get(k, base.get(k, []))) | set(v))
            elif isinstance(v, dict):
                cur = (given if k == "serving" else base).get(k)   # serving: re-derived
                cur = cur if isinstance(cur, dict) else ({"default": cur} if cur else {})
                diff = {kk: vv for kk, vv in v.items() if cur.get(kk) != vv}
                old = out.get(k, dict(cur))
                old = {"default": old} if isinstance(old, str) else old
                out[k] = {**old, **diff}
            else:
                out[k] = v
    if "parallel" in out:
        out["parallel"].pop("gpus", None)
    return out


def _compatible(recs) -> bool:
    slots = [s for r in recs for s in r.lever.slots]
    return len(slots) == len(set(slots))


def _plan(ctx, recs, sc2, est2) -> Plan:
    cost = C.Cost(gpus=sc2.parallel.gpus)
    for r in recs:
        cost = cost + r.cost
    step = C.step_time(est2, ctx.spec) or cost.step_time_s
    cost = replace(cost, step_time_s=step, gpus=sc2.parallel.gpus)
    if sc2.parallel.multi_gpu:       # the plan's own collectives, once (not each change's)
        host = tuple(t for t in cost.transfers if t.get("dimension") == "host")
        lc = layout_comm(ctx, sc2, step)
        if lc["transfers"]:          # (a family split prices its own hand-offs: split.py)
            cost = replace(cost, **{**lc, "transfers": lc["transfers"] + host})
    return Plan([{"id": r.id, "title": r.title} for r in recs], sc2, est2, cost)


def _try(ctx, recs, limit):
    """(scenario, estimate) of the recommendations together if that fits, else None. A
    serving pool that fits in memory but holds no full-length request gets the longest
    max_model_len (a power of two) its pool holds, as a further change appended to `recs`."""
    try:
        sc2 = ctx.sc.replace(**merge(ctx.sc, recs))
        est2 = estimate(sc2, ctx.dev, with_max_batch=False)
    except ScenarioError:
        return None
    if fits_with(est2, limit):
        return sc2, est2
    if isinstance(recs, list) and sc2.task == "serve" and est2.device_used_bytes <= limit and \
            not any(r.id == "max-model-len" for r in recs) and _job_changes_ok(ctx):
        fix = _pool_len(ctx, sc2, est2, limit)
        if fix is not None:
            recs.append(fix)
            return fix.scenario, fix.estimate
    return None


def _job_changes_ok(ctx) -> bool:
    """Whether plans may change the job (a shorter max_model_len is one)."""
    return bool(getattr(ctx, "allow_job_changes", True))


def _pool_len(ctx, sc2, est2, limit):
    tokens = int(est2.bandwidth.get("kv_pool_tokens") or 0)
    if tokens < 256:
        return None
    mml = 1 << (tokens.bit_length() - 1)
    sv = sc2.serving.to_dict()
    ch = serving_change(sc2, "max_model_len", mml)
    try:
        sc3 = sc2.replace(**ch)
        est3 = estimate(sc3, ctx.dev, with_max_batch=False)
    except ScenarioError:
        return None
    if not fits_with(est3, limit):
        return None
    lever = BY_ID["max-model-len"]
    return Recommendation(lever.id, f"max_model_len {sv['max_model_len']:,} -> {mml:,} (what the "
                          "KV pool holds)", {"serving": {"max_model_len": mml}, "seq_len":
                                              sc3.seq_len}, sc3, est3,
                          int(est2.device_used_bytes - est3.device_used_bytes),
                          C.of("job-change", gpus=sc3.parallel.gpus), how_for(lever), {}, 0,
                          lever)


def _prune(ctx, recs, found, limit, keep: int = 0):
    """Drop changes the plan does not need (most expensive first; the first `keep` stay)."""
    recs = list(recs)
    for r in sorted(recs[keep:], key=lambda r: -r.cost.score):
        if len(recs) <= max(1, keep):
            break
        rest = [x for x in recs if x is not r]
        got = _try(ctx, rest, limit)
        if got is not None:
            recs, found = rest, got
    return recs, found


def predict(ctx, base: dict, combo) -> float:
    """Device used of `combo` applied to a plan whose components are `base`: each change
    scales each component as it did alone on the one-GPU plan (a component it creates is
    added). Only orders the search; every plan is re-estimated."""
    b0 = ctx.est.components
    total = 0.0
    for k in set(base).union(*(r.estimate.components for r in combo)):
        v, add = float(base.get(k, 0)), 0.0
        for r in combo:
            before, after = b0.get(k, 0), r.estimate.components.get(k, 0)
            if before:
                v *= after / before
            else:
                add += after
        total += v + add
    return total


def search(ctx, prefix: list, base_est, pool: list, limit: int, want: int,
           budget: int = MAX_TRIES, width: int = 4, expand: int = 6) -> list[Plan]:
    """A beam search over combinations of `pool` (after the fixed `prefix`), every step
    estimated: each state tries its `expand` most promising additions (predicted memory over
    the limit plus the addition's cost), the `width` states nearest to fitting for their cost
    go on; a combination that fits is pruned of what it does not need and kept."""
    states = [(list(prefix), base_est)]
    plans, seen, tried = [], set(), set()
    for _ in range(MAX_COMBO + 1):
        nxt = []
        for recs, est in states:
            opts = [r for r in pool if r not in recs and _compatible(recs + [r])]
            opts.sort(key=lambda r: max(0.0, predict(ctx, est.components, [r]) - limit) /
                      limit + r.cost.score)
            for r in opts[:expand]:
                if budget <= 0:
                    break
                ids = frozenset(x.id for x in recs[len(prefix):] + [r])
                if ids in tried or any(s <= ids for s in seen):
                    continue
                tried.add(ids)
                budget -= 1
                got = _try_any(ctx, recs + [r])
                if got is None:
                    continue
                trial, (sc2, est2) = got
                if fits_with(est2, limit):
                    kept, fit = _prune(ctx, trial, (sc2, est2), limit, keep=len(prefix))
                    key = frozenset(x.id for x in kept[len(prefix):])
                    seen.add(ids)
                    if key not in seen or key == ids:
                        seen.add(key)
                        plans.append(_plan(ctx, kept, *fit))
                else:
                    nxt.append((trial, est2))
        if len(plans) >= want or budget <= 0 or not nxt:
            break
        nxt.sort(key=lambda st: max(0, st[1].device_used_bytes - limit) / limit +
                 sum(r.cost.score for r in st[0]))
        states = nxt[:width]
    return plans[:want]


def _try_any(ctx, recs):
    """(recs, (scenario, estimate)) of the recommendations together, fitting or not (a
    serving pool repaired as `_try` does); None if the validator refuses them."""
    try:
        sc2 = ctx.sc.replace(**merge(ctx.sc, recs))
        est2 = estimate(sc2, ctx.dev, with_max_batch=False)
    except ScenarioError:
        return None
    if sc2.task == "serve" and est2.footprint.batch_capacity is not None and \
            not (est2.max_batch_size or 0) and not any(r.id == "max-model-len" for r in recs) \
            and _job_changes_ok(ctx):
        fix = _pool_len(ctx, sc2, est2, est2.device_used_bytes)
        if fix is not None:
            return recs + [fix], (fix.scenario, fix.estimate)
    return recs, (sc2, est2)


def one_gpu(ctx, recs: list[Recommendation], limit: int, want: int = 6) -> list[Plan]:
    """Cheapest combinations of recommendations on the plan's own GPUs that fit."""
    same = [r for r in recs if r.cost.gpus <= ctx.sc.parallel.gpus]
    big = sorted(same, key=lambda r: -r.benefit_bytes)
    pool = list({id(r): r for r in same[:TOP - 4] + big[:4] + same[TOP - 4:]}.values())[:TOP]
    plans = search(ctx, [], ctx.est, pool, limit, want)
    safe = [r for r in same if r.cost.accuracy_risk == "none" and not r.cost.changes_job]
    if safe and len(safe) < len(same):      # the alternatives that cost no accuracy
        plans += search(ctx, [], ctx.est, safe[:TOP], limit, 2, budget=MAX_TRIES // 2)
    return plans


# ---- more GPUs ---------------------------------------------------------------------------------

def layouts(ctx, n: int) -> list[tuple[str, dict]]:
    """The sharded layouts of n GPUs worth trying for this plan."""
    out = []
    a = C.arch_of(ctx.spec)
    tp_ok = a is not None and ctx.task != "load"
    # data parallelism multiplies the global batch: for transformer training the cluster
    # solver (scale.py) chooses layouts that keep it; here only the other families'
    solved = ctx.training and a is not None and bool(ctx.sc.model)
    if ctx.training and not solved:
        out.append((f"{n} x GPU, ZeRO-3 / FSDP full shard", {"data": n, "zero": 3}))
    if tp_ok:
        for t in (8, 4, 2):
            if t <= n and n % t == 0 and a.heads % t == 0 and \
                    (a.kv_heads % t == 0 or t % a.kv_heads == 0):
                rest = n // t
                if ctx.training and solved and rest > 1:
                    break
                if ctx.training:
                    lay = {"tensor": t, "data": rest, "zero": 3 if rest > 1 else 0}
                    out.append((f"{n} x GPU, tensor {t}" + (f" x ZeRO-3 {rest}" if rest > 1
                                                              else ""), lay))
                elif rest == 1 or rest <= a.total_layers:
                    lay = {"tensor": t, "pipeline": rest}
                    out.append((f"{n} x GPU, tensor {t}" + (f" x pipeline {rest}" if rest > 1
                                                              else ""), lay))
                break
    return out


def _cheap(recs) -> list:
    """Changes that cost no accuracy and do not change the job (free ones, recomputation,
    accumulation, offload), best ratio first."""
    return [r for r in recs if r.cost.accuracy_risk == "none" and not r.cost.changes_job and
            r.lever.slots[0] not in ("zero", "layout")][:10]


def more_gpus(ctx, recs: list[Recommendation], limit: int, max_gpus: int = 512,
              want: int = 2) -> list[Plan]:
    """Plans on the fewest GPUs of this kind (and on the next count that fits) with a sharded
    layout, alone or with changes that cost no accuracy; stops where more GPUs stop lowering
    the memory per GPU."""
    out: list[Plan] = []
    pool = _cheap(recs)
    sizes = one_gpu_sizes(ctx)
    prev = None
    counts = sorted(set(COUNTS) | set(split_counts(ctx)))
    for n in (c for c in counts if ctx.sc.parallel.gpus < c <= max_gpus):
        found, lowest = [], None
        for rec in splits(ctx, n):        # family splits (split.py): a pipeline, a volume
            lowest = min(lowest or rec.estimate.device_used_bytes,
                         rec.estimate.device_used_bytes)
            if fits_with(rec.estimate, limit):
                found.append(_plan(ctx, [rec], rec.scenario, rec.estimate))
            else:
                found += search(ctx, [rec], rec.estimate, _compatible_pool(recs, rec), limit,
                                want=1, budget=24)
        for name, lay in layouts(ctx, n):
            par = {"gpus": n, **lay}
            try:
                sc_n = ctx.sc.replace(parallel=par)
                est_n = estimate(sc_n, ctx.dev, with_max_batch=False)
            except ScenarioError:
                continue
            lowest = min(lowest or est_n.device_used_bytes, est_n.device_used_bytes)
            shard = Recommendation("scale-out", name, {"parallel": par}, sc_n, est_n, 0,
                                   _layout_cost(ctx, sc_n, sizes, n), {}, {}, 0, SCALE_OUT)
            if fits_with(est_n, limit):
                found.append(_plan(ctx, [shard], sc_n, est_n))
            else:
                found += search(ctx, [shard], est_n, pool, limit, want=1, budget=24)
        if found:
            out += sorted(found, key=Plan.key)[:1]
            if len(out) >= want:
                break
        if lowest is None:              # nothing to try at this count
            continue
        if prev is not None and lowest > 0.98 * prev:
            break
        prev = lowest
    return out


def _compatible_pool(recs, split) -> list:
    """Changes that go with a family split: any that share none of its slots, best first
    (a split keeps the job; quantised weights may still be what makes it fit)."""
    return [r for r in recs if not set(r.lever.slots) & set(split.lever.slots)][:TOP]


def _layout_cost(ctx, sc2, sizes, n) -> C.Cost:
    lever = "zero" if sc2.parallel.tensor == 1 else "tensor-parallel"
    cost = C.of(lever, gpus=n)
    est2 = estimate(sc2, ctx.dev, with_max_batch=False)
    cost = replace(cost, **layout_comm(ctx, sc2, C.step_time(est2, ctx.spec)))
    if sc2.parallel.pipeline > 1:
        lay = sc2.parallel   # (p - 1) / m, interleaved / (v m) (parallel.bubble_share)
        cost = cost + C.of("pipeline-parallel", bubble_share=bubble_share(
            lay.pipeline, int(sc2.gradient_accumulation or 1), lay.virtual_stages))
    if sc2.parallel.shard_group > 1 and sc2.parallel.zero == 0:
        cost = cost + C.of("data-parallel")
    return cost


KINDS = {
    "on the plan's GPUs": lambda p, g: p.gpus <= g,
    "on more GPUs": lambda p, g: p.gpus > g,
    "adapters (LoRA / QLoRA)": lambda p, g: any(c["id"] in ("lora", "qlora") for c in p.changes),
    "no accuracy risk": lambda p, g: p.cost.accuracy_risk == "none" and not p.cost.changes_job,
    "quantised weights": lambda p, g: any(c["id"].startswith("weights-") for c in p.changes),
}


def choose(plans: list[Plan], gpus: int, most: int = 8) -> list[Plan]:
    """The Pareto set, plus the cheapest plan of each kind (`KINDS`) it lacks: alternatives
    a person would weigh whose costs the model ranks below (host-link and dequantisation
    times are the least certain figures), cheapest first."""
    uniq: dict = {}
    for p in sorted(plans, key=Plan.key):
        uniq.setdefault((frozenset(c["id"] for c in p.changes), p.gpus), p)
    plans = list(uniq.values())
    small = [frozenset(c["id"] for c in p.changes) for p in plans if p.gpus <= gpus]
    # more GPUs that still need every change of a plan on the plan's own GPUs: pointless
    plans = [p for p in plans if p.gpus <= gpus or not any(
        s <= frozenset(c["id"] for c in p.changes[1:]) for s in small)]
    keep = pareto(plans)
    for want in KINDS.values():
        if not any(want(p, gpus) for p in keep):
            keep += sorted((p for p in plans if want(p, gpus)), key=Plan.key)[:1]
    return sorted(keep, key=Plan.key)[:most]


def pareto(plans: list[Plan]) -> list[Plan]:
    """The plans no other plan beats on every axis (step time, communication and host time,
    GPUs, accuracy risk, a change to the job), cheapest first."""
    def axes(p):
        c = p.cost
        step = c.total_step_s
        return (step if step is not None else c.compute_share + c.bubble_share + c.time_share,
                c.communication_time_s + c.host_time_s, p.gpus,
                C.RISKS.index(c.accuracy_risk), int(c.changes_job))
    keep = []
    for p in plans:
        a = axes(p)
        dominated = any(all(x <= y for x, y in zip(axes(q), a)) and axes(q) != a
                        for q in plans if q is not p)
        if not dominated:
            keep.append(p)
    return sorted(keep, key=Plan.key)
