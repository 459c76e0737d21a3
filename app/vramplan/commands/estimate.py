"""`vramplan estimate`: one scenario from flags, or a scenario file (JSON or JSON Lines).

Exit status: 0 when every scenario was estimated, 2 when anything failed. A file with several
scenarios is a batch: each one's result (or `{"error": ...}`) is printed in place, in order,
and the run ends with one error line and status 2 if any of them failed.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import safejson
from ..errors import VramplanError
from ..scenario import (ATTENTION, CHECKPOINTING, MODELLESS_TASKS, OFFLOAD, OPTIMIZERS, OPTIONS,
                        PRECISIONS, TASKS)
from ._output import dump_json, emit, table

GiB = 2**30
NO_GPU = "no GPU given: pass --gpu ID (see `vramplan gpus`)"
# the scenario flags (dest names); with --scenario FILE only --gpu may be added
PLAN_FLAGS = ("model", "task", "batch_size", "seq_len", "new_tokens", "target_len", "precision",
              "optimizer", "gradient_accumulation", "checkpointing", "attention", "frames",
              "steps", "text_len", "guidance")
PARALLEL_FLAGS = ("gpus", "data", "tensor", "pipeline", "context", "zero")
# LoRA target names the diffusion workload counts (workloads/diffusion.py, _training)
DIFFUSION_LORA_TARGETS = ("to_q", "to_k", "to_v", "to_out.0", "query", "key", "value",
                          "q_proj", "k_proj", "v_proj")


def _one_of(values) -> str:
    return ", ".join(values)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "estimate", help="memory at the peak, fit, max batch, bandwidth",
        description="Estimate the GPU memory of one scenario (a plan: model, task, how it runs, "
                    "on what GPU), given by flags or in a file. Keys, defaults and rules: "
                    "docs/scenario.md. Exit status 2 when anything failed.")
    p.add_argument("--scenario", metavar="FILE",
                   help="a scenario file: one JSON object, or JSON Lines (one scenario a line; "
                        "the output has one estimate a line, a rejected scenario gives "
                        "{\"error\": ...} in its place). Only --gpu may be added to it")
    p.add_argument("--model", help="catalog id, e.g. gpt2, meta-llama/Llama-3.1-8B, "
                                   "torchvision/resnet50 (org prefix optional when unique)")
    p.add_argument("--architecture", metavar="JSON|FILE",
                   help="inline architecture instead of --model: a Hugging Face config.json "
                        "(path or JSON text) or '{\"params\": 7e9}'")
    p.add_argument("--task", choices=TASKS, help="what the job does (default: train)")
    p.add_argument("--gpu", metavar="ID", help="hardware-database id, e.g. nvidia-a100-sxm4-80gb "
                   "(list: `vramplan gpus`); required unless the scenario file names one, "
                   "which it then replaces")
    p.add_argument("--batch-size", type=int, metavar="N",
                   help="micro-batch per GPU: sequences, images, frames or requests (default 1)")
    p.add_argument("--seq-len", type=int, metavar="N",
                   help="tokens per sequence; generate: the prompt length")
    p.add_argument("--new-tokens", type=int, metavar="N",
                   help="generate: tokens produced after the prompt")
    p.add_argument("--target-len", type=int, metavar="N",
                   help="encoder-decoder models: decoder tokens per sequence")
    p.add_argument("--precision", choices=PRECISIONS, metavar="P",
                   help=f"weights / compute format: {_one_of(PRECISIONS)}")
    p.add_argument("--optimizer", choices=OPTIMIZERS, metavar="OPT",
                   help=f"training: {_one_of(OPTIMIZERS)} (default adamw)")
    p.add_argument("--gradient-accumulation", type=int, metavar="N",
                   help="micro-batches per optimizer step (default 1)")
    p.add_argument("--checkpointing", choices=CHECKPOINTING,
                   help="activation recomputation (default none)")
    p.add_argument("--attention", choices=ATTENTION,
                   help="eager materialises the score matrix; sdpa / flash do not (default sdpa)")
    g = p.add_argument_group("parallelism (gpus = data x tensor x pipeline x context)")
    g.add_argument("--gpus", type=int, metavar="N", help="GPUs in the job (default 1)")
    g.add_argument("--data", type=int, metavar="N", help="data-parallel ranks")
    g.add_argument("--tensor", type=int, metavar="N", help="tensor-parallel ranks")
    g.add_argument("--pipeline", type=int, metavar="N", help="pipeline stages")
    g.add_argument("--context", type=int, metavar="N", help="context-parallel ranks")
    g.add_argument("--zero", type=int, choices=(0, 1, 2, 3),
                   help="ZeRO stage: 3 = FSDP full shard, 2 = FSDP shard-grad-op (default 0)")
    lo = p.add_argument_group("LoRA (tasks lora, qlora; an adapter on the inference tasks)")
    lo.add_argument("--lora-rank", type=int, metavar="R", help="adapter rank (default 8)")
    lo.add_argument("--lora-targets", metavar="NAMES",
                    help="comma-separated module names, e.g. q_proj,v_proj (default) or "
                         "all-linear; an unknown name is refused, listing the model's")
    p.add_argument("--option", action="append", default=[], choices=tuple(OPTIONS),
                   metavar="OPTION", help=f"repeatable framework switch: {_one_of(OPTIONS)} "
                                          "(docs/scenario.md)")
    p.add_argument("--offload", action="append", default=[], choices=tuple(OFFLOAD),
                   metavar="WHAT", help=f"repeatable: move to CPU memory: {_one_of(OFFLOAD)}")
    v = p.add_argument_group("vision, diffusion, video")
    v.add_argument("--resolution", metavar="HxW", help="pixels of one input / frame / image: "
                   "1024x1024, or DxHxW voxels for volumes")
    v.add_argument("--frames", type=int, metavar="N", help="video frames")
    v.add_argument("--steps", type=int, metavar="N", help="diffusion: denoising steps")
    v.add_argument("--text-len", type=int, metavar="N",
                   help="diffusion: prompt tokens given to the text encoders")
    v.add_argument("--guidance", action=argparse.BooleanOptionalAction, default=None,
                   help="diffusion: classifier-free guidance (doubles the denoiser batch)")
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


# ---- the scenario from flags -------------------------------------------------------------------

def scenario_from_args(a) -> dict:
    d: dict = {k: getattr(a, k) for k in (*PLAN_FLAGS, "gpu") if getattr(a, k, None) is not None}
    par = {k: getattr(a, k) for k in PARALLEL_FLAGS if getattr(a, k, None) is not None}
    if par:
        d["parallel"] = par
    if a.lora_rank is not None or a.lora_targets:
        lora: dict = {}
        if a.lora_rank is not None:
            lora["rank"] = a.lora_rank
        if a.lora_targets:
            lora["targets"] = [t.strip() for t in a.lora_targets.split(",") if t.strip()]
        d["lora"] = lora
    if a.architecture:
        d["architecture"] = _architecture(a.architecture)
    if a.resolution:
        try:
            d["resolution"] = [int(x) for x in a.resolution.lower().replace(",", "x").split("x")]
        except ValueError:
            raise VramplanError(f"--resolution: expected HxW or DxHxW in pixels, got "
                                f"'{_short(a.resolution)}'") from None
    if a.option:
        d["options"] = list(a.option)
    if a.offload:
        d["offload"] = list(a.offload)
    return d


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _architecture(text: str) -> dict:
    """--architecture: a path to a config.json, or the JSON itself (safejson: no NaN, no
    1e999, no nesting deeper than safejson.MAX_DEPTH)."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        path = Path(text)
        try:
            is_file = path.is_file()
        except (OSError, ValueError):   # a name too long for the file system, a NUL byte
            is_file = False
        if not is_file:
            raise VramplanError(f"--architecture: '{_short(text)}' is neither a file nor JSON "
                                "text (an object such as '{\"params\": 7e9}')")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise VramplanError(f"--architecture: cannot read '{_short(text)}': "
                                f"{exc.strerror or exc}") from None
        obj = safejson.loads(data, f"--architecture file '{_short(text)}'")
    else:
        obj = safejson.loads(text, "--architecture")
    if not isinstance(obj, dict):
        raise VramplanError(f"--architecture: expected a JSON object, got "
                            f"{'a list' if isinstance(obj, list) else type(obj).__name__}")
    return obj


