"""Parsing and validating hwdb TOML files into Devices, Systems and Sources."""
from __future__ import annotations

import math
import re
import tomllib
from typing import Any

from .. import safejson  # noqa: F401
from ..errors import HwdbError
from ..units import UnitError, bandwidth_gbs as _bus_bandwidth, parse_bytes
from .model import Device, Source, System, squash
from . import toml_cache
from .unified import USABLE_RULES, usable_by_rule
from .schema import (BANDWIDTH_TOLERANCE, DEVICE_FIELDS, DIFF_FIELDS, FRACTION_FIELDS,
                     MEMORY_TYPES, OWN_SOURCE_FIELDS, SOURCE_FIELDS, SUBTABLES, SYSTEM_FIELDS,
                     TOP_KEYS, GENERATION_FIELDS, CAPABILITIES)


def read_tree(root, label: str, top: bool = True) -> list[tuple[str, dict]]:
    """Parse every *.toml under root (a file or directory), sorted by path. A user directory
    holding no *.toml file is an error (a wrong --hwdb path would otherwise add nothing)."""
    if not root.is_dir():
        return [(label, _parse(root, label))]
    out = []
    try:
        children = sorted(root.iterdir(), key=lambda c: c.name)
    except OSError as exc:
        raise HwdbError(label, None, None, f"cannot read: {exc.strerror or exc}") from None
    for child in children:
        sub = f"{label}/{child.name}"
        if child.is_dir():
            out += read_tree(child, sub, top=False)
        elif child.name.endswith(".toml"):
            out.append((sub, _parse(child, sub)))
    if top and not out:
        raise HwdbError(label, None, None, "a directory with no *.toml file in it")
    return out


MAX_TOML_BYTES = 4_000_000   # the whole built-in database is ~100 kB


