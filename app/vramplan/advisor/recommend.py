"""Recommendations for one plan on one GPU: every lever that applies, with the bytes it saves
(device used of the plan minus device used of the changed plan, both by `estimate`), what it
costs and where the cost figure comes from, ranked by bytes saved per unit of cost.

A change the validator refuses, that changes nothing, or that saves nothing is dropped. For a
serving engine, whose pool takes what the other tensors leave (device used stays near
gpu_memory_utilization x memory), a change is ranked by the room it gains in the KV pool over
one max_model_len request (`serving_levers.pool_gain`, in bytes at the plan's bytes per
token): device bytes the pool does not get (the allocator's slack, CUDA graphs) do not start
the engine, so such a change ranks after every one that grows the pool (it may still bring
device used under the limit); its `gains` say how many more full-length requests fit
(`increases_memory` when device used goes up).
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field, replace

from ..errors import ScenarioError
from ..estimate import estimate
from ..parallel import bubble_share
from . import comm
from . import costs as C
from . import stack_snippets
from .levers import BY_ID, LEVERS, Ctx, Lever
from .serving_levers import SERVING_LEVERS, pool_gain, with_engine_gains


MIN_BENEFIT = 1 << 20      # a change that frees less than 1 MiB is noise, not advice


@functools.lru_cache(maxsize=1)
def _how() -> dict:
    return tomllib.loads((C.DATA / "how.toml").read_text(encoding="utf-8"))


def how_for(lever: Lever, sc=None) -> dict:
    """How to switch the lever on, per ecosystem; the plan's `stack` first, in its own syntax
    (stack_snippets.py, data/stack_snippets.toml)."""
    key = lever.how or lever.id
    return stack_snippets.ordered(key, _how().get(key, {}), getattr(sc, "stack", None))


@dataclass
class Recommendation:
    id: str
    title: str
    changes: dict
    scenario: object
    estimate: object
    saves_bytes: int
    cost: C.Cost
    how: dict
    gains: dict = field(default_factory=dict)
    benefit_bytes: int = 0
    lever: Lever | None = None
    kv_pool: dict = field(default_factory=dict)   # serve plans: bytes, tokens [before, after]
    pool_gain: tuple | None = None   # serve plans: (tokens, bytes) of KV-pool room gained

    @property
    def increases_memory(self) -> bool:
        return self.saves_bytes < 0

    @property
    def ratio(self) -> float:
        return self.benefit_bytes / max(self.cost.score, C.table()["ranking"]["min_cost"])

    def to_dict(self, full: bool = True) -> dict:
        out = {"id": self.id, "title": self.title, "saves_bytes": int(self.saves_bytes),
               "increases_memory": self.increases_memory, "cost": self.cost.to_dict(),
               "changes": self.changes, "how": self.how, "source": list(self.cost.sources),
               "fits": bool(self.estimate.fits)}
        if self.gains:
            out["gains"] = self.gains
        if self.kv_pool:
            out["kv_pool"] = self.kv_pool
        if self.pool_gain is not None:
            out["pool_gain"] = {"tokens": int(self.pool_gain[0]), "bytes": int(self.pool_gain[1])}
        if full:
            out["scenario"] = self.scenario.to_dict()
            out["estimate"] = self.estimate.to_dict()
        else:
            out["device_used_bytes"] = int(self.estimate.device_used_bytes)
        return out


def context(sc, dev, est=None, limit: int | None = None) -> Ctx:
    from ..sweep import spec_of
    est = est or estimate(sc, dev, with_max_batch=False)
    ctx = Ctx(sc, dev, spec_of(sc), est)
    ctx.limit = dev.usable_bytes if limit is None else int(limit)
    return ctx


def one_gpu_sizes(ctx: Ctx) -> C.Sizes:
    """Model-state and activation totals of the plan on one GPU (cached on the context)."""
    got = getattr(ctx, "_sizes", None)
    if got is None:
        sc = ctx.sc
        if sc.parallel.gpus > 1 or sc.offload:
            try:
                sc = sc.replace(parallel={}, offload=[])
            except ScenarioError:
                pass
        est1 = ctx.est if sc is ctx.sc else estimate(sc, ctx.dev, with_max_batch=False)
        got = C.sizes_of(est1)
        ctx._sizes = got
    return got


def _per_seq_bytes(est) -> int:
    kv = est.components.get("kv_cache", 0)
    toks = est.bandwidth.get("kv_pool_tokens") or 0
    sv = est.scenario.serving
    return int(kv / toks * sv.max_model_len) if toks and sv else 0


def evaluate(ctx: Ctx, lever: Lever) -> Recommendation | None:
    """The recommendation `lever` makes for this plan, or None where it does not apply."""
    got = lever.make(ctx)
    if got is None:
        return None
    title, changes = got
    try:
        sc2 = ctx.sc.replace(**changes)
    except ScenarioError:
        return None
    if sc2 == ctx.sc:
        return None
    try:
        est2 = estimate(sc2, ctx.dev, with_max_batch=False)
    except ScenarioError:
        return None
    saves = int(ctx.est.device_used_bytes - est2.device_used_bytes)
    gains, benefit = {}, saves
    if est2.footprint.batch_capacity is not None or ctx.est.footprint.batch_capacity is not None:
        before, after = ctx.est.max_batch_size or 0, est2.max_batch_size or 0
        if after != before:
            gains = {"max_batch_size": [before, after]}
        benefit = saves + (after - before) * _per_seq_bytes(est2 if after else ctx.est)
        if after < before and saves <= 0:
            return None
    pool = pool_gain(ctx.est, est2)
    if pool is not None:       # a serve plan: what the change adds to the KV pool decides
        benefit = max(0, pool[1])
        if benefit < MIN_BENEFIT and saves < MIN_BENEFIT:
            return None
    elif benefit < MIN_BENEFIT:
        return None
    cost = cost_of(ctx, lever, sc2, est2)
    return Recommendation(lever.id, title, changes, sc2, est2, saves, cost,
                          how_for(lever, ctx.sc), gains, benefit, lever, pool_gain=pool)


def recommend(ctx: Ctx, levers=LEVERS + SERVING_LEVERS) -> list[Recommendation]:
    """Every lever that applies, ranked by bytes saved per unit of cost (best first)."""
    out = [r for r in (evaluate(ctx, lv) for lv in levers) if r is not None]
    out = with_engine_gains(ctx, out)     # serving proposals: the engine before -> after
    out = [r for r in out if not any(_dominates(o, r) for o in out if o is not r)]
    out.sort(key=lambda r: (-r.ratio, -r.benefit_bytes, r.id))
    return after_certain(out)


def after_certain(recs: list) -> list:
    """`recs` with every change whose saving is uncertain (it depends on the stack:
    torch.compile) moved after each certain change that costs no more (score)."""
    out = list(recs)
    for u in [r for r in recs if r.cost.uncertain]:
        i = out.index(u)
        last = max((j for j, r in enumerate(out) if not r.cost.uncertain and
                    r.cost.score <= u.cost.score), default=-1)
        if last > i:
            out.insert(last, out.pop(i))
    return out


def _dominates(b: Recommendation, a: Recommendation) -> bool:
    """b makes part of a's change (a's change = b's + more) and saves as much for no more:
    a is pointless (offloading activations that full checkpointing already freed)."""
    part = all(a.changes.get(k) == v for k, v in b.changes.items()) and \
        len(b.changes) < len(a.changes)
    return part and b.benefit_bytes >= a.benefit_bytes and b.cost.score <= a.cost.score


# ---- costs ------------------------------------------------------------------------------------

def _selective_share(ctx: Ctx) -> float:
    a = C.arch_of(ctx.spec)
    s = int(ctx.sc.seq_len or 0)
    if a is None or not s:
        return 0.0
    return 4 * s / (3 * (24 * a.hidden + 4 * s))


def comm_bytes(sc, spec, sizes: C.Sizes, dev=None) -> float:
    """Bytes each GPU sends per step for the plan's layout (comm.py)."""
    return float(comm.total(comm.transfers(sc, spec, dev, sizes))[0])


