"""`vramplan estimate`: one scenario from flags, or a scenario file (JSON or JSON Lines)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import VramplanError
from ._output import dump_json, emit

GiB = 2**30


def register(subparsers) -> None:
    p = subparsers.add_parser("estimate", help="memory at the peak, fit, max batch, bandwidth",
                              description="Estimate GPU memory of a scenario (SCENARIO.md).")
    p.add_argument("--scenario", metavar="FILE", help="one JSON object, or JSON Lines (one "
                   "estimate a line out, a rejected line gives {\"error\": ...})")
    p.add_argument("--model")
    p.add_argument("--task")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--seq-len", type=int)
    p.add_argument("--new-tokens", type=int)
    p.add_argument("--target-len", type=int)
    p.add_argument("--precision")
    p.add_argument("--optimizer")
    p.add_argument("--gradient-accumulation", type=int)
    p.add_argument("--checkpointing")
    p.add_argument("--attention")
    p.add_argument("--gpu")
    p.add_argument("--gpus", type=int)
    p.add_argument("--data", type=int)
    p.add_argument("--tensor", type=int)
    p.add_argument("--pipeline", type=int)
    p.add_argument("--context", type=int)
    p.add_argument("--zero", type=int)
    p.add_argument("--lora-rank", type=int)
    p.add_argument("--lora-targets", help="comma-separated module names")
    p.add_argument("--option", action="append", default=[], help="repeatable (compile, ...)")
    p.add_argument("--offload", action="append", default=[], help="repeatable")
    p.add_argument("--architecture", metavar="JSON|FILE",
                   help="inline architecture instead of --model: a Hugging Face config.json "
                        "(path or JSON text) or '{\"params\": 7e9}'")
    p.add_argument("--resolution", metavar="HxW", help="vision / diffusion / volume: 1024x1024 "
                   "or DxHxW")
    p.add_argument("--frames", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--text-len", type=int)
    p.add_argument("--guidance", action=argparse.BooleanOptionalAction, default=None,
                   help="diffusion: classifier-free guidance (doubles the denoiser batch)")
    p.add_argument("--calibrate", action="store_true",
                   help="apply this GPU's calibration (measured / estimated ratios recorded by "
                        "`vramplan measure --calibrate`) and show both figures")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=run)


def scenario_from_args(a) -> dict:
    d: dict = {}
    for key in ("model", "task", "batch_size", "seq_len", "new_tokens", "target_len",
                "precision", "optimizer", "gradient_accumulation", "checkpointing", "attention",
                "gpu", "frames", "steps", "text_len", "guidance"):
        v = getattr(a, key, None)
        if v is not None:
            d[key] = v
    par = {k: getattr(a, k) for k in ("gpus", "data", "tensor", "pipeline", "context", "zero")
           if getattr(a, k, None) is not None}
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
                                f"'{a.resolution}'") from None
    if a.option:
        d["options"] = list(a.option)
    if a.offload:
        d["offload"] = list(a.offload)
    return d


def _architecture(text: str) -> dict:
    """--architecture: a path to a config.json, or the JSON itself."""
    src = text
    p = Path(text)
    if not text.lstrip().startswith("{") and p.exists():
        try:
            src = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise VramplanError(f"--architecture: cannot read '{text}': {exc}") from None
    try:
        obj = json.loads(src)
    except json.JSONDecodeError as exc:
        raise VramplanError(f"--architecture: neither a readable file nor JSON ({exc.msg})") \
            from None
    if not isinstance(obj, dict):
        raise VramplanError("--architecture: expected a JSON object")
    return obj


def _read(path: str) -> tuple[bool, list]:
    """(many, items): items are dicts or error strings, in file order."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise VramplanError(f"cannot read scenario file '{path}': {exc}") from None
    if not text.strip():
        raise VramplanError(f"scenario file '{path}' is empty")
    try:
        obj = json.loads(text)
        if isinstance(obj, dict):
            return False, [obj]
        if isinstance(obj, list):
            return True, obj
        raise VramplanError(f"{path}: expected a JSON object or JSON Lines")
    except json.JSONDecodeError:
        pass
    items: list = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            items.append(f"line {i}: not JSON: {exc.msg} (column {exc.colno})")
    return True, items


def _one(d, calibrate: bool = False) -> dict:
    from ..estimate import estimate
    if isinstance(d, str):
        return {"error": d}
    if not isinstance(d, dict):
        return {"error": "a scenario must be a JSON object"}
    try:
        return _maybe_calibrate(estimate(d).to_dict(), calibrate)
    except VramplanError as exc:
        return {"error": str(exc)}


def _maybe_calibrate(e: dict, calibrate: bool) -> dict:
    if not calibrate:
        return e
    from .. import calibration
    out = calibration.apply(e)
    out["calibration_summary"] = calibration.describe(e)
    return out


def run(a) -> int:
    from ..estimate import estimate
    if a.scenario:
        many, items = _read(a.scenario)
        if many:
            for d in items:
                emit(json.dumps(_one(d, a.calibrate)))
            return 0
        est = estimate(items[0])
    else:
        d = scenario_from_args(a)
        if "model" not in d and "architecture" not in d and d.get("task") not in (
                "render", "volume", "array"):
            raise VramplanError("give --model or --architecture (or --scenario FILE)")
        est = estimate(d)
    e = _maybe_calibrate(est.to_dict(), a.calibrate)
    if a.format == "json":
        emit(dump_json(e))
    else:
        emit(render_table(e))
    return 0


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
    if e.get("notes"):
        lines.append("")
        lines += [f"note: {n}" for n in e["notes"]]
    return "\n".join(lines)
