"""`vramplan probe | measure | monitor | calibration`: the local GPU through NVML and CUDA, and
the calibration database the measurements feed.

Where nothing can be done (no driver for `probe` / `monitor`, no torch or CUDA for `measure`)
the command says so in one line (`vramplan: error: ...`) and exits 2. Where only part is missing
(NVML for `measure`'s device-used figure, one GPU NVML cannot read) it reports what it has and
says what is missing in one line (`vramplan: note: ...` on stderr).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import safejson
from ..errors import VramplanError
from ..units import format_size
from ._output import dump_json, emit, table

CALIBRATION_HELP = ("calibration database (SQLite; default $VRAMPLAN_CALIBRATION, else "
                    "~/.config/vramplan/calibration.db); several machines may share one file")


def _fmt(v):
    return format_size(v, none="-")      # the one size formatter (GiB, two decimals)


def _note(parts) -> None:
    parts = [p for p in parts if p]
    if parts:
        print(f"vramplan: note: {'; '.join(parts)}", file=sys.stderr)


def register(subparsers) -> None:
    p = subparsers.add_parser("probe", help="local GPUs through NVML (no CUDA context)",
                              description="List local NVIDIA GPUs: memory, bus, clocks, PCIe, "
                                          "NVLink and other processes, matched to the hardware "
                                          "database. Creates no CUDA context.")
    p.add_argument("--format", choices=["table", "json"], default="table",
                   help="table (default) or json (one object per GPU)")
    p.set_defaults(func=run_probe)

    m = subparsers.add_parser("measure", help="run a scenario on the local GPU: measured peaks",
                              description="Build the scenario's model (as `trace` does) with "
                                          "real tensors on the GPU, run two steps and report "
                                          "torch.cuda peaks and NVML device-used memory. The "
                                          "memory is given back afterwards, even on failure.")
    m.add_argument("--scenario", metavar="FILE", required=True,
                   help="scenario JSON (one object; of JSON Lines the first line)")
    m.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    m.add_argument("--steps", type=int, default=2, help="steps to run (default 2)")
    m.add_argument("--snapshot", metavar="PICKLE", help="write a memory snapshot for "
                   "https://pytorch.org/memory_viz")
    m.add_argument("--bandwidth", action="store_true", help="also time a device-to-device copy")
    m.add_argument("--max-batch", action="store_true", help="also search the largest batch")
    m.add_argument("--max-share", type=float, default=0.9,
                   help="never take more than this share of the free memory (default 0.9)")
    m.add_argument("--leak-check", action="store_true", help="also check growth over 6 steps")
    m.add_argument("--calibrate", action="store_true",
                   help="store the measurement and its estimate in the calibration database")
    m.add_argument("--calibration", metavar="PATH", default=None, help=CALIBRATION_HELP)
    m.add_argument("--format", choices=["table", "json"], default="table",
                   help="table (default) or json")
    m.set_defaults(func=run_measure)

    o = subparsers.add_parser("monitor", help="sample GPU memory over time (NVML)",
                              description="Print each GPU's used and free memory and "
                                          "utilisation every --interval seconds, through NVML "
                                          "(no CUDA context), until --count rounds or Ctrl-C. "
                                          "A reading NVML fails on is shown as '-' with NVML's "
                                          "message, and the samples go on.")
    o.add_argument("--interval", type=float, default=1.0,
                   help="seconds between rounds (default 1.0)")
    o.add_argument("--count", type=int, default=None,
                   help="rounds to sample (default: until Ctrl-C)")
    o.add_argument("--device", type=int, default=None,
                   help="NVML index of the one GPU to sample (default: every GPU)")
    o.add_argument("--format", choices=["table", "json"], default="table",
                   help="table (default) or json: one JSON object a line")
    o.set_defaults(func=run_monitor)

    _register_calibration(subparsers, CALIBRATION_HELP)


def run_probe(args) -> int:
    from ..measure.live import probe
    from ..measure.live.nvml import missing_line
    gpus = probe()
    if args.format == "json":
        emit(dump_json(gpus))
        _note([missing_line(gpus)])
        return 0
    if not gpus:
        emit("no NVIDIA GPUs found")
        return 0
    rows = [[g["index"], g["name"] or "?", g["hwdb_id"] or "?", _fmt(g["memory_total_bytes"]),
             _fmt(g["memory_used_bytes"]), _fmt(g["memory_free_bytes"]),
             _fmt(g["other_processes_bytes"]), g["bus_width_bits"] or "-",
             f"gen{g['pcie_generation']} x{g['pcie_width']}" if g["pcie_generation"] else "-",
             "-" if g["nvlink_active_links"] is None else g["nvlink_active_links"]] for g in gpus]
    emit(table(rows, ["#", "name", "hwdb id", "total", "used", "free", "other procs", "bus bits",
                      "pcie", "nvlink"], "llllrrrrll"))
    emit(f"driver {gpus[0]['driver_version'] or '?'}, CUDA {gpus[0]['cuda_driver_version'] or '?'}")
    _note([missing_line(gpus)])
    return 0


def load_scenario(path: str) -> dict:
    """One scenario from a JSON file (or the first line of JSON Lines), read safely: a binary,
    too deep or broken file is one VramplanError naming it."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise VramplanError(f"cannot read scenario file {path}: {exc.strerror or exc}") from None
    what = f"scenario file {path}"
    text = safejson.decode_text(data, what)
    try:
        d = safejson.loads(text, what)
    except VramplanError:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) < 2:
            raise
        d = safejson.loads(lines[0], f"{what}: line 1")
    if not isinstance(d, dict):
        raise VramplanError(f"{what}: expected one scenario (a JSON object)")
    return d


