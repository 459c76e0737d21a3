"""`vramplan estimate`: one scenario from flags, or a scenario file (JSON or JSON Lines).

Exit status: 0 when every scenario was estimated, 2 when anything failed. A file with several
scenarios is a batch: each one's result (or `{"error": ...}`) is printed in place, in order,
and the run ends with one error line and status 2 if any of them failed.
"""
from __future__ import annotations

import json

from ..errors import VramplanError
from ..scenario import MODELLESS_TASKS
from ..workloads.diffusion.family import LORA_TARGETS
from ..report.ranks import text_lines as rank_text_lines
from ..units import format_gib, gib_number
from ._output import dump_json, emit, table
from ._plan import (METAVARS, add_scenario_flags, architecture_arg,  # noqa: F401 (the names
                    flags_given, scenario_from_args)                # tests and callers import)

NO_GPU = "no GPU given: pass --gpu ID (see `vramplan gpus`)"
# LoRA target names the diffusion workload counts (its family declares them; the scenario
# validation refuses any other)
DIFFUSION_LORA_TARGETS = LORA_TARGETS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "estimate", help="memory at the peak, fit, max batch, bandwidth",
        description="Estimate the GPU memory of one scenario (a plan: model, task, how it runs, "
                    "on what GPU), given by flags or in a file. Keys, defaults and rules: "
                    "docs/scenario-keys.md. Exit status 2 when anything failed.")
    # --scenario, --architecture, one flag per scalar key of the key table and the list keys:
    # one definition for every command (_plan.py)
    add_scenario_flags(p, file_help="a scenario file: one JSON object, or JSON Lines (one "
                       "scenario a line; the output has one estimate a line, a rejected "
                       "scenario gives {\"error\": ...} in its place). Only --gpu may be "
                       "added to it")
    p.add_argument("--calibrate", action="store_true",
                   help="apply this GPU's calibration (measured / estimated ratios recorded by "
                        "`vramplan measure --calibrate`) and show both figures")
    p.add_argument("--advise", action="store_true",
                   help="fill `recommendations`: the changes that save memory, each with the "
                        "bytes it saves and its cost (`vramplan advise` also solves for plans "
                        "that fit)")
    p.add_argument("--format", choices=["table", "json"], default="table",
                   help="table (default) or json; a batch prints JSON Lines or one table")
    p.set_defaults(func=run)


def _estimate(sc, a, gpu: str | None = None) -> dict:
    """One Scenario (or the error load_scenarios returned for it) -> the estimate dict;
    `gpu` replaces the scenario's."""
    from ..estimate import estimate
    if isinstance(sc, Exception):
        raise sc
    if gpu:
        sc = sc.replace(gpu=gpu)
    if not sc.gpu:
        raise VramplanError("no GPU given: the scenario has no \"gpu\"; add one or pass "
                            "--gpu ID (see `vramplan gpus`)")
    est = estimate(sc)
    out = est.to_dict()
    if getattr(a, "advise", False):
        from ..advisor import recommendations
        out["recommendations"] = [r.to_dict() for r in recommendations(sc, est.gpu, est=est)]
    return _maybe_calibrate(out, a.calibrate)


def _maybe_calibrate(e: dict, calibrate: bool) -> dict:
    if not calibrate:
        return e
    from ..measure import calibration
    out = calibration.apply(e)
    out["calibration_summary"] = calibration.describe(e)
    return out


# ---- running -----------------------------------------------------------------------------------

def run(a) -> int:
    if a.scenario:
        return _run_file(a)
    d = scenario_from_args(a)
    if "model" not in d and "architecture" not in d and d.get("task") not in MODELLESS_TASKS:
        raise VramplanError("give --model or --architecture (or --scenario FILE); tasks "
                            f"{', '.join(MODELLESS_TASKS)} need neither")
    if "gpu" not in d:
        raise VramplanError(NO_GPU)
    from ..scenario import Scenario
    _print_one(_estimate(Scenario.from_dict(d), a), a.format)
    return 0


