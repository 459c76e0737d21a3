"""The hardware database: load and validate hwdb/*.toml, look devices up by id, alias or NVML name.

Data lives in `vramplan/hwdb/` (TOML, one `[[device]]` table per accelerator, sources in
`sources.toml`); hwdb/README.md documents the schema, units and conventions. A user database
($VRAMPLAN_HWDB or `--hwdb PATH`, file or directory) goes through the same validation and is
merged; a device id that clashes with a built-in one is an error unless it says `override = true`.
"""
from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from .errors import HwdbError, UnknownIdError
from .units import GB, UnitError, bandwidth_gbs as _bus_bandwidth, parse_bytes, parse_rate

ENV_VAR = "VRAMPLAN_HWDB"
BANDWIDTH_TOLERANCE = 0.05   # |stated / (bus * rate / 8) - 1| above this needs a bandwidth_note

# ---------------------------------------------------------------- schema
# field -> (python types, required, (min, max) or None). "size" is a string such as "80 GiB".
_NUM = (int, float)
DEVICE_FIELDS: dict[str, tuple] = {
    "id": (str, True, None), "vendor": (str, True, None), "name": (str, True, None),
    "aliases": (list, False, None), "architecture": (str, True, None), "chip": (str, False, None),
    "compute_capability": (str, False, None), "year": (int, True, (2010, 2030)),
    "form_factor": (str, True, None),
    "memory": ("size", True, (1 * 2**30, 2**40)), "usable_memory": ("size", False, (2**30, 2**40)),
    "memory_type": (str, True, None), "unified_memory": (bool, False, None),
    "bus_width_bits": (int, False, (64, 16384)), "data_rate_gbps": (_NUM, False, (0.5, 40.0)),
    "bandwidth_gbs": (_NUM, True, (50.0, 20000.0)), "bandwidth_note": (str, False, None),
    "achievable_bandwidth_fraction": (_NUM, False, (0.3, 1.0)),
    "achievable_bandwidth_note": (str, False, None),
    "tdp_w": (int, False, (5, 2000)), "note": (str, False, None),
    "sources": (list, True, None), "field_sources": (dict, False, None),
    "override": (bool, False, None),
    "hierarchy": (dict, False, None), "throughput": (dict, False, None),
    "sparse_throughput": (dict, False, None), "interconnect": (dict, False, None),
}
HIERARCHY_FIELDS = {
    "compute_units": (int, True, (1, 100000)), "compute_unit_kind": (str, True, None),
    "regfile_kib_per_unit": (_NUM, False, (1, 4096)),
    "l1_smem_kib_per_unit": (_NUM, False, (1, 4096)),
    "l2_mib": (_NUM, False, (0.25, 1024)), "llc_mib": (_NUM, False, (1, 4096)),
    "llc_kind": (str, False, None),
}
# dense TFLOPS / TOPS; fp16/bf16/fp8 accumulate in FP32, *_acc16 in FP16 (see hwdb/README.md)
THROUGHPUT_KEYS = ("fp64", "fp32", "fp32_matrix", "tf32", "fp16", "fp16_acc16", "bf16",
                   "fp8", "fp8_acc16", "int8", "fp4")
THROUGHPUT_FIELDS = {k: (_NUM, False, (0.01, 40000.0)) for k in THROUGHPUT_KEYS}
INTERCONNECT_FIELDS = {
    "scaleup": (str, False, None), "scaleup_links": (int, False, (1, 64)),
    "scaleup_gbs_per_direction": (_NUM, False, (1.0, 10000.0)),
    "pcie_gen": (int, False, (1, 7)), "pcie_lanes": (int, False, (1, 32)),
    "host_link": (str, False, None),
}
SUBTABLES = {"hierarchy": HIERARCHY_FIELDS, "throughput": THROUGHPUT_FIELDS,
             "sparse_throughput": THROUGHPUT_FIELDS, "interconnect": INTERCONNECT_FIELDS}