def _extras(args, scn, r: dict, missing: dict) -> None:
    """--bandwidth / --max-batch / --leak-check: one failing does not lose the measurement."""
    from ..measure.live import cuda
    jobs = [("bandwidth", args.bandwidth, lambda: cuda.bandwidth(device=args.device)),
            ("max_batch", args.max_batch,
             lambda: cuda.max_batch(scn, max_share=args.max_share, device=args.device)),
            ("leak_check", args.leak_check, lambda: cuda.leak_check(scn, device=args.device))]
    for name, wanted, job in jobs:
        if not wanted:
            continue
        try:
            r[name] = job()
        except VramplanError as exc:
            missing[name] = str(exc)
    if "max_batch" in r:
        r["max_batch_size"] = r["max_batch"]["max_batch_size"]


def _calibrate(args, e: dict, r: dict) -> str | None:
    from ..measure import calibration
    try:
        calibration.record(e, r, file=args.calibration)
        notice = calibration.status(args.calibration)["notice"]
    except VramplanError as exc:
        r["calibration_error"] = str(exc)
        return f"not calibrated: {exc}"
    r["calibration"] = {"stored": True, "notice": notice}
    return notice


def run_measure(args) -> int:
    from ..measure.live import cuda
    if not 0 < args.max_share <= 1:
        raise VramplanError(f"--max-share must be in (0, 1], got {args.max_share}")
    scn = load_scenario(args.scenario)
    r = cuda.measure(scn, steps=args.steps, device=args.device,
                     snapshot=args.snapshot).to_dict()
    missing = r.setdefault("missing", {})
    _extras(args, scn, r, missing)
    notes = []
    try:
        from ..estimate import estimate
        gpu_id = (r.get("gpu") or {}).get("id")     # compare on the GPU that was measured
        e = (estimate(scn, gpu_id) if gpu_id else estimate(scn)).to_dict()
        r["estimate"] = e["per_gpu"]
    except Exception as exc:  # estimate failing must not lose a measurement
        e = None
        r["estimate_error"] = str(exc)
        notes.append(f"no estimate to compare: {exc}")
    if args.calibrate and e is not None:
        notes.append(_calibrate(args, e, r))
    if not missing:
        del r["missing"]
    else:
        what = {"device_used_bytes": "device-used memory", "max_batch": "max batch",
                "leak_check": "leak check"}
        notes.insert(0, "not measured: " + "; ".join(f"{what.get(k, k)} ({v})"
                                                     for k, v in missing.items()))
    if args.format == "json":
        emit(dump_json(r))
        _note(notes)
        return 0
    pg = r["per_gpu"]
    est = r.get("estimate", {})
    rows = [[k, _fmt(pg[k]), _fmt(est.get(k))] for k in
            ("peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes")]
    emit(f"measured on {r['gpu']['name']} (torch {r['measure']['torch']}, CUDA {r['measure']['cuda']})")
    emit(table(rows, ["", "measured", "estimate"], "lrr"))
    if r["bandwidth"]:       # the contract's bandwidth object: the measured copy (--bandwidth)
        b = r["bandwidth"]
        emit(f"bandwidth {b['measured_gbs']} GB/s (datasheet {b['datasheet_gbs']}, {b['fraction']})")
    if "max_batch" in r:
        emit(f"max batch {r['max_batch_size']} within {args.max_share:.0%} of free memory")
    if "leak_check" in r:
        lk = r["leak_check"]
        emit(f"leak check: {'LEAK' if lk['leak'] else 'ok'}, {format_size(lk['growth_per_step_bytes'])}/step")
    _note(notes)
    return 0