def _run_file(a) -> int:
    from ..scenario import load_scenarios
    given = flags_given(a)
    if given:
        raise VramplanError(f"--scenario FILE holds the whole plan: {', '.join(given)} would "
                            "be ignored (put them in the file; only --gpu may be added)")
    items = load_scenarios(a.scenario)
    if not items:
        raise VramplanError(f"scenario file '{a.scenario}' holds no scenario")
    if len(items) == 1:
        _print_one(_estimate(items[0], a, a.gpu), a.format)
        return 0
    results = []
    for sc in items:
        try:
            results.append(_estimate(sc, a, a.gpu))
        except VramplanError as exc:
            results.append({"error": str(exc)})
    if a.format == "json":
        for r in results:
            emit(json.dumps(r))
    else:
        emit(render_batch_table(results))
    failed = [str(i) for i, r in enumerate(results, 1) if "error" in r]
    if failed:
        raise VramplanError(f"{len(failed)} of {len(results)} scenarios in '{a.scenario}' "
                            f"failed (scenario {', '.join(failed)}; see their \"error\")")
    return 0


def _print_one(e: dict, fmt: str) -> None:
    emit(dump_json(e) if fmt == "json" else render_table(e))


def render_batch_table(results: list[dict]) -> str:
    """A batch as one table, a row per scenario; failed scenarios listed below it."""
    rows, errors = [], []
    for i, e in enumerate(results, 1):
        if "error" in e:
            errors.append(f"scenario {i}: error: {e['error']}")
            rows.append([i, "-", "-", "-", "-", "-", "-", "error", "-"])
            continue
        s, pg = e["scenario"], e["per_gpu"]
        what = s.get("model") or ("architecture" if "architecture" in s else "-")
        rows.append([i, what, s.get("task"), e["gpu"]["id"], s.get("batch_size"),
                     gib_number(pg['peak_allocated_bytes']),
                     gib_number(pg['device_used_bytes']), "yes" if e["fits"] else "no",
                     _max_batch(e["max_batch_size"])])
    out = table(rows, ["#", "model", "task", "gpu", "batch", "allocated GiB",
                       "device used GiB", "fits", "max batch"], "rlllrrrlr")
    return "\n".join([out, *([""] + errors if errors else [])])


def _max_batch(mb, long: bool = False):
    """The max batch as a person reads it: null means memory does not grow with the batch."""
    if mb is None:
        return "no limit (memory does not grow with the batch)" if long else "no limit"
    return mb


def _limit_lines(lim: dict | None) -> list[str]:
    """The one memory limit beside the verdict: usable memory less the safety margin (the
    report's words, report.words.limit_words)."""
    from ..report.words import limit_words
    said = limit_words(lim)
    return [said] if said else []


def _serving_lines(sv: dict | None) -> list[str]:
    """A serving engine's start-up check (the estimate's `serving` section) under the verdict:
    whether it starts and why not, the longest context its KV pool holds and the concurrent
    sequences at the chosen context."""
    if not sv:
        return []
    head = ("engine: starts" if sv["engine_starts"] else
            f"engine: does not start ({sv['reason']}): {sv['why']}")
    return [head, f"  KV pool {sv['kv_pool_tokens']:,} tokens; longest context it holds "
                  f"{sv['longest_context_tokens']:,} tokens (max_model_len "
                  f"{sv['max_model_len']:,}); {sv['concurrent_sequences']:,} concurrent "
                  f"sequences of {sv['context_tokens']:,} tokens"]


def _plan_line(e: dict) -> str:
    """What was estimated, first: model, task and GPU (and how many)."""
    sc, g = e.get("scenario") or {}, e["gpu"]
    arch = sc.get("architecture")
    model = sc.get("model") or (
        f"size-only decoder of {_params(arch['params'])} parameters" if isinstance(arch, dict)
        and arch.get("params") else "own config" if isinstance(arch, dict) else "")
    gpus = (sc.get("parallel") or {}).get("gpus") or 1
    on = f"{gpus} x {g['name']}" if gpus > 1 else g["name"]
    what = " · ".join(str(x) for x in (model, sc.get("task")) if x)
    return f"{what} on {on} ({format_gib(g['memory_bytes'])}{' each' if gpus > 1 else ''})"