# values that no general datasheet states: each needs its own entry in field_sources
OWN_SOURCE_FIELDS = ("usable_memory", "achievable_bandwidth_fraction")
SYSTEM_FIELDS: dict[str, tuple] = {
    "id": (str, True, None), "vendor": (str, True, None), "name": (str, True, None),
    "gpu": (str, True, None), "gpu_count": (int, True, (1, 1024)),
    "gpus_per_node": (int, True, (1, 64)), "topology": (str, True, None),
    "link": (str, True, None), "link_gbs_per_direction": (_NUM, True, (1.0, 10000.0)),
    "switch_chips": (int, False, (0, 1024)), "host_memory": ("size", False, (2**30, 2**50)),
    "scaleout": (str, False, None), "note": (str, False, None), "sources": (list, True, None),
    "field_sources": (dict, False, None), "override": (bool, False, None),
}
SOURCE_FIELDS = {"id": (str, True, None), "title": (str, True, None), "url": (str, False, None),
                 "doc": (str, False, None), "publisher": (str, False, None),
                 "note": (str, False, None)}
FRACTION_FIELDS = {"memory_type": (str, True, None), "fraction": (_NUM, True, (0.3, 1.0)),
                   "note": (str, True, None), "sources": (list, True, None)}
DIFF_FIELDS = {"id": (str, True, None), "field": (str, True, None),
               "reference": (_NUM, True, None), "hwdb": (_NUM, False, None),
               "reason": (str, True, None)}
MEMORY_TYPES = ("HBM2", "HBM2e", "HBM3", "HBM3e", "GDDR6", "GDDR6X", "GDDR7", "GDDR5",
                "GDDR5X", "LPDDR5", "LPDDR5X")
TOP_KEYS = {"device", "system", "source", "achievable_bandwidth", "reference_diff"}


@dataclass(frozen=True)
class Source:
    """A document that values come from: datasheet, whitepaper, vendor page, measurement log."""
    id: str
    title: str
    url: str | None = None
    doc: str | None = None
    publisher: str | None = None
    note: str | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Device:
    """One accelerator variant. Bytes are ints; bandwidth is decimal GB/s; throughput dense."""
    id: str
    vendor: str
    name: str
    memory_bytes: int
    usable_memory_bytes: int | None
    memory_type: str
    bus_width_bits: int | None
    data_rate_gbps: float | None
    bandwidth_gbs: float
    bandwidth_note: str | None
    achievable_bandwidth_fraction: float
    achievable_bandwidth_note: str | None
    architecture: str
    chip: str | None
    compute_capability: str | None
    compute_units: int | None
    hierarchy: dict = field(default_factory=dict)
    throughput: dict = field(default_factory=dict)
    sparse_throughput: dict = field(default_factory=dict)
    interconnect: dict = field(default_factory=dict)
    tdp_w: int | None = None
    year: int | None = None
    form_factor: str | None = None
    unified_memory: bool = False
    note: str | None = None
    aliases: tuple[str, ...] = ()
    sources: tuple[Source, ...] = ()
    field_sources: dict = field(default_factory=dict)
    file: str = ""

    def __hash__(self) -> int:
        return hash(("Device", self.id))

    @property
    def usable_bytes(self) -> int:
        """What a job can allocate at most: the driver-reported total when known, else nominal."""
        return self.usable_memory_bytes if self.usable_memory_bytes is not None else self.memory_bytes

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_gbs * GB

    def to_dict(self) -> dict:
        """The JSON of `vramplan gpus --format json` (SCENARIO.md 'Hardware list')."""
        d = {
            "id": self.id, "vendor": self.vendor, "name": self.name,
            "memory_bytes": self.memory_bytes, "usable_memory_bytes": self.usable_memory_bytes,
            "memory_type": self.memory_type, "unified_memory": self.unified_memory,
            "bus_width_bits": self.bus_width_bits, "data_rate_gbps": self.data_rate_gbps,
            "bandwidth_gbs": self.bandwidth_gbs, "bandwidth_note": self.bandwidth_note,
            "achievable_bandwidth_fraction": self.achievable_bandwidth_fraction,
            "achievable_bandwidth_note": self.achievable_bandwidth_note,
            "architecture": self.architecture, "chip": self.chip,
            "compute_capability": self.compute_capability, "compute_units": self.compute_units,
            "hierarchy": dict(self.hierarchy), "throughput_tflops_dense": dict(self.throughput),
            "throughput_tflops_sparse": dict(self.sparse_throughput),
            "interconnect": dict(self.interconnect), "tdp_w": self.tdp_w, "year": self.year,
            "form_factor": self.form_factor, "note": self.note, "aliases": list(self.aliases),
            "sources": [s.to_dict() for s in self.sources],
            "field_sources": {k: list(v) for k, v in self.field_sources.items()},
        }
        return d