def run_monitor(args) -> int:
    from ..measure.live import monitor
    for s in monitor(args.interval, args.count, args.device):
        if args.format == "json":
            emit(json.dumps(s))
        else:
            util = "-" if s["utilization_pct"] is None else f"{s['utilization_pct']}%"
            line = (f"{s['t']:8.1f}s  gpu{s['index']}  used {_fmt(s['used_bytes'])}  "
                    f"free {_fmt(s['free_bytes'])}  util {util}")
            emit(line + (f"  (NVML: {s['error']})" if s.get("error") else ""))
        sys.stdout.flush()
    return 0


# --- `vramplan calibration path | list | export | import` ------------------------------------

def _register_calibration(subparsers, db_help: str) -> None:
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
    p.set_defaults(func=run_calibration_path)
    ls = sub.add_parser("list", parents=[common], help="the stored samples",
                        description="One line per stored sample, oldest first.")
    ls.add_argument("--gpu", metavar="ID", default=None, help="only this hardware-database id")
    ls.add_argument("--format", choices=["table", "json"], default="table",
                    help="table (default) or json (the export's samples)")
    ls.set_defaults(func=run_calibration_list)
    ex = sub.add_parser("export", parents=[common], help="write the samples to a JSON file",
                        description="Write the samples as a JSON export (version 2), "
                                    "atomically: a reader sees the old file or the new one.")
    ex.add_argument("file", metavar="FILE", help="JSON file to write")
    ex.add_argument("--gpu", metavar="ID", default=None, help="only this hardware-database id")
    ex.set_defaults(func=run_calibration_export)
    im = sub.add_parser("import", parents=[common], help="add samples from JSON files",
                        description="Add the samples of exports or old calibration.json files; "
                                    "a sample already stored is skipped.")
    im.add_argument("files", metavar="FILE", nargs="+", help="export or old calibration file")
    im.set_defaults(func=run_calibration_import)


def run_calibration_path(a) -> int:
    from ..measure import calibration
    st = calibration.status(a.calibration)
    if a.format == "json":
        emit(dump_json(st))
        return 0
    emit(f"{st['path']} ({st['mode']}, {st['samples']} samples)")
    if st["notice"]:
        emit(f"note: {st['notice']}")
    return 0


def run_calibration_list(a) -> int:
    from ..measure import calibration
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
                     sw["cuda"] or "-", sw["driver"] or "-", _fmt(s["estimate"][q]),
                     _fmt(s["measured"][q]), "-" if r is None else f"{r:.3f}"])
    emit(table(rows, ["recorded", "host", "gpu", "torch", "cuda", "driver", "estimate",
                      "measured", "ratio"], "llllllrrr"))
    return 0


def run_calibration_export(a) -> int:
    from ..measure import calibration
    n = calibration.export(a.file, a.gpu, a.calibration)
    emit(f"wrote {n} samples to {a.file}")
    return 0


def run_calibration_import(a) -> int:
    from ..measure import calibration
    for f in a.files:
        added, known = calibration.import_file(f, a.calibration)
        emit(f"{f}: added {added} samples ({known} already there)")
    return 0