def _params(n: float) -> str:
    """A parameter count as people say it: 7e9 -> '7B', 3.5e8 -> '350M', 1.5e12 -> '1.5T'."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:,.0f}"


def render_table(e: dict) -> str:
    """One estimate as text: what was estimated, the verdict (naming the deciding rank, as the
    report does), the figures, the limit and margin, ranks, bandwidth, notes. Sizes, rates,
    times and counts in the report's formats (report.text: GiB, GB/s, ms / s, 1,234)."""
    from ..report.ranks import decided_by
    from ..report.text import count, gbs, seconds, size
    from ..report.words import verdict
    from ..vocab import component_label, phase_label
    pg = e["per_gpu"]
    phase = phase_label(e["peak_phase"]) if e.get("peak_phase") else "?"
    said = verdict(e, e["gpu"].get("usable_memory_bytes"))["sentence"]   # the report's words
    by = decided_by(e)
    lines = [_plan_line(e), f"{said} ({by})" if by else said, f"peak phase: {phase}", "",
             "components at the peak (per GPU):"]
    for k, v in pg["components"].items():
        if v:
            lines.append(f"  {component_label(k):24} {size(v):>12}")
    lines += ["",
              f"  {'peak allocated':24} {size(pg['peak_allocated_bytes']):>12}",
              f"  {'peak reserved':24} {size(pg['peak_reserved_bytes']):>12}",
              f"  {'device used':24} {size(pg['device_used_bytes']):>12}", "",
              f"fits: {'yes' if e['fits'] else 'no'}   headroom: "
              f"{size(e['headroom_bytes'])}   max batch size: "
              f"{_max_batch(e['max_batch_size'], long=True)}"]
    lines += _limit_lines(e.get("memory_limit"))
    lines += _serving_lines(e.get("serving"))
    lines += rank_text_lines(e)   # per pipeline stage; the rank that decides
    bw = e.get("bandwidth", {})
    if bw:
        lines.append("")
        lines.append(f"bandwidth: datasheet {gbs(bw.get('datasheet_bandwidth_gbs'))}, "
                     f"achievable {gbs(bw.get('achievable_bandwidth_gbs'))}")
        if "bytes_per_step" in bw:
            lines.append(f"  bytes per step {size(bw['bytes_per_step'])}")
        if "memory_floor_s" in bw and "compute_floor_s" in bw:
            lines.append(f"  time per step >= {seconds(bw['min_step_time_s'])} "
                         f"({bw.get('bound', '?')}-bound: memory "
                         f"{seconds(bw['memory_floor_s'])}, compute "
                         f"{seconds(bw['compute_floor_s'])})")
        elif "min_step_time_s" in bw:
            lines.append(f"  time per step >= {seconds(bw['min_step_time_s'])} "
                         "(memory traffic at the achievable bandwidth)")
        if "max_tokens_per_s" in bw:
            lines.append(f"  <= {count(bw['max_tokens_per_s'])} tokens/s "
                         f"({bw.get('bound', 'memory')}-bound)")
    if e.get("calibration_summary"):
        lines += ["", f"calibration: {e['calibration_summary']}"]
    if e.get("recommendations"):
        lines += ["", "recommendations (best bytes saved per cost first; `vramplan advise` for "
                      "plans):"]
        lines += [f"  {r['id']:24} saves {size(r['saves_bytes']):>12}  cost score "
                  f"{r['cost']['score']:.2f}  {r['title']}" for r in e["recommendations"]]
    if e.get("notes"):
        lines.append("")
        lines += [f"note: {n}" for n in e["notes"]]
    return "\n".join(lines)