# ---- checks at the CLI edge ---------------------------------------------------------------------

def check_lora_targets(sc) -> None:
    """Refuse LoRA target names the model's workload would match to no module (they would
    silently give a plan without those adapters), naming the valid ones."""
    if sc.lora is None or sc.spec is None:
        return
    spec = sc.spec
    if spec.is_transformer:
        from ..workloads.transformer.footprint import LORA_GROUPS, lora_modules
        arch = spec.arch
        names = set().union(*LORA_GROUPS.values()) | {"all-linear"}
        valid = sorted(n for n in names if lora_modules(arch, [n])[1])

        def known(t):
            return t.lower() in {"all", "all_linear"} or bool(lora_modules(arch, [t])[1])
    elif spec.family == "diffusion":
        valid = list(DIFFUSION_LORA_TARGETS)

        def known(t):
            return t in DIFFUSION_LORA_TARGETS
    else:
        return
    bad = [t for t in sc.lora.targets if not known(t)]
    if bad:
        raise VramplanError(f"lora.targets: {', '.join(repr(_short(b)) for b in bad)} "
                            f"{'is not a module name' if len(bad) == 1 else 'are not module names'}"
                            f" of {spec.id} ({spec.family}); valid: {', '.join(valid)}")


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
    check_lora_targets(sc)
    est = estimate(sc)
    out = est.to_dict()
    if getattr(a, "advise", False):
        from ..advisor import recommendations
        out["recommendations"] = [r.to_dict() for r in recommendations(sc, est.gpu, est=est)]
    return _maybe_calibrate(out, a.calibrate)