@dataclass(frozen=True)
class System:
    """A multi-GPU node or rack: which GPU, how many, and how they are linked."""
    id: str
    vendor: str
    name: str
    gpu: str
    gpu_count: int
    gpus_per_node: int
    topology: str
    link: str
    link_gbs_per_direction: float
    switch_chips: int | None = None
    host_memory_bytes: int | None = None
    scaleout: str | None = None
    note: str | None = None
    sources: tuple[Source, ...] = ()
    file: str = ""

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("sources", "file")}
        d["sources"] = [s.to_dict() for s in self.sources]
        return d


def _squash(name: str) -> str:
    """Lookup key: lowercase alphanumerics, without a leading 'nvidia' (NVML names carry it)."""
    s = re.sub(r"[^0-9a-z]+", "", name.lower())
    return s[6:] if s.startswith("nvidia") and len(s) > 6 else s


class HardwareDB:
    """Devices, systems and sources, with lookup by id / alias / NVML name."""

    def __init__(self, devices, systems, sources, reference_diffs=(), files=()):
        self.devices: list[Device] = list(devices)
        self.systems: list[System] = list(systems)
        self.sources: dict[str, Source] = dict(sources)
        self.reference_diffs: list[dict] = list(reference_diffs)
        self.files: list[str] = list(files)
        self._index: dict[str, Device] = {}
        for d in self.devices:
            for key in (d.id, d.name, *d.aliases):
                self._index.setdefault(key.lower().strip(), d)
                self._index.setdefault(_squash(key), d)

    def __len__(self) -> int:
        return len(self.devices)

    def __iter__(self):
        return iter(self.devices)

    @property
    def ids(self) -> list[str]:
        return [d.id for d in self.devices]

    def get(self, name: str) -> Device:
        """By id, name, alias or NVML name; case-insensitive, 'NVIDIA ' prefix optional."""
        if isinstance(name, Device):
            return name
        key = str(name).strip()
        dev = self._index.get(key.lower()) or self._index.get(_squash(key))
        if dev is None:
            raise UnknownIdError("GPU", key, self.ids)
        return dev

    def get_system(self, name: str) -> System:
        for s in self.systems:
            if s.id.lower() == str(name).strip().lower():
                return s
        raise UnknownIdError("system", str(name), [s.id for s in self.systems])

    def filter(self, vendor: str | None = None, min_memory: int | str | None = None,
               min_bandwidth: float | str | None = None) -> list[Device]:
        """Devices of `vendor` (case-insensitive, prefix ok) with at least `min_memory` nominal
        bytes (int or text like '40GiB') and `min_bandwidth` (bytes/s or text like '2 TB/s')."""
        mem = parse_bytes(min_memory) if min_memory is not None else None
        bw = parse_rate(min_bandwidth) if min_bandwidth is not None else None
        out = []
        for d in self.devices:
            if vendor and not d.vendor.lower().startswith(vendor.strip().lower()):
                continue
            if mem is not None and d.memory_bytes < mem:
                continue
            if bw is not None and d.bandwidth_gbs * GB < bw * (1 - 1e-9):
                continue
            out.append(d)
        return out

    @property
    def vendors(self) -> list[str]:
        return sorted({d.vendor for d in self.devices})


# ---------------------------------------------------------------- loading
_extra_path: str | None = None


def builtin_path():
    """The shipped hwdb directory (a Traversable: works from wheel, editable install, checkout)."""
    return resources.files("vramplan") / "hwdb"


def set_extra_path(path: str | os.PathLike | None) -> None:
    """Add a user database (file or directory) on top of the built-in one (`--hwdb PATH`)."""
    global _extra_path
    _extra_path = os.fspath(path) if path is not None else None
    _cached_db.cache_clear()


def default_db() -> HardwareDB:
    """The built-in database plus $VRAMPLAN_HWDB and set_extra_path(), parsed once."""
    return _cached_db(os.environ.get(ENV_VAR) or None, _extra_path)


@lru_cache(maxsize=4)
def _cached_db(env: str | None, extra: str | None) -> HardwareDB:
    return load_hwdb(None, [p for p in (env, extra) if p])


def get_gpu(name: str) -> Device:
    """A device from the default database by id / alias / NVML name; UnknownIdError if none."""
    return default_db().get(name)


