"""The advisor: what to change so that a plan fits, and what each change costs.

    from vramplan.advisor import advise
    a = advise({"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": 4,
                "seq_len": 4096, "gpu": "nvidia-rtx-4090"}, headroom="5%")
    a.recommendations   # single changes that keep the job, best bytes-saved-per-cost first
    a.job_changes       # "if you can change the job": LoRA, 8-bit optimizers ... with risk
    a.plans             # combinations that fit with the headroom, fewest GPU-seconds first;
                        # job changes only with allow_job_changes=True; more GPUs through
                        # the cluster solver for transformer training (scale.py)
    a.to_dict()         # the JSON of `vramplan advise`

Every figure of memory is `estimate`'s: a recommendation's `saves_bytes` is the device used
of the plan minus that of the changed plan; every plan re-estimates to fit with the headroom.
Costs and their sources: `data/costs.toml`; how to switch each change on: `data/how.toml`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import VramplanError
from ..estimate import estimate
from ..scenario.rules import DEFAULT_SAFETY_MARGIN, memory_limit
from .costs import Cost
from .explore import growth, gpu_table
from .levers import LEVERS, Ctx, Lever
from .recommend import Recommendation, context, recommend
from .scale import solver_plans
from .solver import Plan, choose, fits_with, more_gpus, one_gpu

__all__ = ["advise", "Advice", "recommend", "recommendations", "context", "parse_headroom",
           "Recommendation", "Plan", "Cost", "Lever", "LEVERS", "Ctx"]

def parse_headroom(value) -> tuple[float, int]:
    """'10%' / 0.1 -> (0.10, 0); '2GiB' / 2147483648 -> (0, bytes): the memory kept free,
    read as the scenario key safety_margin is (scenario.rules.read_safety_margin: one reader,
    one bound, one default: DEFAULT_SAFETY_MARGIN when None); errors name safety_margin."""
    from ..scenario.rules import read_safety_margin
    m = read_safety_margin(value) if value is not None else DEFAULT_SAFETY_MARGIN
    return (float(m), 0) if isinstance(m, float) else (0.0, int(m))


def limit_for(usable, headroom) -> int:
    """The memory limit for (share, bytes) kept free: the estimate's own rule
    (scenario.rules.memory_limit), so both round alike."""
    frac, nbytes = headroom
    return memory_limit(float(frac) if frac else int(nbytes), usable)


@dataclass
class Advice:
    scenario: object
    estimate: object
    headroom: tuple
    limit_bytes: int
    recommendations: list = field(default_factory=list)
    plans: list = field(default_factory=list)
    job_changes: list = field(default_factory=list)
    allow_job_changes: bool = False
    gpus: list = field(default_factory=list)
    growth: dict = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return fits_with(self.estimate, self.limit_bytes)

    def to_dict(self, full: bool = True) -> dict:
        frac, nbytes = self.headroom
        return {"scenario": self.scenario.to_dict(), "gpu": self.estimate.gpu.id,
                "device_used_bytes": int(self.estimate.device_used_bytes),
                "usable_bytes": int(self.estimate.gpu.usable_bytes),
                "headroom": {"share": frac, "bytes": int(nbytes)},
                "limit_bytes": int(self.limit_bytes), "fits": self.fits,
                "recommendations": [r.to_dict(full) for r in self.recommendations],
                "job_changes": [r.to_dict(full) for r in self.job_changes],
                "allow_job_changes": self.allow_job_changes,
                "plans": [p.to_dict(full) for p in self.plans],
                "growth": self.growth, "gpus": self.gpus}


def _scenario(s):
    from ..scenario import Scenario
    return s if isinstance(s, Scenario) else Scenario.from_dict(s)


def _with_margin(sc, headroom):
    """The scenario with `headroom` (when given) as its safety margin, and that margin as
    (share, bytes): the advisor keeps the estimate's one memory limit (issue 20.6), not a
    headroom of its own."""
    if headroom is not None:
        frac, nbytes = parse_headroom(headroom)
        sc = sc.replace(safety_margin=frac if frac else nbytes)
    m = sc.safety_margin if sc.safety_margin is not None else DEFAULT_SAFETY_MARGIN
    return sc, ((float(m), 0) if isinstance(m, float) else (0.0, int(m)))


def recommendations(scenario, gpu=None, *, headroom=None, est=None) -> list[Recommendation]:
    """The ranked single changes for a plan (what `estimate --advise` fills in)."""
    from ..hardware import get_gpu
    sc, hr = _with_margin(_scenario(scenario), headroom)
    dev = get_gpu(gpu or sc.gpu) if not hasattr(gpu, "usable_bytes") else gpu
    ctx = context(sc, dev, est, limit_for(dev.usable_bytes, hr))
    return recommend(ctx)


def advise(scenario, gpu=None, *, headroom=None, gpu_kind: str | None = None,
           max_gpus: int = 512, gpu_table_too: bool = True, grow: bool = True,
           allow_job_changes: bool = False) -> Advice:
    """Recommendations, plans that fit with the headroom (default: the scenario's
    `safety_margin`, the estimate's one memory limit; a `headroom` given becomes that margin),
    every GPU of the database that holds the plan unchanged or with one change, and for a plan
    that fits, how far it can grow. `gpu_kind`: the GPU the plans are for (default the
    scenario's). Changes that change the job (recommend.JOB_CHANGING) are listed apart in
    `job_changes` and enter plans only with `allow_job_changes`."""
    from ..hardware import get_gpu
    sc, hr = _with_margin(_scenario(scenario), headroom)
    if gpu_kind:
        sc = sc.replace(gpu=get_gpu(gpu_kind).id)
    name = gpu_kind or gpu or sc.gpu
    if not name:
        raise VramplanError("no GPU given: the scenario has no \"gpu\"; add one or pass "
                            "--gpu-kind ID (see `vramplan gpus`)")
    dev = get_gpu(name) if not hasattr(name, "usable_bytes") else name
    limit = int(limit_for(dev.usable_bytes, hr))
    est = estimate(sc, dev, with_max_batch=False)
    ctx = context(sc, dev, est, limit)
    ctx.allow_job_changes = bool(allow_job_changes)
    every = recommend(ctx)
    keep = [r for r in every if not r.cost.changes_job]
    adv = Advice(sc, est, hr, limit, keep, job_changes=[r for r in every if r.cost.changes_job],
                 allow_job_changes=bool(allow_job_changes))
    recs = every if allow_job_changes else keep
    if not fits_with(est, limit):
        plans = one_gpu(ctx, recs, limit) + more_gpus(ctx, recs, limit, max_gpus) + \
            solver_plans(ctx, limit, max_gpus, Plan)
        adv.plans = choose(plans, sc.parallel.gpus)
    elif grow:
        adv.growth = growth(ctx, limit)
    if gpu_table_too:
        adv.gpus = gpu_table(ctx, recs, lambda u: limit_for(u, hr))
    return adv
