"""One result shape: `MemoryReport`, what an estimate, a trace and a live measurement all
return, in the JSON shape of the scenario contract (`shared/SCENARIO.md`), with its `source`.

    {"scenario", "gpu", "per_gpu": {"components", "peak_allocated_bytes", "peak_reserved_bytes",
     "device_used_bytes"}, "fits", "headroom_bytes", "max_batch_size", "bandwidth",
     "recommendations", ...source-specific sections..., "source"}

Source-specific sections ride in `sections` (an estimate's `peak_phase`, `phases`, `notes`; a
trace's `trace`; a measurement's `measure` and `missing`) and are emitted after the contract
keys. A figure a source cannot give (a trace has no max batch) is None.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .vocab import SOURCES


def gpu_entry(gpu) -> dict | None:
    """The `gpu` object of the result JSON from a Device (or an already-made dict)."""
    if gpu is None or isinstance(gpu, dict):
        return gpu
    usable = getattr(gpu, "usable_bytes", None)
    out = {"id": gpu.id, "name": gpu.name, "memory_bytes": int(gpu.memory_bytes)}
    if usable is not None:
        out["usable_memory_bytes"] = int(usable)
    return out


def _ints(d: dict) -> dict:
    return {k: int(v) for k, v in d.items()}


def _opt_int(v) -> int | None:
    return None if v is None else int(v)


@dataclass
class MemoryReport:
    """Per-GPU memory of one plan, from one source ("estimate", "trace" or "measure")."""

    scenario: Any                        # a Scenario (or its dict)
    gpu: Any                             # a Device (or the result's gpu dict), None if unknown
    components: dict                     # bytes at the peak by component (vocab names)
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    device_used_bytes: int | None
    fits: bool | None = None
    headroom_bytes: int | None = None
    max_batch_size: int | None = None
    bandwidth: dict = field(default_factory=dict)
    recommendations: list = field(default_factory=list)
    source: str = "estimate"
    sections: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {self.source!r}")

    def to_dict(self) -> dict:
        """The contract's JSON: contract keys first, then the source's sections, then source."""
        scn = self.scenario.to_dict() if hasattr(self.scenario, "to_dict") else self.scenario
        out = {
            "scenario": scn,
            "gpu": gpu_entry(self.gpu),
            "per_gpu": {"components": _ints(self.components),
                        "peak_allocated_bytes": _opt_int(self.peak_allocated_bytes),
                        "peak_reserved_bytes": _opt_int(self.peak_reserved_bytes),
                        "device_used_bytes": _opt_int(self.device_used_bytes)},
            "fits": None if self.fits is None else bool(self.fits),
            "headroom_bytes": _opt_int(self.headroom_bytes),
            "max_batch_size": _opt_int(self.max_batch_size),
            "bandwidth": dict(self.bandwidth),
            "recommendations": list(self.recommendations),
        }
        out.update(self.sections)
        out["source"] = self.source
        return out
