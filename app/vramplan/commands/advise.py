"""`vramplan advise`: what to change so that a plan fits, and what each change costs.

    vramplan advise --scenario plan.json [--headroom 10%] [--gpu-kind ID] [--format json|table]

JSON: {"recommendations": [{"id", "title", "saves_bytes", "cost", "scenario", "estimate",
"how", "source", "gains", "kv_pool" (serve plans: {"bytes", "tokens"} per GPU, [before,
after]), ...}], "plans": [{"changes", "scenario", "estimate", "cost", ...}], "gpus":
[...], "growth": {...}, ...}: recommendations best bytes-saved-per-cost first, plans cheapest
first. Bad input: one line `vramplan: error: ...`, exit 2.
"""
from __future__ import annotations

from ..errors import VramplanError
from ..units import gib_number
from ._output import (add_format_arg, add_gpu_arg, add_margin_arg, add_max_gpus_arg, dump_json,
                      emit, table)
from ._plan import add_scenario_flags, load_one, plan_of  # noqa: F401 (load_one: callers)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "advise", help="what to change so that a plan fits, and what it costs",
        description="Recommendations for one scenario on its GPU (each with the bytes it "
                    "saves, its cost in compute, communication, host transfers and accuracy "
                    "risk, a source and a how-to), plans that fit with a headroom (one GPU "
                    "and more GPUs of the same kind), every GPU of the database that holds "
                    "the plan unchanged or with one change, and for a plan that fits, how far "
                    "it can grow.")
    add_scenario_flags(p)   # --scenario FILE or the plan as flags, as estimate takes it
    add_gpu_arg(p, "--gpu-kind", "the GPU the plans are for")
    add_margin_arg(p, "--headroom", dest="headroom", default="the scenario's (0)")
    add_max_gpus_arg(p, 512)
    p.add_argument("--allow-job-changes", action="store_true",
                   help="let plans change the job (LoRA / QLoRA instead of training, pure "
                        "16-bit, 8-bit or factored optimizers, a shorter context ...); without "
                        "it those are listed apart, each with its accuracy risk, and plans "
                        "keep the job (layout, checkpointing, micro-batch, offload, kernels, "
                        "more GPUs through the cluster solver)")
    p.add_argument("--no-gpu-table", action="store_true",
                   help="skip the table of every GPU in the database")
    add_format_arg(p, ("table", "json"))
    p.set_defaults(func=run)


def run(a) -> int:
    from ..advisor import advise
    if a.max_gpus < 1:
        raise VramplanError("--max-gpus must be >= 1")
    sc = plan_of(a, "advise")
    adv = advise(sc, headroom=a.headroom, gpu_kind=a.gpu_kind, max_gpus=a.max_gpus,
                 gpu_table_too=not a.no_gpu_table,
                 allow_job_changes=a.allow_job_changes)
    emit(dump_json(adv.to_dict()) if a.format == "json" else render(adv))
    return 0


def _g(n) -> str:
    return gib_number(n)


def _cost(c, total: bool = False) -> str:
    """The cost as the page and the report say it (report.words.cost_words: each transfer's
    bytes per step, link and time, compute, bubble, risk, job change, GPUs; `total`: a plan's
    whole traffic), then for more than one GPU the step and its GPU-seconds."""
    from ..report.text import seconds
    from ..report.words import cost_words
    text = cost_words(c, total=total)
    if c.gpu_seconds is not None and (c.gpus > 1 or total):   # plans rank by GPU-seconds
        text += f" · step {seconds(c.total_step_s)} = {c.gpu_seconds:.1f} GPU-s"
    return text


def _saves(r) -> str:
    """What the change buys (report.words.saving): device bytes, or a serve plan's KV pool."""
    from ..report.words import saving
    return saving(r.to_dict(full=False))


def _head(adv) -> list[str]:
    """What was advised on, the verdict and the one memory limit, in estimate's words (the
    plan line, report.words.verdict naming the deciding rank, report.words.limit_words)."""
    from ..report.ranks import decided_by
    from ..report.words import limit_words, verdict
    from .estimate import _plan_line
    e = adv.estimate.to_dict()
    said = verdict(e, adv.estimate.gpu.usable_bytes)["sentence"]
    by = decided_by(e)
    return [_plan_line(e), f"{said} ({by})" if by else said,
            limit_words(e.get("memory_limit"), flag="--safety-margin or --headroom"), ""]


def render(adv) -> str:
    from ..report.words import growth_items
    g = adv.estimate.gpu
    lines = _head(adv)
    if adv.recommendations:
        rows = [[i, r.id, _saves(r), "yes" if r.estimate.fits else "no", _cost(r.cost),
                 r.title] for i, r in enumerate(adv.recommendations, 1)]
        lines += ["changes that keep the job (best bytes saved per cost first):",
                  table(rows, ["#", "id", "buys", "fits", "cost", "change"], "rllrll"), ""]
    if getattr(adv, "job_changes", None):
        rows = [[r.id, _saves(r), r.cost.accuracy_risk, r.title]
                for r in adv.job_changes]
        lines += ["if you can change the job (" + ("allowed in plans" if
                  adv.allow_job_changes else "not in plans; --allow-job-changes") + "):",
                  table(rows, ["id", "buys", "accuracy risk", "change"], "llll"), ""]
    if adv.plans:
        rows = [[i, p.gpus, _g(p.estimate.device_used_bytes), _cost(p.cost, True),
                 " + ".join(c["title"] for c in p.changes)] for i, p in enumerate(adv.plans, 1)]
        lines += [f"plans that fit within the memory limit (fewest GPU-seconds per step first, "
                  f"on {g.id}):",
                  table(rows, ["#", "GPUs", "used GiB", "cost", "changes"], "rrrll"), ""]
    elif not adv.fits:
        lines += ["no plan found that fits within the memory limit", ""]
    grow = growth_items(adv.growth, adv.scenario.to_dict())   # the report's and page's words
    if grow:
        lines += ["room to grow within the memory limit: " + ", ".join(grow), ""]
    if adv.gpus:
        fit = [r["gpu"] for r in adv.gpus if r["fits"]]
        one = [f"{r['gpu']} ({r['with_one_change']['id']})" for r in adv.gpus
               if not r["fits"] and r["with_one_change"]]
        lines.append(f"GPUs that hold it unchanged ({len(fit)}): {', '.join(fit) or '-'}")
        lines.append(f"GPUs that hold it with one change ({len(one)}): {', '.join(one) or '-'}")
    return "\n".join(lines).rstrip()
