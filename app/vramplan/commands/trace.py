"""`vramplan trace`: run a scenario's model for two steps under fake tensors and count memory."""
from __future__ import annotations

import argparse

from ..errors import VramplanError
from ..report.text import count, seconds, size
from ._output import dump_json, emit, table
from ._plan import add_scenario_flags, load_one, plan_of, scenario_from_args

MAX_STEPS = 100   # each step is a whole forward + backward + optimizer under fake tensors


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "trace", help="measure a real torch module without a GPU (fake tensors)",
        description="Build the scenario's model as a torch module, run two steps (forward, "
                    "backward, optimizer; or inference / generate) under FakeTensorMode on "
                    "device 'cpu' and count live tensor bytes. See docs/tracing.md.")
    # --scenario, --architecture and the scenario's key flags, as estimate takes them
    # (_plan.py); the key `steps` (denoising steps) has no flag here: --steps is trace's own
    add_scenario_flags(p, skip=("steps",), file_help="one scenario: a JSON object (or a "
                       "one-line JSON Lines file); with --hf-config or --module it gives the "
                       "workload (task, batch, ...), which the key flags then change")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--hf-config", metavar="FILE",
                     help="build the transformers model of this config.json (or the diffusers "
                          "module its '_class_name' names) with no weights; JSON only, never code")
    src.add_argument("--module", metavar="PKG.MOD:FACTORY",
                     help="trace a module of yours: FACTORY() returns (module, example_inputs) "
                          "or (module, example_inputs, loss_fn); loss_fn(output) -> loss")
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


def _steps(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of steps, got "
                                         f"'{text[:40]}'") from None
    if not 1 <= n <= MAX_STEPS:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_STEPS}, got {n}")
    return n


def _hf_scenario(args, config) -> dict:
    """The workload of an --hf-config trace: the --scenario file's, else the flags' (a
    transformer config is also the scenario's `architecture`, so the estimate reads it)."""
    d = {}
    if args.scenario:
        sc = load_one(args.scenario, "trace")
        d = {k: v for k, v in sc.to_dict().items() if v is not None}
    d.update(scenario_from_args(args))    # every key flag given (task, batch_size, ...)
    d.setdefault("task", "train")
    if "_class_name" in config and "model_type" not in config:
        if "model" not in d:
            raise VramplanError("--hf-config with a diffusers config: give --scenario with the "
                                "pipeline's catalog model (for its resolution and text length)")
        return d
    d.pop("model", None)
    d["architecture"] = config
    return d


def _trace(args):
    from ..measure import trace
    kw = dict(mode=args.mode, kernels=args.kernels, steps=args.steps, timeline=args.timeline)
    if args.hf_config:
        from ..safejson import loads
        try:
            with open(args.hf_config, "rb") as f:
                config = loads(f.read(), args.hf_config)
        except OSError as exc:
            raise VramplanError(f"{args.hf_config}: cannot read: {exc.strerror}") from None
        if not isinstance(config, dict):
            raise VramplanError(f"{args.hf_config}: a config.json is a JSON object")
        if not isinstance(config.get("model_type") or config.get("_class_name"), str):
            raise VramplanError(f"{args.hf_config}: config.json has no 'model_type' (a "
                                "transformers config names its model type; a diffusers "
                                "config its '_class_name')")
        return trace.trace_real(_hf_scenario(args, config), {"hf": config}, **kw)
    if args.module:
        return trace.trace_real(None, {"module": args.module, "task": args.task,
                                       "precision": args.precision}, **kw)
    if not args.scenario and not scenario_from_args(args):
        raise VramplanError("trace needs --scenario FILE, --hf-config FILE or --module "
                            "PKG.MOD:FACTORY, or the plan as flags (--model ... as estimate "
                            "takes them)")
    return trace.trace(plan_of(args, "trace"), **kw)


def run(args) -> int:
    r = _trace(args)
    d = r.to_dict(timeline=args.timeline)
    if args.format == "json":
        emit(dump_json(d))
        return 0
    emit(render(d, args.timeline))
    return 0


def render(d: dict, timeline: bool = False) -> str:
    """A trace as text: what was traced first (estimate's plan line), then the components and
    modules at the peak with the estimate's labels and sizes (report.text.size), the verdict
    against the one memory limit (usable less the plan's safety margin)."""
    from ..vocab import component_label, phase_label
    from .estimate import _plan_line
    pg, t = d["per_gpu"], d["trace"]
    rows = [[component_label(k), size(v)] for k, v in pg["components"].items() if v]
    rows += [["peak allocated", size(pg["peak_allocated_bytes"])],
             ["peak reserved (allocator model)", size(pg["peak_reserved_bytes"])],
             ["device used", size(pg["device_used_bytes"])]]
    out = [_plan_line(d)] if d.get("gpu") else []
    out += [f"trace ({t['mode']}, {t['kernels']} kernels): peak in "
            f"{phase_label(t['peak_phase'])} of step {t['peak_step']}, {count(t['ops'])} ops "
            f"in {seconds(t['seconds'])}",
            table(rows, ["component at the peak", "bytes"], "lr"), "",
            table([[m, size(v)] for m, v in list(t["by_module"].items())[:12]],
                  ["module at the peak", "bytes"], "lr")]
    if d["fits"] is not None:
        h = d["headroom_bytes"]
        out.append(f"\n{'fits' if d['fits'] else 'does NOT fit'} on {d['gpu']['name']} "
                   + (f"(headroom {size(h)} to the memory limit)" if h >= 0 else
                      f"({size(-h)} over the memory limit)"))
    if timeline:
        out.append("\nevent  phase           live")
        out += [f"{e:>6}  {ph:<14}  {size(b)}" for e, ph, b in t["timeline"]]
    for n in t["notes"]:
        out.append(f"note: {n}")
    return "\n".join(out)
