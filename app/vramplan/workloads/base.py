"""What a workload reports to the estimator: its footprint at the peak, per GPU.

Each workload module turns (Scenario, ModelSpec, Device) into a Footprint: live bytes at the
peak moment by component (not a sum of each component's maximum), where the peak sits, the
biggest single allocation (for the allocator model) and the bytes it moves (for bandwidth).
`overhead.py` turns a Footprint into reserved and device-used bytes; `estimate.py` assembles.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..scenario.keys import EXTRA_DEFAULTS
from ..vec import is_array, to_int
from ..vocab import COMPONENTS  # noqa: F401 (a workload may add its own, e.g. "frame_buffers")


@dataclass
class Footprint:
    """Live bytes per GPU at the workload's peak, and what it moves."""

    components: dict[str, int]
    """bytes live at the peak moment, by component; their sum is peak allocated bytes"""
    peak_phase: str
    """where the peak sits: 'load', 'forward', 'backward', 'optimizer-step', 'prefill', 'decode',
    'text-encode', 'denoise', 'vae-decode', 'frame', ..."""
    phases: dict[str, dict[str, int]] = field(default_factory=dict)
    """optional: components at the top of each phase, for charts and for explaining the peak"""
    largest_allocation: int = 0
    """biggest single tensor live at the peak (allocator rounding / fragmentation)"""
    allocator: str = "torch"
    """'torch' (PyTorch caching allocator: reserved > allocated) or 'driver' (graphics / raw
    CUDA: no caching allocator, reserved == allocated)"""
    bandwidth: dict = field(default_factory=dict)
    """bytes moved: e.g. {'bytes_per_step': ..., 'bytes_per_token': ...}; estimate.py adds rates"""
    notes: list[str] = field(default_factory=list)
    """assumptions a user should know (framework convention, what is counted where)"""
    extra_device_bytes: dict[str, int] = field(default_factory=dict)
    """memory the process holds outside the allocator for this workload (e.g. NCCL buffers,
    CUDA graphs, pre-allocated engine pools) that overhead.py should add to device-used"""
    batch_capacity: int | None = None
    """for workloads whose memory does not grow with the batch (an engine's pre-allocated KV
    pool), the most sequences / items the plan can hold at once; max_batch_size reports it"""
    reserved_floor_bytes: int = 0
    """least the caching allocator holds at the peak, from the workload's allocation history
    (e.g. a sequence of ever larger buffers whose freed segments are too small to reuse);
    0 when the generic slack model suffices. Reserved = max(allocated + slack, this floor)."""
    ranks: dict[str, "Footprint"] = field(default_factory=dict)
    """optional: the footprint of each distinct rank when ranks differ (pipeline stages), by
    name; this footprint is the worst of them. estimate.py reports each in a `ranks` section"""
    stack: dict = field(default_factory=dict)
    """the software stack the plan names (`stack` key) and its mechanisms, each with its source
    and whether this plan applied it (workloads/stack_mechanisms.section); empty by default"""

    serving: dict = field(default_factory=dict)
    """a serving engine's start-up check and pool (workloads/transformer/engine.py
    `start_check`): engine_starts, reason, longest_context_tokens, concurrent_sequences, ...;
    estimate.py reports it as the `serving` section and a plan whose engine does not start
    does not fit"""

    @property
    def peak_allocated_bytes(self) -> int:
        return to_int(sum(self.components.values()))

    def __post_init__(self) -> None:
        for k, v in self.components.items():
            if is_array(v):     # a sweep's batch axis (vramplan.vec): int64 per element
                if (v < 0).any() or (v.dtype.kind != "i" and (to_int(v) != v).any()):
                    raise ValueError(f"component {k} must be non-negative ints of bytes")
                self.components[k] = to_int(v)
                continue
            if int(v) != v or v < 0:
                raise ValueError(f"component {k} must be a non-negative int of bytes, got {v!r}")
            self.components[k] = int(v)


def extra_of(scenario, task: str) -> dict:
    """The workload-specific keys of `task` (render targets, arrays, work buffers, ...): the
    task's defaults under what the scenario gives."""
    ex = EXTRA_DEFAULTS(task)
    ex.update(getattr(scenario, "extra", None) or {})
    return ex
