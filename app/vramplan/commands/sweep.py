"""`vramplan sweep`: one scenario over a grid of keys and GPUs, every point as `estimate`
gives it (to the byte).

    vramplan sweep --scenario plan.json --vary batch_size=1..256 --vary gpu=all
    vramplan sweep --scenario plan.json --vary seq_len=512..8192:x2 --format csv
    vramplan sweep --scenario plan.json --gpus-needed      # fewest GPUs of each kind
    vramplan sweep --scenario plan.json --vary batch_size=1..64 --vary gpu=all -o grid.csv

A grid of more than FULL_TABLE rows prints, as a table, a summary (one row per GPU: how many
points fit, the largest value of each key that fits, the memory at the first point); every
point goes to a file with `-o FILE` (CSV, or JSON by `--format json` / a `.json` name) or to
standard output with `--format csv` / `json`.

Values: `A..B` (every integer), `A..B:x2` (geometric), `A..B:+K` (step), `a,b,c`, `all` (every
choice of the key; `gpu=all`: every GPU), GPU globs (`gpu=nvidia-h100*`); nested keys dotted
(`parallel.gpus=1,2,4`).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import VramplanError
from ..units import gib_number
from ._output import add_format_arg, add_margin_arg, dump_json, emit, table, to_csv
from ._plan import add_scenario_flags, plan_of

FULL_TABLE = 48          # rows a table prints in full; larger grids print the summary


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep", help="a scenario over grids of keys and GPUs (memory, fit, max batch)",
        description="Evaluate one scenario at every point of a grid (keys x GPUs): device "
                    "used, reserved and allocated bytes, fit and headroom per point, each "
                    "equal to `vramplan estimate` for that point.")
    add_scenario_flags(p)   # --scenario FILE or the plan as flags, as estimate takes it
    p.add_argument("--vary", action="append", default=[], metavar="KEY=VALUES",
                   help="an axis of the grid (repeatable): batch_size=1..256, "
                        "seq_len=512..8192:x2, precision=bf16-mixed,fp32, checkpointing=all, "
                        "parallel.gpus=1,2,4, gpu=all or gpu=nvidia-h100*")
    p.add_argument("--max-batch", action="store_true",
                   help="also the max batch of each point (as estimate's max_batch_size)")
    p.add_argument("--gpus-needed", action="store_true",
                   help="instead of a grid: the fewest GPUs of each kind (of --vary gpu=..., "
                        "default all) with which the plan fits (ZeRO-3 / tensor layouts)")
    add_margin_arg(p, "--headroom", dest="headroom", default="the scenario's (0)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write every point of the grid to FILE (CSV; JSON with --format json "
                        "or a .json name) and print the summary")
    add_format_arg(p)
    p.set_defaults(func=run)


def run(a) -> int:
    from ..sweep import gpus_needed, parse_values, parse_vary, sweep
    sc = plan_of(a, "sweep")
    if a.headroom is not None:    # the scenario key safety_margin: one limit, every mode
        sc = sc.replace(safety_margin=a.headroom)
    axes = parse_vary(a.vary)
    if a.gpus_needed:
        others = [k for k in axes if k != "gpu"]
        if others:
            raise VramplanError(f"--gpus-needed takes only --vary gpu=...; got "
                                f"{', '.join(others)}")
        ids = parse_values("gpu", axes["gpu"]) if "gpu" in axes else None
        rows = gpus_needed(sc, ids)
        emit(_needed(rows, a.format) + ("\n\n" + _limit_said(sc) if a.format == "table" else ""))
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
    fmt = a.format
    if a.output:
        fmt_file = "json" if fmt == "json" or a.output.endswith(".json") else "csv"
        _write(a.output, _grid(r, fmt_file, a.max_batch))
        fmt = "table"
    if fmt != "table":
        emit(_grid(r, fmt, a.max_batch))
        return 0
    rows = list(r.rows())
    full = len(rows) <= FULL_TABLE and not a.output
    emit((_table(r, rows, a.max_batch) if full else _summary(r, a.max_batch)) +
         f"\n\n{_limit_said(sc)}\n{r.size} points in {r.seconds * 1e3:.1f} ms "
         f"({r.footprint_calls} footprint{'' if r.footprint_calls == 1 else 's'})" +
         ("" if full else f"; every point: {a.output}" if a.output else
          "; every point: -o FILE (CSV) or --format csv"))
    return 0


def _grid(r, fmt: str, max_batch: bool) -> str:
    """Every point of the grid as JSON or CSV text."""
    if fmt == "json":
        return dump_json(r.to_dict())
    cols = list(r.axes) + ["gpu", "peak_allocated_bytes", "peak_reserved_bytes",
                           "device_used_bytes", "fits", "headroom_bytes"] + \
        (["max_batch_size"] if max_batch else []) + ["error"]
    return to_csv([[_cell(x.get(c)) for c in cols] for x in r.rows()], cols).rstrip("\n")


def _write(path: str, text: str) -> None:
    out = Path(path)
    if out.is_dir():
        raise VramplanError(f"-o {path}: is a directory; give a file name")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text + "\n", encoding="utf-8")
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise VramplanError(f"-o {path}: cannot write ({exc.strerror or exc})") from None


def _table(r, rows: list, max_batch: bool) -> str:
    """Every point, one line each."""
    keys = list(r.axes)
    head = keys + ["gpu", "used GiB", "fits", "headroom GiB"] + (["max batch"] if max_batch else [])
    out = []
    for x in rows:
        if "error" in x:
            out.append([_cell(x.get(k)) for k in keys] + [x["gpu"], "error", "-", x["error"]]
                       + (["-"] if max_batch else []))
            continue
        out.append([_cell(x.get(k)) for k in keys] +
                   [x["gpu"], gib_number(x['device_used_bytes']), "yes" if x["fits"] else
                    "no", gib_number(x['headroom_bytes'])] +
                   ([_cell(x["max_batch_size"])] if max_batch else []))
    return table(out, head, "l" * (len(keys) + 1) + "rlr" + ("r" if max_batch else ""))


def _limit_said(sc) -> str:
    """What 'fits' and the headroom are held to: each GPU's usable memory less the scenario's
    safety margin (the estimate's one limit; the margin as report.words says it)."""
    from ..report.words import percent
    from ..report.text import size
    m = sc.safety_margin
    said = percent(m) + " of usable" if isinstance(m, float) else size(m) if m else "0"
    return (f"memory limit: usable memory - safety margin {said}"
            + (" (default; set with --safety-margin or --headroom)" if m is None else ""))


def _summary(r, max_batch: bool) -> str:
    """One row per GPU: the memory limit in GiB (usable less the safety margin), points that fit of those evaluated, the largest value of
    each varied key among the points that fit, device used and max batch at the grid's first
    point."""
    keys = list(r.axes)
    head = ["gpu", "limit GiB", "points that fit"] + [f"largest {k} that fits" for k in keys] \
        + ["used GiB at first point"] + (["max batch at first point"] if max_batch else [])
    out = []
    for c, g in enumerate(r.gpus):
        ok = [i for i in range(len(r.points)) if (i, c) not in r.errors]
        fit = [i for i in ok if r.fits[i, c]]
        largest = []
        for k in keys:
            vals = [r.points[i][k] for i in fit]
            try:
                largest.append(_cell(max(vals)) if vals else "-")
            except TypeError:          # values without an order (a resolution, a choice)
                largest.append(_cell(vals[-1]))
        first = (0, c) not in r.errors
        out.append([g, gib_number(int(r.usable[c])), f"{len(fit)} of {len(r.points)}"] + largest +
                   [gib_number(int(r.used[0, c])) if first else "error"] +
                   ([_cell(int(r.max_batch[0, c])) if first else "-"] if max_batch else []))
    return table(out, head, "lrr" + "r" * len(keys) + "r" + ("r" if max_batch else ""))


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
                   gib_number(r.get("device_used_bytes"))] for r in rows],
                 ["gpu", "GPUs", "layout", "used GiB per GPU"], "lrlr")