def _maybe_calibrate(e: dict, calibrate: bool) -> dict:
    if not calibrate:
        return e
    from .. import calibration
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
    given = [f"--{k.replace('_', '-')}" for k in (*PLAN_FLAGS, *PARALLEL_FLAGS, "lora_rank",
                                                   "lora_targets", "architecture", "resolution",
                                                   "option", "offload")
             if getattr(a, k, None) not in (None, [])]
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
                     f"{pg['peak_allocated_bytes'] / GiB:.2f}",
                     f"{pg['device_used_bytes'] / GiB:.2f}", "yes" if e["fits"] else "no",
                     e["max_batch_size"]])
    out = table(rows, ["#", "model", "task", "gpu", "batch", "allocated GiB",
                       "device used GiB", "fits", "max batch"], "rlllrrrlr")
    return "\n".join([out, *([""] + errors if errors else [])])


def render_table(e: dict) -> str:
    g = e["gpu"]
    pg = e["per_gpu"]
    lines = [f"GPU: {g['name']} ({g['memory_bytes'] / GiB:.1f} GiB)   peak phase: "
             f"{e.get('peak_phase', '?')}", "", "components at the peak (per GPU):"]
    for k, v in pg["components"].items():
        if v:
            lines.append(f"  {k:24} {v / GiB:9.2f} GiB")
    lines += ["",
              f"  {'peak allocated':24} {pg['peak_allocated_bytes'] / GiB:9.2f} GiB",
              f"  {'peak reserved':24} {pg['peak_reserved_bytes'] / GiB:9.2f} GiB",
              f"  {'device used':24} {pg['device_used_bytes'] / GiB:9.2f} GiB", "",
              f"fits: {'yes' if e['fits'] else 'no'}   headroom: "
              f"{e['headroom_bytes'] / GiB:.2f} GiB   max batch size: {e['max_batch_size']}"]
    bw = e.get("bandwidth", {})
    if bw:
        lines.append("")
        lines.append(f"bandwidth: datasheet {bw.get('datasheet_bandwidth_gbs')} GB/s, "
                     f"achievable {bw.get('achievable_bandwidth_gbs')} GB/s")
        if "bytes_per_step" in bw:
            lines.append(f"  bytes per step {bw['bytes_per_step'] / 1e9:.2f} GB -> "
                         f">= {bw.get('min_step_time_s', 0) * 1e3:.1f} ms/step")
        if "max_tokens_per_s" in bw:
            lines.append(f"  <= {bw['max_tokens_per_s']:.0f} tokens/s (memory-bound)")
    if e.get("calibration_summary"):
        lines += ["", f"calibration: {e['calibration_summary']}"]
    if e.get("recommendations"):
        lines += ["", "recommendations (best bytes saved per cost first; `vramplan advise` for "
                      "plans):"]
        lines += [f"  {r['id']:24} saves {r['saves_bytes'] / GiB:8.2f} GiB  cost score "
                  f"{r['cost']['score']:.2f}  {r['title']}" for r in e["recommendations"]]
    if e.get("notes"):
        lines.append("")
        lines += [f"note: {n}" for n in e["notes"]]
    return "\n".join(lines)