def layout_comm(ctx: Ctx, sc2, step: float | None) -> dict:
    """Cost fields of sc2's collectives: every transfer (bytes, link, time), their bytes, the
    links named, and the time not hidden behind the step's compute (comm.exposed_time)."""
    ts = comm.transfers(sc2, ctx.spec, ctx.dev, one_gpu_sizes(ctx))
    nb, _, link = comm.total(ts)
    return {"communication_bytes_per_step": nb, "link": link,
            "communication_time_s": comm.exposed_time(ts, step or 0.0),
            "transfers": tuple(t.to_dict() for t in ts)}


def host_bytes(ctx: Ctx, lever: Lever, sc2, est2) -> float:
    """Bytes over the host link per step that an offload change adds (module doc)."""
    sz = one_gpu_sizes(ctx)
    p = sc2.parallel
    div = max(1, p.shard_group * p.tensor * p.pipeline)
    ga = int(sc2.gradient_accumulation or 1)
    what = lever.id
    if what == "offload-optimizer":
        return (sz.gradients + sz.weight16) / div
    if what == "offload-params":        # read in every forward and backward, frozen or not
        given = est2.bandwidth.get("host_link_bytes_per_step")
        params, grads = comm.model_bytes(sc2, ctx.spec, sz)
        return max(float(given or 0), (2 * params * ga + grads) / div)
    if what == "offload-activations":
        keep = est2.components.get("activations", 0)
        try:
            kept = estimate(sc2.replace(offload=[o for o in sc2.offload if o != "activations"]),
                            ctx.dev, with_max_batch=False).components.get("activations", 0)
        except ScenarioError:
            kept = keep
        return 2.0 * max(kept - keep, 0) * ga
    if what == "offload-gradients":
        return sz.gradients / div
    if what == "model-cpu-offload":
        return float(sz.weights)
    return 0.0