def _parse(f, label: str) -> dict:
    """One TOML file -> dict (through the parse cache, hardware/toml_cache.py); HwdbError
    naming the file for anything unreadable."""
    try:
        data = f.read_bytes()
    except OSError as exc:
        raise HwdbError(label, None, None, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_TOML_BYTES:
        raise HwdbError(label, None, None, f"{len(data):,} bytes is more than the "
                                           f"{MAX_TOML_BYTES:,} accepted for a hwdb file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise HwdbError(label, None, None, "not UTF-8 text (a binary file?)") from None
    if "\x00" in text:
        raise HwdbError(label, None, None, "not TOML text (a binary file?)")
    try:
        return toml_cache.loads(data, text)
    except tomllib.TOMLDecodeError as exc:
        raise HwdbError(label, None, None, f"malformed TOML: {exc}") from None
    except RecursionError:
        raise HwdbError(label, None, None, "malformed TOML: nested too deep") from None


def _check_table(raw: Any, spec: dict, file: str, dev: str | None, prefix: str = "") -> dict:
    """Types, required keys, ranges and unknown keys of one table; returns it with sizes parsed."""
    if not isinstance(raw, dict):
        raise HwdbError(file, dev, prefix.rstrip(".") or None, "must be a table")
    for key in raw:
        if key not in spec:
            raise HwdbError(file, dev, prefix + key,
                            f"unknown field (known: {', '.join(sorted(spec))})")
    out = {}
    for key, (typ, required, rng) in spec.items():
        name = prefix + key
        if key not in raw:
            if required:
                raise HwdbError(file, dev, name, "missing required field")
            continue
        v = raw[key]
        if typ == "size":
            if not isinstance(v, str):
                raise HwdbError(file, dev, name, f"must be a size string like '80 GiB', "
                                                 f"got {type(v).__name__} {v!r}")
            try:
                v = parse_bytes(v)
            except UnitError as exc:
                raise HwdbError(file, dev, name, str(exc)) from None
        else:
            ok = isinstance(v, typ) and not (isinstance(v, bool) and typ is not bool)
            if not ok:
                want = typ.__name__ if isinstance(typ, type) else "number"
                raise HwdbError(file, dev, name, f"must be {want}, got {type(v).__name__} {v!r}")
            if typ is list and not all(isinstance(x, str) and x for x in v):
                raise HwdbError(file, dev, name, "must be a list of non-empty strings")
            if isinstance(v, str) and not v.strip():
                raise HwdbError(file, dev, name, "must not be empty")
        if rng is not None and isinstance(v, (int, float)) and not isinstance(v, bool):
            if not math.isfinite(v) or not rng[0] <= v <= rng[1]:
                raise HwdbError(file, dev, name, f"{raw[key]!r} out of plausible range "
                                                 f"[{rng[0]}, {rng[1]}]")
        out[key] = v
    return out


def build(files: list[tuple[str, dict, bool]]) -> tuple:
    """Parsed files -> (devices, systems, sources, reference_diffs, file labels)."""
    sources, raw_devices, raw_systems, fractions, diffs, generations = _read_tables(files)
    devices = _devices(raw_devices, sources, fractions, generations)
    systems = _systems(raw_systems, devices, sources)
    return (list(devices.values()), list(systems.values()), sources, diffs,
                      [f for f, _, _ in files])


def _read_tables(files: list[tuple[str, dict, bool]]) -> tuple:
    """Every file's tables, checked field by field: (sources, raw devices, raw systems,
    bandwidth fractions, reference diffs, generations)."""
    sources: dict[str, Source] = {}
    raw_devices, raw_systems, fractions, diffs, generations = [], [], {}, [], {}
    for file, data, user in files:
        for key in data:
            if key not in TOP_KEYS:
                raise HwdbError(file, None, key, f"unknown top-level key (known: "
                                                 f"{', '.join(sorted(TOP_KEYS))})")
        for raw in _tables(data, "source", file):
            s = _check_table(raw, SOURCE_FIELDS, file, raw.get("id"))
            if s["id"] in sources:
                raise HwdbError(file, s["id"], "id", "duplicate source id")
            if not (s.get("url") or s.get("doc")):
                raise HwdbError(file, s["id"], "url", "a source needs a url or a doc reference")
            sources[s["id"]] = Source(**s)
        for raw in _tables(data, "achievable_bandwidth", file):
            f = _check_table(raw, FRACTION_FIELDS, file, raw.get("memory_type"))
            fractions[f["memory_type"]] = (f, file)
        for raw in _tables(data, "generation", file):
            g = _check_table(raw, GENERATION_FIELDS, file, raw.get("compute_capability"))
            generations[g["compute_capability"]] = (g, file)
        for raw in _tables(data, "reference_diff", file):
            diffs.append(_check_table(raw, DIFF_FIELDS, file, raw.get("id")))
        raw_devices += [(file, r, user) for r in _tables(data, "device", file)]
        raw_systems += [(file, r, user) for r in _tables(data, "system", file)]
    for f, file in fractions.values():
        _require_sources(f["sources"], sources, file, f["memory_type"], "sources")
    for g, file in generations.values():
        _require_sources(g["sources"], sources, file, g["compute_capability"], "sources")
    return sources, raw_devices, raw_systems, fractions, diffs, generations


def _devices(raw_devices: list, sources: dict, fractions: dict, generations: dict) -> dict:
    """{id: Device}: each [[device]] built, a user file's override replacing a built-in one;
    ids, names and aliases unique."""
    devices: dict[str, Device] = {}
    names: dict[str, tuple[str, str]] = {}     # squashed name -> (device id, file)
    for file, raw, user in raw_devices:
        dev = _device(raw, file, sources, fractions, generations)
        if dev.id in devices:
            prev = devices[dev.id]
            if not (user and raw.get("override")):
                raise HwdbError(file, dev.id, "id", f"duplicate device id (also in {prev.file}); "
                                                    "a user file may set override = true")
            names = {k: v for k, v in names.items() if v[0] != dev.id}
        elif raw.get("override"):
            raise HwdbError(file, dev.id, "override", "override = true but no such built-in id")
        for n in {dev.id, dev.name, *dev.aliases}:
            key = squash(n)
            if key in names and names[key][0] != dev.id:
                raise HwdbError(file, dev.id, "aliases", f"name {n!r} already belongs to "
                                f"'{names[key][0]}' ({names[key][1]})")
            names[key] = (dev.id, file)
        devices[dev.id] = dev
    return devices


def _systems(raw_systems: list, devices: dict, sources: dict) -> dict:
    """{id: System} of the [[system]] tables (their GPU a known device)."""
    systems: dict[str, System] = {}
    for file, raw, user in raw_systems:
        s = _check_table(raw, SYSTEM_FIELDS, file, raw.get("id"))
        if s["id"] in systems and not (user and s.get("override")):
            raise HwdbError(file, s["id"], "id", "duplicate system id")
        if s["gpu"] not in devices:
            raise HwdbError(file, s["id"], "gpu", f"unknown device id {s['gpu']!r}")
        if s["gpu_count"] % s["gpus_per_node"]:
            raise HwdbError(file, s["id"], "gpus_per_node", "gpu_count is not a multiple")
        srcs = _require_sources(s["sources"], sources, file, s["id"], "sources")
        for fname, ids in s.get("field_sources", {}).items():
            _require_sources(ids, sources, file, s["id"], f"field_sources.{fname}")
        systems[s["id"]] = System(
            id=s["id"], vendor=s["vendor"], name=s["name"], gpu=s["gpu"],
            gpu_count=s["gpu_count"], gpus_per_node=s["gpus_per_node"], topology=s["topology"],
            link=s["link"], link_gbs_per_direction=float(s["link_gbs_per_direction"]),
            switch_chips=s.get("switch_chips"), host_memory_bytes=s.get("host_memory"),
            scaleout=s.get("scaleout"), note=s.get("note"), sources=srcs, file=file)
    return systems


def _tables(data: dict, key: str, file: str) -> list:
    v = data.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise HwdbError(file, None, key, f"must be an array of tables: [[{key}]]")
    return v


def _require_sources(ids, sources, file, dev, fname) -> tuple[Source, ...]:
    ids = [ids] if isinstance(ids, str) else ids
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise HwdbError(file, dev, fname, "must be a non-empty list of source ids")
    for i in ids:
        if i not in sources:
            raise HwdbError(file, dev, fname, f"unknown source id {i!r} (not in sources.toml)")
    return tuple(sources[i] for i in ids)


def _device(raw: dict, file: str, sources: dict, fractions: dict, generations: dict) -> Device:
    """Validate one [[device]] table and build the Device."""
    did = raw.get("id") if isinstance(raw.get("id"), str) else None
    t = _check_table(raw, DEVICE_FIELDS, file, did)
    for sub, spec in SUBTABLES.items():
        if sub in t:
            t[sub] = _check_table(t[sub], spec, file, did, sub + ".")
    if not re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", did):
        raise HwdbError(file, did, "id", "ids are lowercase letters, digits, '-' and '.'")
    if t["memory_type"] not in MEMORY_TYPES:
        raise HwdbError(file, did, "memory_type", f"{t['memory_type']!r} is not one of "
                                                  f"{', '.join(MEMORY_TYPES)}")
    srcs = _require_sources(t["sources"], sources, file, did, "sources")
    fsrc = _field_sources(t, file, did, sources)
    _check_consistency(t, file, did)
    usable = _usable_memory(t, file, did)
    cc = t.get("compute_capability")
    if cc is not None and not re.fullmatch(r"\d+\.\d+", cc):
        raise HwdbError(file, did, "compute_capability", f"{cc!r} is not like '8.0'")
    if t["vendor"] == "NVIDIA" and cc is None:
        raise HwdbError(file, did, "compute_capability", "missing for an NVIDIA device")
    frac, frac_note = _bandwidth_fraction(t, file, did, fractions)
    hier = t.get("hierarchy", {})
    gen = _generation(t, file, did, cc, generations)
    caps = {c: gen[0][c] for c in CAPABILITIES if gen and c in gen[0]}
    return Device(
        max_threads_per_sm=gen[0]["max_threads_per_sm"] if gen else None, capabilities=caps,
        id=did, vendor=t["vendor"], name=t["name"], memory_bytes=t["memory"],
        usable_memory_bytes=usable, memory_type=t["memory_type"],
        usable_memory_rule=t.get("usable_memory_rule"),
        usable_memory_note=t.get("usable_memory_note"),
        bus_width_bits=t.get("bus_width_bits"),
        data_rate_gbps=float(t["data_rate_gbps"]) if "data_rate_gbps" in t else None,
        bandwidth_gbs=float(t["bandwidth_gbs"]), bandwidth_note=t.get("bandwidth_note"),
        achievable_bandwidth_fraction=float(frac), achievable_bandwidth_note=frac_note,
        architecture=t["architecture"], chip=t.get("chip"), compute_capability=cc,
        compute_units=hier.get("compute_units"), hierarchy=hier,
        throughput={k: float(v) for k, v in t.get("throughput", {}).items()},
        sparse_throughput={k: float(v) for k, v in t.get("sparse_throughput", {}).items()},
        interconnect=t.get("interconnect", {}), tdp_w=t.get("tdp_w"), year=t["year"],
        form_factor=t["form_factor"], unified_memory=t.get("unified_memory", False),
        note=t.get("note"), aliases=tuple(t.get("aliases", ())), sources=srcs,
        field_sources=fsrc, file=file)


def _field_sources(t: dict, file: str, did: str, sources: dict) -> dict:
    """{field: source ids} of a device's field_sources, each naming a value it has; a field
    no datasheet states (OWN_SOURCE_FIELDS) must have one."""
    fsrc: dict[str, tuple[str, ...]] = {}
    for fname, ids in t.get("field_sources", {}).items():
        head, _, tail = fname.partition(".")
        present = head in t and (not tail or (isinstance(t[head], dict) and tail in t[head]))
        if not present:
            raise HwdbError(file, did, f"field_sources.{fname}", "names no value of this device")
        _require_sources(ids, sources, file, did, f"field_sources.{fname}")
        fsrc[fname] = tuple([ids] if isinstance(ids, str) else ids)
    for fname in OWN_SOURCE_FIELDS:
        if fname in t and fname not in fsrc:
            raise HwdbError(file, did, fname, "value without source: no datasheet states it, so "
                                              "field_sources must name where it comes from")
    return fsrc


def _bandwidth_fraction(t: dict, file: str, did: str, fractions: dict) -> tuple:
    """(achievable bandwidth fraction, its note): the device's own, else its memory type's."""
    frac, frac_note = t.get("achievable_bandwidth_fraction"), t.get("achievable_bandwidth_note")
    if frac is None:
        f = fractions.get(t["memory_type"])
        if f is None:
            raise HwdbError(file, did, "achievable_bandwidth_fraction",
                            f"no value and no default for memory type {t['memory_type']!r}")
        frac, frac_note = f[0]["fraction"], frac_note or f[0]["note"]
    return frac, frac_note


def _generation(t: dict, file: str, did: str, cc, generations: dict):
    """The [[generation]] entry of the device's compute capability (required for NVIDIA)."""
    gen = generations.get(cc)
    if t["vendor"] == "NVIDIA" and cc is not None and gen is None:
        raise HwdbError(file, did, "compute_capability",
                        f"{cc} has no [[generation]] table (max_threads_per_sm, with a source): "
                        f"add one to the database")
    return gen


def _usable_memory(t: dict, file: str, did: str) -> int | None:
    """usable_memory, or what usable_memory_rule gives for `memory` (hardware/unified.py).
    A unified-memory device must say in usable_memory_note what share of RAM its GPU gets."""
    rule, unified = t.get("usable_memory_rule"), t.get("unified_memory", False)
    if rule is None:
        usable = t.get("usable_memory")
    elif rule not in USABLE_RULES:
        raise HwdbError(file, did, "usable_memory_rule", f"unknown rule {rule!r} (known: "
                                                         f"{', '.join(sorted(USABLE_RULES))})")
    elif not unified:
        raise HwdbError(file, did, "usable_memory_rule", "a rule for the GPU's share of RAM "
                                                         "needs unified_memory = true")
    elif "usable_memory" in t:
        raise HwdbError(file, did, "usable_memory_rule", "give usable_memory or "
                                                         "usable_memory_rule, not both")
    else:
        usable = usable_by_rule(rule, t["memory"])
    if unified and not t.get("usable_memory_note"):
        raise HwdbError(file, did, "usable_memory_note", "a unified-memory device must say "
                        "what share of RAM its GPU may use by default and how to change it")
    return usable


def _check_consistency(t: dict, file: str, did: str) -> None:
    """Cross-field sanity: usable <= nominal, bandwidth = bus x rate / 8, dense vs sparse."""
    if "usable_memory" in t and not 0.7 * t["memory"] <= t["usable_memory"] <= t["memory"]:
        raise HwdbError(file, did, "usable_memory", "must lie between 70% and 100% of memory")
    bus, rate, bw = t.get("bus_width_bits"), t.get("data_rate_gbps"), t["bandwidth_gbs"]
    if (bus is None or rate is None) and not t.get("bandwidth_note"):
        raise HwdbError(file, did, "bandwidth_note", "bus_width_bits or data_rate_gbps unknown: "
                                                     "bandwidth_note must say where bandwidth_gbs comes from")
    if bus is not None and rate is not None:
        calc = _bus_bandwidth(bus, rate)
        if abs(bw / calc - 1) > BANDWIDTH_TOLERANCE and not t.get("bandwidth_note"):
            raise HwdbError(file, did, "bandwidth_gbs", f"{bw} GB/s differs from bus_width_bits x "
                            f"data_rate_gbps / 8 = {calc:.1f} GB/s by more than 5% and there is "
                            "no bandwidth_note saying why")
    tp, sp = t.get("throughput", {}), t.get("sparse_throughput", {})
    order = [("tf32", "fp16"), ("fp16", "fp8"), ("bf16", "fp8"), ("fp16", "fp16_acc16"),
             ("fp8", "fp8_acc16"), ("fp8", "fp4"), ("fp64", "fp32")]
    for lo, hi in order:
        if lo in tp and hi in tp and tp[lo] > tp[hi] * 1.001:
            raise HwdbError(file, did, f"throughput.{lo}", f"dense {lo} {tp[lo]} exceeds {hi} "
                            f"{tp[hi]}: a sparse figure or a swapped value?")
    for k, v in sp.items():
        if k not in tp:
            raise HwdbError(file, did, f"sparse_throughput.{k}", "sparse value without the "
                                                                  "dense one")
        if not 1.9 <= v / tp[k] <= 2.1:
            raise HwdbError(file, did, f"throughput.{k}", f"dense {tp[k]} vs sparse {v}: 2:4 "
                            "sparsity doubles the dense rate; is the dense value a sparse figure?")
