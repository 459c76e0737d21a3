"""`vramplan trace`: run a scenario's model for two steps under fake tensors and count memory."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import VramplanError
from ..units import format_bytes
from ._output import dump_json, emit, table


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "trace", help="measure a real torch module without a GPU (fake tensors)",
        description="Build the scenario's model as a torch module, run two steps (forward, "
                    "backward, optimizer; or inference / generate) under FakeTensorMode on "
                    "device 'cpu' and count live tensor bytes. See docs/tracing.md.")
    p.add_argument("--scenario", metavar="FILE", required=True, help="one scenario (JSON object)")
    p.add_argument("--mode", choices=["fake", "cpu"], default="fake",
                   help="fake: no data (default); cpu: really execute on the CPU (small only)")
    p.add_argument("--kernels", choices=["cuda", "cpu"], default="cuda",
                   help="cuda: emulate CUDA kernels' allocations (default); cpu: as the CPU runs")
    p.add_argument("--steps", type=int, default=2, help="steps to trace (default 2)")
    p.add_argument("--timeline", action="store_true", help="include the live-bytes timeline")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=run)


def load_one(path: str) -> dict:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise VramplanError(f"cannot read scenario file {path}: {exc.strerror}") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        try:
            d = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError as exc:
            raise VramplanError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(d, dict):
        raise VramplanError(f"{path}: expected one scenario (a JSON object)")
    return d


def run(args) -> int:
    from .. import trace
    r = trace.trace(load_one(args.scenario), mode=args.mode, kernels=args.kernels,
                    steps=args.steps, timeline=args.timeline)
    d = r.to_dict(timeline=args.timeline)
    if args.format == "json":
        emit(dump_json(d))
        return 0
    pg = d["per_gpu"]
    t = d["trace"]
    rows = [[k, format_bytes(v)] for k, v in pg["components"].items() if v]
    rows += [["peak allocated", format_bytes(pg["peak_allocated_bytes"])],
             ["peak reserved (allocator model)", format_bytes(pg["peak_reserved_bytes"])],
             ["device used", format_bytes(pg["device_used_bytes"])]]
    out = [f"trace ({t['mode']}, {t['kernels']} kernels): peak in {t['peak_phase']} of step "
           f"{t['peak_step']}, {t['ops']} ops in {t['seconds']:.1f} s",
           table(rows, ["component at the peak", "bytes"], "lr"), "",
           table([[m, format_bytes(v)] for m, v in list(t["by_module"].items())[:12]],
                 ["module at the peak", "bytes"], "lr")]
    if d["fits"] is not None:
        out.append(f"\n{'fits' if d['fits'] else 'does NOT fit'} on {d['gpu']['name']} "
                   f"(headroom {format_bytes(d['headroom_bytes'])})")
    if args.timeline:
        out.append("\nevent  phase           live")
        out += [f"{e:>6}  {ph:<14}  {format_bytes(b)}" for e, ph, b in t["timeline"]]
    for n in t["notes"]:
        out.append(f"note: {n}")
    emit("\n".join(out))
    return 0
