"""`vramplan sweep`: one scenario over a grid of keys and GPUs, every point as `estimate`
gives it (to the byte).

    vramplan sweep --scenario plan.json --vary batch_size=1..256 --vary gpu=all
    vramplan sweep --scenario plan.json --vary seq_len=512..8192:x2 --format csv
    vramplan sweep --scenario plan.json --gpus-needed      # fewest GPUs of each kind

Values: `A..B` (every integer), `A..B:x2` (geometric), `A..B:+K` (step), `a,b,c`, `all` (every
choice of the key; `gpu=all`: every GPU), GPU globs (`gpu=nvidia-h100*`); nested keys dotted
(`parallel.gpus=1,2,4`).
"""
from __future__ import annotations

import json

from ..errors import VramplanError
from ._output import add_format_arg, add_scenario_arg, dump_json, emit, table, to_csv

GiB = 2**30


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep", help="a scenario over grids of keys and GPUs (memory, fit, max batch)",
        description="Evaluate one scenario at every point of a grid (keys x GPUs): device "
                    "used, reserved and allocated bytes, fit and headroom per point, each "
                    "equal to `vramplan estimate` for that point.")
    add_scenario_arg(p)
    p.add_argument("--vary", action="append", default=[], metavar="KEY=VALUES",
                   help="an axis of the grid (repeatable): batch_size=1..256, "
                        "seq_len=512..8192:x2, precision=bf16-mixed,fp32, checkpointing=all, "
                        "parallel.gpus=1,2,4, gpu=all or gpu=nvidia-h100*")
    p.add_argument("--max-batch", action="store_true",
                   help="also the max batch of each point (as estimate's max_batch_size)")
    p.add_argument("--gpus-needed", action="store_true",
                   help="instead of a grid: the fewest GPUs of each kind (of --vary gpu=..., "
                        "default all) with which the plan fits (ZeRO-3 / tensor layouts)")
    p.add_argument("--headroom", metavar="SHARE", default="0%",
                   help="--gpus-needed: memory to leave free, a share such as 5%% "
                        "(default 0%%)")
    add_format_arg(p)
    p.set_defaults(func=run)


def run(a) -> int:
    from ..sweep import gpus_needed, parse_values, parse_vary, sweep
    from .advise import load_one
    sc = load_one(a.scenario)
    axes = parse_vary(a.vary)
    if a.gpus_needed:
        from ..advisor import parse_headroom
        frac, nbytes = parse_headroom(a.headroom)
        if nbytes:
            raise VramplanError("--headroom for --gpus-needed is a share such as 5%")
        others = [k for k in axes if k != "gpu"]
        if others:
            raise VramplanError(f"--gpus-needed takes only --vary gpu=...; got "
                                f"{', '.join(others)}")
        ids = parse_values("gpu", axes["gpu"]) if "gpu" in axes else None
        rows = gpus_needed(sc, ids, headroom=frac)
        emit(_needed(rows, a.format))
        return 0
    if not axes:
        raise VramplanError("give at least one --vary KEY=VALUES (e.g. --vary batch_size=1..64 "
                            "--vary gpu=all)")
    if "gpu" not in axes and not sc.gpu:
        raise VramplanError("no GPU given: the scenario has no \"gpu\"; add one or pass "
                            "--vary gpu=ID")
    r = sweep(sc, axes, with_max_batch=a.max_batch)
    if r.size and len(r.errors) == r.size:
        raise VramplanError(f"every point of the grid was refused; the first: "
                            f"{next(iter(r.errors.values()))}")
    if a.format == "json":
        emit(dump_json(r.to_dict()))
        return 0
    keys = list(r.axes)
    cols = keys + ["gpu", "peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes",
                   "fits", "headroom_bytes"] + (["max_batch_size"] if a.max_batch else []) + \
        ["error"]
    rows = list(r.rows())
    if a.format == "csv":
        emit(to_csv([[_cell(x.get(c)) for c in cols] for x in rows], cols).rstrip("\n"))
        return 0
    head = keys + ["gpu", "used GiB", "fits", "headroom GiB"] + \
        (["max batch"] if a.max_batch else [])
    out = []
    for x in rows:
        if "error" in x:
            out.append([_cell(x.get(k)) for k in keys] + [x["gpu"], "error", "-", x["error"]]
                       + (["-"] if a.max_batch else []))
            continue
        out.append([_cell(x.get(k)) for k in keys] +
                   [x["gpu"], f"{x['device_used_bytes'] / GiB:.2f}", "yes" if x["fits"] else
                    "no", f"{x['headroom_bytes'] / GiB:.2f}"] +
                   ([_cell(x["max_batch_size"])] if a.max_batch else []))
    emit(table(out, head, "l" * (len(keys) + 1) + "rlr" + ("r" if a.max_batch else "")) +
         f"\n\n{r.size} points in {r.seconds * 1e3:.1f} ms ({r.footprint_calls} footprints)")
    return 0


def _cell(v):
    if isinstance(v, (list, dict)):
        return json.dumps(v) if isinstance(v, dict) else "x".join(map(str, v))
    return v


def _needed(rows, fmt: str) -> str:
    if fmt == "json":
        return dump_json(rows)
    cols = ["gpu", "gpus", "layout", "device_used_bytes", "usable_bytes"]
    if fmt == "csv":
        return to_csv([[r.get(c) for c in cols] for r in rows], cols).rstrip("\n")
    return table([[r["gpu"], r["gpus"] or "> 512", r["layout"] or "-",
                   "-" if r.get("device_used_bytes") is None else
                   f"{r['device_used_bytes'] / GiB:.2f}"] for r in rows],
                 ["gpu", "GPUs", "layout", "used GiB per GPU"], "lrlr")