# Changes that change what the job computes (issue 20.4): adapters instead of training, pure
# 16-bit without master weights, other or quantised optimizer states, fp8 training, and every
# lever priced as `job-change` (a shorter context, fewer sequences, a smaller image ...).
JOB_CHANGING = frozenset({"lora", "qlora", "pure-16bit", "adamw-8bit", "paged-adamw-8bit",
                          "adafactor", "lion", "sgd-momentum", "float8-linears"})


def changes_job(lever: Lever) -> bool:
    return lever.id in JOB_CHANGING or lever.cost == "job-change"


def cost_of(ctx: Ctx, lever: Lever, sc2, est2) -> C.Cost:
    """The Cost of applying `lever` to the plan (giving sc2, estimated as est2)."""
    cost = C.of(lever.cost)
    if changes_job(lever):
        cost = replace(cost, changes_job=True)
    step = C.step_time(est2, ctx.spec) or C.step_time(ctx.est, ctx.spec)
    cost = replace(cost, step_time_s=step, gpus=sc2.parallel.gpus)
    if lever.id == "checkpointing-selective":
        cost = replace(cost, compute_share=_selective_share(ctx))
    elif lever.id == "checkpointing-full" and ctx.sc.checkpointing == "selective":
        cost = replace(cost, compute_share=max(0.0, cost.compute_share - _selective_share(ctx)))
    elif lever.id == "offload-activations" and ctx.sc.checkpointing != "full":
        cost = cost + replace(C.of("full-recompute"), step_time_s=step)
    if lever.id.startswith("micro-batch"):
        extra = (sc2.gradient_accumulation - ctx.sc.gradient_accumulation) * 3 * \
            ctx.est.components.get("weights", 0)
        bw = float(ctx.dev.bandwidth_gbs) * float(ctx.dev.achievable_bandwidth_fraction or 0.9)
        cost = replace(cost, host_time_s=0.0, compute_share=C.transfer_time(extra, bw) / step
                       if step else 0.0)
    if sc2.parallel != ctx.sc.parallel or sc2.gradient_accumulation != \
            ctx.sc.gradient_accumulation and ctx.sc.parallel.multi_gpu:
        new, old = layout_comm(ctx, sc2, step), layout_comm(ctx, ctx.sc, step)
        delta = new["communication_bytes_per_step"] - old["communication_bytes_per_step"]
        cost = replace(cost, communication_bytes_per_step=int(max(0, delta)), link=new["link"],
                       communication_time_s=max(0.0, new["communication_time_s"] -
                                                old["communication_time_s"]),
                       transfers=new["transfers"])
        if sc2.parallel.pipeline > ctx.sc.parallel.pipeline:
            bubble = bubble_share(sc2.parallel.pipeline, sc2.gradient_accumulation,
                                  sc2.parallel.virtual_stages)
            cost = replace(cost, bubble_share=cost.bubble_share + bubble,
                           notes=cost.notes + ("pipeline bubble (p - 1) / (v m); more "
                                               "micro-batches (gradient accumulation) or "
                                               "virtual stages shrink it",))
    if lever.cost == "offload" or lever.id == "model-cpu-offload":
        nb = host_bytes(ctx, lever, sc2, est2)
        lk = comm.host_link(ctx.dev)
        cost = replace(cost, host_bytes_per_step=int(nb), host_link=lk.name,
                       host_time_s=C.transfer_time(nb, lk.gbs),
                       transfers=cost.transfers + (comm.Transfer(
                           f"{lever.id}: host copies", "copy", int(nb), lk, "host").to_dict(),))
    return cost


__all__ = ["Recommendation", "recommend", "evaluate", "context", "cost_of", "comm_bytes",
           "layout_comm", "changes_job", "JOB_CHANGING",
           "host_bytes", "how_for", "BY_ID"]