def load_hwdb(path=None, extra_paths: Iterable | None = None) -> HardwareDB:
    """Load and validate `path` (default: the built-in hwdb) plus extra user paths
    (default: $VRAMPLAN_HWDB and set_extra_path()). Raises HwdbError on any defect."""
    if extra_paths is None:
        extra_paths = [p for p in (os.environ.get(ENV_VAR), _extra_path) if p]
    files: list[tuple[str, dict, bool]] = []   # (label, parsed, user)
    base = builtin_path() if path is None else Path(path)
    label = "hwdb" if path is None else str(base)
    files += [(lbl, data, False) for lbl, data in _read_tree(base, label)]
    for p in extra_paths:
        p = Path(p)
        if not p.exists():
            raise HwdbError(str(p), None, None, "no such file or directory")
        files += [(label, data, True) for label, data in _read_tree(p, str(p))]
    return _build(files)


def _read_tree(root, label: str, top: bool = True) -> list[tuple[str, dict]]:
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
            out += _read_tree(child, sub, top=False)
        elif child.name.endswith(".toml"):
            out.append((sub, _parse(child, sub)))
    if top and not out:
        raise HwdbError(label, None, None, "a directory with no *.toml file in it")
    return out


MAX_TOML_BYTES = 4_000_000   # the whole built-in database is ~100 kB


def _parse(f, label: str) -> dict:
    """One TOML file -> dict; HwdbError naming the file for anything unreadable."""
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
        return tomllib.loads(text)
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


def _build(files: list[tuple[str, dict, bool]]) -> HardwareDB:
    sources: dict[str, Source] = {}
    raw_devices, raw_systems, fractions, diffs = [], [], {}, []
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
        for raw in _tables(data, "reference_diff", file):
            diffs.append(_check_table(raw, DIFF_FIELDS, file, raw.get("id")))
        raw_devices += [(file, r, user) for r in _tables(data, "device", file)]
        raw_systems += [(file, r, user) for r in _tables(data, "system", file)]
    for f, file in fractions.values():
        _require_sources(f["sources"], sources, file, f["memory_type"], "sources")

    devices: dict[str, Device] = {}
    names: dict[str, tuple[str, str]] = {}     # squashed name -> (device id, file)
    for file, raw, user in raw_devices:
        dev = _device(raw, file, sources, fractions)
        if dev.id in devices:
            prev = devices[dev.id]
            if not (user and raw.get("override")):
                raise HwdbError(file, dev.id, "id", f"duplicate device id (also in {prev.file}); "
                                                    "a user file may set override = true")
            names = {k: v for k, v in names.items() if v[0] != dev.id}
        elif raw.get("override"):
            raise HwdbError(file, dev.id, "override", "override = true but no such built-in id")
        for n in {dev.id, dev.name, *dev.aliases}:
            key = _squash(n)
            if key in names and names[key][0] != dev.id:
                raise HwdbError(file, dev.id, "aliases", f"name {n!r} already belongs to "
                                f"'{names[key][0]}' ({names[key][1]})")
            names[key] = (dev.id, file)
        devices[dev.id] = dev
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
    return HardwareDB(devices.values(), systems.values(), sources, diffs,
                      [f for f, _, _ in files])


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


def _device(raw: dict, file: str, sources: dict, fractions: dict) -> Device:
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
    _check_consistency(t, file, did)
    cc = t.get("compute_capability")
    if cc is not None and not re.fullmatch(r"\d+\.\d+", cc):
        raise HwdbError(file, did, "compute_capability", f"{cc!r} is not like '8.0'")
    if t["vendor"] == "NVIDIA" and cc is None:
        raise HwdbError(file, did, "compute_capability", "missing for an NVIDIA device")
    frac, frac_note = t.get("achievable_bandwidth_fraction"), t.get("achievable_bandwidth_note")
    if frac is None:
        f = fractions.get(t["memory_type"])
        if f is None:
            raise HwdbError(file, did, "achievable_bandwidth_fraction",
                            f"no value and no default for memory type {t['memory_type']!r}")
        frac, frac_note = f[0]["fraction"], frac_note or f[0]["note"]
    hier = t.get("hierarchy", {})
    return Device(
        id=did, vendor=t["vendor"], name=t["name"], memory_bytes=t["memory"],
        usable_memory_bytes=t.get("usable_memory"), memory_type=t["memory_type"],
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
