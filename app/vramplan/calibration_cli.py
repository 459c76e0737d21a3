"""`vramplan calibration path | list | export | import`: the calibration database from the shell
(registered by commands/live.py next to `measure --calibrate`, which fills it)."""
from __future__ import annotations

import argparse

from . import calibration
from .commands._output import dump_json, emit, table
from .units import format_bytes


def register(subparsers, db_help: str) -> None:
    c = subparsers.add_parser(
        "calibration", help="the calibration database: where, list, export, import",
        description="Measurements stored by `measure --calibrate` (one row per sample: GPU, "
                    "driver, torch, CUDA, time, scenario, estimated and measured bytes). The "
                    "database is --calibration PATH, else $VRAMPLAN_CALIBRATION, else "
                    "~/.config/vramplan/calibration.db; several processes and machines may "
                    "write one file at once. `export` writes JSON to share, `import` adds an "
                    "export or an old calibration.json (each sample once).")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--calibration", metavar="PATH", default=None, help=db_help)
    sub = c.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser("path", parents=[common], help="where the database is, and its state",
                       description="Print the database path, whether it is writable and how "
                                   "many samples it holds.")
    p.add_argument("--format", choices=["table", "json"], default="table",
                   help="table (default) or json")
    p.set_defaults(func=run_path)
    ls = sub.add_parser("list", parents=[common], help="the stored samples",
                        description="One line per stored sample, oldest first.")
    ls.add_argument("--gpu", metavar="ID", default=None, help="only this hardware-database id")
    ls.add_argument("--format", choices=["table", "json"], default="table",
                    help="table (default) or json (the export's samples)")
    ls.set_defaults(func=run_list)
    ex = sub.add_parser("export", parents=[common], help="write the samples to a JSON file",
                        description="Write the samples as a JSON export (version 2), "
                                    "atomically: a reader sees the old file or the new one.")
    ex.add_argument("file", metavar="FILE", help="JSON file to write")
    ex.add_argument("--gpu", metavar="ID", default=None, help="only this hardware-database id")
    ex.set_defaults(func=run_export)
    im = sub.add_parser("import", parents=[common], help="add samples from JSON files",
                        description="Add the samples of exports or old calibration.json files; "
                                    "a sample already stored is skipped.")
    im.add_argument("files", metavar="FILE", nargs="+", help="export or old calibration file")
    im.set_defaults(func=run_import)


def run_path(a) -> int:
    st = calibration.status(a.calibration)
    if a.format == "json":
        emit(dump_json(st))
        return 0
    emit(f"{st['path']} ({st['mode']}, {st['samples']} samples)")
    if st["notice"]:
        emit(f"note: {st['notice']}")
    return 0


def _b(v):
    return "-" if v is None else format_bytes(v)


def run_list(a) -> int:
    got = calibration.samples(a.gpu, a.calibration)
    if a.format == "json":
        emit(dump_json(got))
        return 0
    if not got:
        emit("no samples")
        return 0
    rows = []
    for s in got:
        sw, q = s["software"], "device_used_bytes"
        r = s["ratios"].get(q)
        rows.append([s["recorded_at"] or "-", s["host"] or "-", s["gpu"], sw["torch"] or "-",
                     sw["cuda"] or "-", sw["driver"] or "-", _b(s["estimate"][q]),
                     _b(s["measured"][q]), "-" if r is None else f"{r:.3f}"])
    emit(table(rows, ["recorded", "host", "gpu", "torch", "cuda", "driver", "estimate",
                      "measured", "ratio"], "llllllrrr"))
    return 0


def run_export(a) -> int:
    n = calibration.export(a.file, a.gpu, a.calibration)
    emit(f"wrote {n} samples to {a.file}")
    return 0


def run_import(a) -> int:
    for f in a.files:
        added, known = calibration.import_file(f, a.calibration)
        emit(f"{f}: added {added} samples ({known} already there)")
    return 0
