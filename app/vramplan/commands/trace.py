"""`vramplan trace`: run a scenario's model for two steps under fake tensors and count memory."""
from __future__ import annotations

import argparse

from ..errors import VramplanError
from ..units import format_bytes
from ._output import dump_json, emit, table

MAX_STEPS = 100   # each step is a whole forward + backward + optimizer under fake tensors


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "trace", help="measure a real torch module without a GPU (fake tensors)",
        description="Build the scenario's model as a torch module, run two steps (forward, "
                    "backward, optimizer; or inference / generate) under FakeTensorMode on "
                    "device 'cpu' and count live tensor bytes. See docs/tracing.md.")
    p.add_argument("--scenario", metavar="FILE", required=True,
                   help="one scenario: a JSON object (or a one-line JSON Lines file)")
    p.add_argument("--mode", choices=["fake", "cpu"], default="fake",
                   help="fake: no data (default); cpu: really execute on the CPU (small only)")
    p.add_argument("--kernels", choices=["cuda", "cpu"], default="cuda",
                   help="cuda: emulate CUDA kernels' allocations (default); cpu: as the CPU runs")
    p.add_argument("--steps", type=_steps, default=2, metavar="N",
                   help=f"steps to trace, 1 to {MAX_STEPS} (default 2: the second step shows "
                        "the optimizer states' steady state)")
    p.add_argument("--timeline", action="store_true", help="include the live-bytes timeline")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=run)


def load_one(path: str):
    """The one scenario of a file (vramplan.scenario.load_scenarios: BOM, binary, deep
    nesting and 1e999 are refused there, naming the file)."""
    from ..scenario import load_scenarios
    items = load_scenarios(path)
    if len(items) != 1:
        raise VramplanError(f"{path}: trace takes one scenario, the file holds {len(items)}")
    if isinstance(items[0], Exception):
        raise items[0]
    return items[0]


def _steps(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of steps, got "
                                         f"'{text[:40]}'") from None
    if not 1 <= n <= MAX_STEPS:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_STEPS}, got {n}")
    return n


def run(args) -> int:
    from ..measure import trace
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
