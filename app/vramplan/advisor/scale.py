"""More GPUs that keep the job: the cluster solver's layouts for a transformer training plan, as
advisor plans.

The job kept is the plan's global batch (batch x accumulation x data-parallel degree), its
sequence length, task, precision and optimizer; the solver chooses data x tensor x pipeline x
context, the ZeRO stage, checkpointing and the micro-batch / accumulation split, and every
layout it returns fits every rank under the advisor's limit (cluster.py). Offers the fewest
GPUs, the fewest GPU-hours and the fastest step of its front (the fastest only within
FASTEST_HOURS x the fewest GPU-hours: more GPUs are a cost) and, for a multi-GPU plan, the
layout on its own GPU count.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import VramplanError
from . import comm
from . import costs as C
from .cluster import Job, Option, solve

CHANGE_ID = "cluster-layout"
FASTEST_HOURS = 2.0     # policy: the fastest layout is offered up to 2x the fewest GPU-hours


def _job(ctx, limit: int, max_gpus: int) -> Job | None:
    sc = ctx.sc
    if not ctx.training or C.arch_of(ctx.spec) is None or not sc.model or \
            not isinstance(sc.precision, str) or not sc.seq_len:
        return None
    batch = int(sc.batch_size) * int(sc.gradient_accumulation or 1) * sc.parallel.data
    opts = tuple(sorted(set(sc.options) | {"chunked-loss"}))
    return Job(sc.model, int(sc.seq_len), batch, ctx.dev.id, sc.precision, sc.optimizer,
               max_gpus, options=opts, task=sc.task, base=sc.to_dict(), limit_bytes=limit)


def title(opt: Option) -> str:
    """The change as a card shows it: its GPU count is the layout's own."""
    return opt.layout.text()


def cost(opt: Option, added: tuple = ()) -> C.Cost:
    _, _, link = comm.total(opt.transfers)
    base = C.of("zero", gpus=opt.gpus)
    return replace(base, step_time_s=opt.compute_s,
                   bubble_share=opt.bubble_s / opt.compute_s if opt.compute_s else 0.0,
                   communication_bytes_per_step=int(sum(t.nbytes for t in opt.transfers)),
                   communication_time_s=opt.comm_s, link=link,
                   transfers=tuple(t.to_dict() for t in opt.transfers),
                   sources=base.sources + ("cluster solver: advisor/cluster.py (compute at "
                                           "costs.toml [step] efficiency, the pipeline "
                                           "bubble as idle step time, exposed "
                                           "communication)",),
                   notes=(f"keeps the global batch: {opt.layout.data} x {opt.layout.micro} x "
                          f"{opt.layout.accumulation} sequences per step",
                          "bubble_share: the pipeline bubble (p - 1) / (v m), idle step "
                          "time") +
                   ((f"with {', '.join(added)}",) if added else ()))


def solver_plans(ctx, limit: int, max_gpus: int, plan_cls) -> list:
    """The solver's fewest-GPU, fewest-GPU-hours and fastest layouts as plans (none for a
    plan the solver does not take: not transformer training, an inline architecture)."""
    job = _job(ctx, limit, max_gpus)
    if job is None:
        return []
    try:
        _, front = solve(job)
    except VramplanError:
        return []
    # several GPUs (one_gpu searches a single GPU's changes); EP layouts set parallel.expert
    front = [o for o in front if o.gpus > 1]
    if not front:
        return []
    cheapest = min(front, key=lambda o: o.gpu_hours)
    picks = [front[0], cheapest] + [o for o in front[-1:]          # the fastest, unless it
                                    if o.gpu_hours <= FASTEST_HOURS * cheapest.gpu_hours]
    n = ctx.sc.parallel.gpus
    if n > 1:                   # and on the plan's own GPUs (or the next count that fits)
        picks += [o for o in front if o.gpus >= n][:1]
    added = tuple(o for o in job.options if o not in ctx.sc.options)
    out, seen = [], set()
    for opt in picks:
        if id(opt) in seen or opt.estimate is None:
            continue
        seen.add(id(opt))
        extra = added + (("sequence parallel", "vocab-parallel loss")
                         if opt.layout.tensor > 1 else ())
        out.append(plan_cls([{"id": CHANGE_ID, "title": title(opt)}],
                            opt.estimate.scenario, opt.estimate, cost(opt, extra)))
    return out
