"""`vramplan gpus` (list / filter the hardware database) and `vramplan gpu ID` (one device)."""
from __future__ import annotations

from ..hardware import Device, default_db
from ..i18n import format_number
from ..units import GiB, MiB, UnitError, format_gbs, format_size, gib_number, parse_bytes, parse_rate
from ._output import add_format_arg, dump_json, emit, table, to_csv

HEADERS = ["id", "name", "memory_gib", "usable_gib", "memory_type", "bandwidth_gbs"]
# the dense throughput keys of the hardware database, in this order (others after, sorted);
# int8 / int4 are integer ops (TOPS), the rest floating point (TFLOPS)
DTYPE_ORDER = ("fp64", "fp32", "fp32_matrix", "tf32", "fp16", "fp16_acc16", "bf16", "fp8",
               "fp8_acc16", "int8", "fp4", "int4")


def dtypes_of(devices) -> list[str]:
    """Every dense throughput key any of `devices` has a figure for, in DTYPE_ORDER."""
    have = {k for d in devices for k, v in d.throughput.items() if v}
    return [k for k in DTYPE_ORDER if k in have] + sorted(have - set(DTYPE_ORDER))


def dtype_header(key: str) -> str:
    return f"{key}_tops" if key.startswith("int") else f"{key}_tflops"


def register(subparsers) -> None:
    p = subparsers.add_parser("gpus", help="list accelerators in the hardware database",
                              description="List accelerators, optionally filtered. memory_gib is "
                                          "the vendor's nominal capacity, usable_gib what a job "
                                          "can allocate (the driver's total where known, else "
                                          "nominal: the figure the estimate uses); bandwidth is "
                                          "decimal GB/s; one dense-throughput column per dtype "
                                          "the database knows for the devices listed.")
    p.add_argument("--vendor", help="NVIDIA, AMD, Intel, Google or Apple (case-insensitive)")
    p.add_argument("--min-memory", metavar="SIZE", help="at least this much memory, e.g. 40GiB")
    p.add_argument("--min-bandwidth", metavar="RATE", help="at least this bandwidth, e.g. '2 TB/s'")
    p.add_argument("--systems", action="store_true", help="list multi-GPU systems instead")
    add_format_arg(p)
    p.set_defaults(func=run_list)

    g = subparsers.add_parser("gpu", help="show one accelerator and its sources",
                              description="Show one accelerator by id, alias or NVML name.")
    g.add_argument("id", help="id, alias or NVML name, e.g. nvidia-a100-sxm4-80gb or 'NVIDIA H100 80GB HBM3'")
    add_format_arg(g, choices=("table", "json"))
    g.set_defaults(func=run_one)


def _row(d: Device, dtypes=(), text: bool = False) -> list:
    """One device's row: numbers for CSV; `text`: memory and bandwidth as every other table
    and the report print them (units.gib_number: '79.65', format_number: '3,350.0')."""
    mem, usable, bw = d.memory_bytes, d.usable_bytes, d.bandwidth_gbs
    cells = [gib_number(mem), gib_number(usable), format_number(bw, 1)] if text else \
        [round(mem / GiB, 2), round(usable / GiB, 2), bw]
    return [d.id, d.name, cells[0], cells[1], d.memory_type, cells[2]] + \
        [d.throughput.get(k) for k in dtypes] + [d.tdp_w]


def run_list(args) -> int:
    db = default_db()
    if args.systems:
        return _systems(db, args.format)
    # parse here so a bad value is a clear error naming the flag (exit 2) before filtering
    min_mem = _flag("--min-memory", parse_bytes, args.min_memory)
    min_bw = _flag("--min-bandwidth", parse_rate, args.min_bandwidth)
    devices = db.filter(vendor=args.vendor, min_memory=min_mem, min_bandwidth=min_bw)
    dtypes = dtypes_of(devices)
    headers = HEADERS + [dtype_header(k) for k in dtypes] + ["tdp_w"]
    if args.format == "json":   # the entry, and the usable bytes the estimate uses (the
        #                          driver's total where known, else nominal), as the table
        emit(dump_json([{**d.to_dict(), "usable_bytes": int(d.usable_bytes)} for d in devices]))
    elif args.format == "csv":
        emit(to_csv([_row(d, dtypes) for d in devices], headers))
    else:
        emit(table([_row(d, dtypes, text=True) for d in devices], headers,
                   align="llrrlr" + "r" * (len(dtypes) + 1)))
        emit(f"{len(devices)} of {len(db)} devices")
    return 0


