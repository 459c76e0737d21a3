"""`vramplan probe | measure | monitor`: the local GPU through NVML and CUDA.

Without a driver / CUDA each command says so in one line (`vramplan: error: ...`) and exits 2.
"""
from __future__ import annotations

import json
import sys

from ..units import format_bytes
from ._output import dump_json, emit, table


def _fmt(v):
    return "-" if v is None else format_bytes(v)


def register(subparsers) -> None:
    p = subparsers.add_parser("probe", help="local GPUs through NVML (no CUDA context)",
                              description="List local NVIDIA GPUs: memory, bus, clocks, PCIe, "
                                          "NVLink and other processes, matched to the hardware "
                                          "database. Creates no CUDA context.")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=run_probe)

    m = subparsers.add_parser("measure", help="run a scenario on the local GPU: measured peaks",
                              description="Build the scenario's model (as `trace` does) with "
                                          "real tensors on the GPU, run two steps and report "
                                          "torch.cuda peaks and NVML device-used memory.")
    m.add_argument("--scenario", metavar="FILE", required=True)
    m.add_argument("--device", type=int, default=0)
    m.add_argument("--steps", type=int, default=2)
    m.add_argument("--snapshot", metavar="PICKLE", help="write a memory snapshot for "
                   "https://pytorch.org/memory_viz")
    m.add_argument("--bandwidth", action="store_true", help="also time a device-to-device copy")
    m.add_argument("--max-batch", action="store_true", help="also search the largest batch")
    m.add_argument("--max-share", type=float, default=0.9,
                   help="never take more than this share of the free memory (default 0.9)")
    m.add_argument("--leak-check", action="store_true", help="also check growth over 6 steps")
    m.add_argument("--calibrate", action="store_true",
                   help="store measured/estimated ratios in the calibration file")
    m.add_argument("--format", choices=["table", "json"], default="table")
    m.set_defaults(func=run_measure)

    o = subparsers.add_parser("monitor", help="sample GPU memory over time (NVML)")
    o.add_argument("--interval", type=float, default=1.0)
    o.add_argument("--count", type=int, default=None, help="samples (default: until Ctrl-C)")
    o.add_argument("--device", type=int, default=None)
    o.add_argument("--format", choices=["table", "json"], default="table",
                   help="json: one JSON object a line")
    o.set_defaults(func=run_monitor)


def run_probe(args) -> int:
    from ..live import probe
    gpus = probe()
    if args.format == "json":
        emit(dump_json(gpus))
        return 0
    if not gpus:
        emit("no NVIDIA GPUs found")
        return 0
    rows = [[g["index"], g["name"], g["hwdb_id"] or "?", _fmt(g["memory_total_bytes"]),
             _fmt(g["memory_used_bytes"]), _fmt(g["memory_free_bytes"]),
             _fmt(g["other_processes_bytes"]), g["bus_width_bits"] or "-",
             f"gen{g['pcie_generation']} x{g['pcie_width']}" if g["pcie_generation"] else "-",
             g["nvlink_active_links"]] for g in gpus]
    emit(table(rows, ["#", "name", "hwdb id", "total", "used", "free", "other procs", "bus bits",
                      "pcie", "nvlink"], "llllrrrrll"))
    emit(f"driver {gpus[0]['driver_version']}, CUDA {gpus[0]['cuda_driver_version']}")
    return 0


def run_measure(args) -> int:
    from ..live import cuda
    from .trace import load_one
    scn = load_one(args.scenario)
    r = cuda.measure(scn, steps=args.steps, device=args.device, snapshot=args.snapshot)
    if args.bandwidth:
        r["bandwidth"] = cuda.bandwidth(device=args.device)
    if args.max_batch:
        r["max_batch"] = cuda.max_batch(scn, max_share=args.max_share, device=args.device)
        r["max_batch_size"] = r["max_batch"]["max_batch_size"]
    if args.leak_check:
        r["leak_check"] = cuda.leak_check(scn, device=args.device)
    try:
        from ..estimate import estimate
        e = estimate(scn).to_dict()
        r["estimate"] = e["per_gpu"]
        if args.calibrate:
            from .. import calibration
            calibration.record(e, r)
    except Exception as exc:  # estimate failing must not lose a measurement
        r["estimate_error"] = str(exc)
    if args.format == "json":
        emit(dump_json(r))
        return 0
    pg = r["per_gpu"]
    est = r.get("estimate", {})
    rows = [[k, _fmt(pg[k]), _fmt(est.get(k))] for k in
            ("peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes")]
    emit(f"measured on {r['gpu']['name']} (torch {r['measure']['torch']}, CUDA {r['measure']['cuda']})")
    emit(table(rows, ["", "measured", "estimate"], "lrr"))
    if "bandwidth" in r:
        b = r["bandwidth"]
        emit(f"bandwidth {b['measured_gbs']} GB/s (datasheet {b['datasheet_gbs']}, {b['fraction']})")
    if "max_batch" in r:
        emit(f"max batch {r['max_batch_size']} within {args.max_share:.0%} of free memory")
    if "leak_check" in r:
        lk = r["leak_check"]
        emit(f"leak check: {'LEAK' if lk['leak'] else 'ok'}, {format_bytes(lk['growth_per_step_bytes'])}/step")
    return 0


def run_monitor(args) -> int:
    from ..live import monitor
    for s in monitor(args.interval, args.count, args.device):
        if args.format == "json":
            emit(json.dumps(s))
        else:
            emit(f"{s['t']:8.1f}s  gpu{s['index']}  used {_fmt(s['used_bytes'])}  "
                 f"free {_fmt(s['free_bytes'])}  util {s['utilization_pct']}%")
        sys.stdout.flush()
    return 0
