"""The records of the hardware database."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..units import GB


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
    max_threads_per_sm: int | None = None
    capabilities: dict = field(default_factory=dict)
    """bf16 / fp8 / flash_attention_2 of the generation (hwdb/generations.toml); {} unknown"""
    hierarchy: dict = field(default_factory=dict)
    throughput: dict = field(default_factory=dict)
    sparse_throughput: dict = field(default_factory=dict)
    interconnect: dict = field(default_factory=dict)
    tdp_w: int | None = None
    year: int | None = None
    form_factor: str | None = None
    unified_memory: bool = False
    usable_memory_rule: str | None = None
    """how usable_memory_bytes follows from memory_bytes (hardware/unified.py), or None"""
    usable_memory_note: str | None = None
    """unified memory: the GPU's share of RAM, the OS default and how to raise it"""
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
            "usable_memory_rule": self.usable_memory_rule,
            "usable_memory_note": self.usable_memory_note,
            "bus_width_bits": self.bus_width_bits, "data_rate_gbps": self.data_rate_gbps,
            "bandwidth_gbs": self.bandwidth_gbs, "bandwidth_note": self.bandwidth_note,
            "achievable_bandwidth_fraction": self.achievable_bandwidth_fraction,
            "achievable_bandwidth_note": self.achievable_bandwidth_note,
            "architecture": self.architecture, "chip": self.chip,
            "compute_capability": self.compute_capability, "compute_units": self.compute_units,
            "capabilities": dict(self.capabilities), "hierarchy": dict(self.hierarchy), "throughput_tflops_dense": dict(self.throughput),
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


def squash(name: str) -> str:
    """Lookup key: lowercase alphanumerics, without a leading 'nvidia' (NVML names carry it)."""
    s = re.sub(r"[^0-9a-z]+", "", name.lower())
    return s[6:] if s.startswith("nvidia") and len(s) > 6 else s


@dataclass(frozen=True)
class DeviceTraits:
    """The few facts of a device the estimator reads (footprint, runtime, overhead, fit):
    a footprint computed from traits can be reused for every GPU that shares them, and a
    sweep can hold them as arrays. `traits_of(device)` reads them off a Device."""
    id: str
    vendor: str
    architecture: str
    compute_capability: str | None
    compute_units: int | None
    max_threads_per_sm: int | None
    usable_bytes: int
    bandwidth_gbs: float
    achievable_bandwidth_fraction: float
    throughput: tuple = ()
    """(dtype, dense TFLOPS) pairs of the datasheet (Device.throughput), sorted"""
    capabilities: tuple = ()
    """(capability, bool) pairs of the generation (Device.capabilities), sorted"""

    def tflops(self, dtype: str) -> float | None:
        """Dense datasheet TFLOPS (TOPS for int8) in `dtype`; None when the database has none."""
        return dict(self.throughput).get(dtype)

    def supports(self, capability: str) -> bool | None:
        """bf16 / fp8 / flash_attention_2 of the GPU's generation; None when unknown."""
        return dict(self.capabilities).get(capability)


def traits_of(device) -> DeviceTraits | None:
    """DeviceTraits of a Device (itself if already traits; None for None)."""
    if device is None or isinstance(device, DeviceTraits):
        return device
    return DeviceTraits(
        id=device.id, vendor=device.vendor, architecture=device.architecture,
        compute_capability=device.compute_capability, compute_units=device.compute_units,
        max_threads_per_sm=device.max_threads_per_sm, usable_bytes=device.usable_bytes,
        bandwidth_gbs=device.bandwidth_gbs,
        achievable_bandwidth_fraction=device.achievable_bandwidth_fraction,
        throughput=tuple(sorted((getattr(device, "throughput", None) or {}).items())),
        capabilities=tuple(sorted((getattr(device, "capabilities", None) or {}).items())))