def _flag(name: str, parse, text):
    if text is None:
        return None
    try:
        return parse(text)
    except UnitError as exc:
        raise UnitError(f"{name}: {exc}") from None


def _systems(db, fmt: str) -> int:
    headers = ["id", "name", "gpu", "gpus", "per_node", "link", "link_gbs_per_direction"]
    rows = [[s.id, s.name, s.gpu, s.gpu_count, s.gpus_per_node, s.link, s.link_gbs_per_direction]
            for s in db.systems]
    if fmt == "json":
        emit(dump_json([s.to_dict() for s in db.systems]))
    elif fmt == "csv":
        emit(to_csv(rows, headers))
    else:
        emit(table(rows, headers, align="lllrrlr"))
    return 0


def run_one(args) -> int:
    d = default_db().get(args.id)
    if args.format == "json":
        emit(dump_json(d.to_dict()))
        return 0
    emit(describe(d))
    return 0


def describe(d: Device) -> str:
    """A readable multi-line summary of one device, ending with its sources."""
    lines = [f"{d.name}  ({d.id})", ""]

    def kv(key, value):
        if value not in (None, "", {}, []):
            lines.append(f"  {key:<22} {value}")
    kv("vendor", d.vendor)
    kv("architecture", f"{d.architecture}" + (f" ({d.chip})" if d.chip else ""))
    kv("compute capability", d.compute_capability)
    kv("year / form factor", f"{d.year} / {d.form_factor}")
    kv("memory", f"{format_size(d.memory_bytes)} {d.memory_type} ({d.memory_bytes} bytes)"
       + (" unified" if d.unified_memory else ""))
    if d.usable_memory_bytes:
        kv("usable (GPU share)" if d.unified_memory else "usable (driver)",
           f"{format_size(d.usable_memory_bytes)} = {d.usable_memory_bytes / MiB:.0f} MiB as "
           f"nvidia-smi says it ({d.usable_memory_bytes} bytes)"
           + (f" = {d.usable_memory_bytes / d.memory_bytes:.1%} of RAM" if d.unified_memory else ""))
    kv("GPU share of RAM", d.usable_memory_note)
    bus = f"{d.bus_width_bits}-bit" if d.bus_width_bits else "bus ?"
    rate = f"{d.data_rate_gbps} Gbps/pin" if d.data_rate_gbps else "rate ?"
    kv("bandwidth", f"{format_gbs(d.bandwidth_gbs)} ({bus} x {rate})")
    kv("bandwidth note", d.bandwidth_note)
    kv("achievable fraction", f"{d.achievable_bandwidth_fraction:g}"
       + (f"  [{d.achievable_bandwidth_note}]" if d.achievable_bandwidth_note else ""))
    h = d.hierarchy
    if h:
        kv("compute units", f"{h.get('compute_units')} {h.get('compute_unit_kind', '')}".strip())
        kv("per unit", ", ".join(f"{k.replace('_kib_per_unit', '')} {v:g} KiB" for k, v in h.items()
                                if k.endswith("_kib_per_unit")))
        kv("caches", ", ".join(f"{k[:-4].upper()} {v:g} MiB" for k, v in h.items()
                              if k.endswith("_mib")) + (f" ({h['llc_kind']})" if "llc_kind" in h else ""))
    if d.throughput:
        kv("dense TFLOPS/TOPS", ", ".join(f"{k} {v:g}" for k, v in d.throughput.items()))
    if d.sparse_throughput:
        kv("sparse (2:4)", ", ".join(f"{k} {v:g}" for k, v in d.sparse_throughput.items()))
    ic = d.interconnect
    if ic.get("scaleup"):
        bw = ic.get("scaleup_gbs_per_direction")
        kv("scale-up", ic["scaleup"] + (f", {format_gbs(bw)} per direction" if bw else ""))
    if ic.get("host_link"):
        kv("host link", ic["host_link"])
    if ic.get("pcie_gen"):
        kv("PCIe", f"Gen{ic['pcie_gen']} x{ic.get('pcie_lanes', '?')}")
    kv("TDP", f"{d.tdp_w} W" if d.tdp_w else None)
    kv("aliases", ", ".join(d.aliases))
    kv("note", d.note)
    lines += ["", "Sources:"]
    for s in d.sources:
        lines.append(f"  [{s.id}] {s.title}" + (f" ({s.doc})" if s.doc else ""))
        if s.url:
            lines.append(f"      {s.url}")
    for fname, ids in d.field_sources.items():
        lines.append(f"  {fname}: " + ", ".join(ids))
    return "\n".join(lines)
