"""Scenario + GPU -> Estimate: components at the peak, the three peak figures, fit, max batch,
bandwidth. The one function the CLI, sweeps and the UI call (kept well under 10 ms)."""
from __future__ import annotations

from dataclasses import dataclass, field

from . import overhead
from .hardware import traits_of
from .result import MemoryReport
from .errors import ScenarioError
from .workloads.base import Footprint
from .workloads.dispatch import footprint as workload_footprint

MAX_BATCH_CAP = 1 << 20


@dataclass
class Estimate(MemoryReport):
    """The analytic MemoryReport (source "estimate"), with the workload's footprint."""

    footprint: Footprint | None = None
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """Exactly the JSON of SCENARIO.md, plus peak_phase, phases, notes and source."""
        self.sections = {
            "peak_phase": self.footprint.peak_phase,
            "phases": {k: dict(v) for k, v in self.footprint.phases.items()},
            "notes": list(self.notes)}
        return super().to_dict()


def _scenario(s):
    from .scenario import Scenario
    if isinstance(s, Scenario):
        return s
    if isinstance(s, dict):
        return Scenario.from_dict(s)
    raise ScenarioError("scenario", f"expected a Scenario or a dict, got {type(s).__name__}")


def _device(sc, gpu):
    from .hardware import Device, get_gpu
    if isinstance(gpu, Device):
        return gpu
    return get_gpu(gpu or sc.gpu)


def _spec(sc):
    from .catalog import get_model, spec_from_architecture
    if sc.model:
        return get_model(sc.model)
    if sc.architecture:
        return spec_from_architecture(sc.architecture)
    return None


def _figures(sc, dev, spec):
    """(footprint, components, allocated, reserved, device_used) of one scenario."""
    dev = traits_of(dev)
    fp = workload_footprint(sc, spec, dev)
    allocated = fp.peak_allocated_bytes
    reserved = overhead.reserved_bytes(fp, sc)
    slack = reserved - allocated
    used = overhead.device_used_bytes(fp, sc, dev, reserved)
    comps = {k: 0 for k in ("weights", "gradients", "optimizer_states", "activations",
                            "kv_cache", "temporary")}
    comps.update(fp.components)
    comps["cuda_context"] = used["cuda_context"]
    comps["allocator_slack"] = slack
    for k, v in used.items():
        if k not in ("cuda_context", "total") and v:
            comps[k] = v
    return fp, comps, allocated, reserved, used["total"]


def _fits(used: int, dev) -> bool:
    return used <= dev.usable_bytes


def estimate(scenario, gpu=None, *, with_max_batch: bool = True) -> Estimate:
    """Estimate one scenario on one GPU (default: the scenario's `gpu`)."""
    sc = _scenario(scenario)
    dev = _device(sc, gpu)
    spec = _spec(sc)
    fp, comps, alloc, reserved, used = _figures(sc, dev, spec)
    if fp.batch_capacity is not None:
        mb = fp.batch_capacity if _fits(used, dev) else 0
    else:
        mb = max_batch_size(sc, dev, spec=spec) if with_max_batch else 0
    bw = _bandwidth(fp, dev)
    notes = list(fp.notes) + [
        "components sum to peak_allocated_bytes except cuda_context, allocator_slack and other "
        "non-torch keys: reserved = allocated + allocator_slack; device_used = reserved + "
        "cuda_context + nccl/cuda_graphs/paged states"]
    return Estimate(scenario=sc, gpu=dev, footprint=fp, components=comps,
                    peak_allocated_bytes=alloc, peak_reserved_bytes=reserved,
                    device_used_bytes=used, fits=_fits(used, dev),
                    headroom_bytes=int(dev.usable_bytes - used), max_batch_size=mb,
                    bandwidth=bw, notes=notes, source="estimate")


def max_batch_size(scenario, gpu=None, *, spec=None) -> int:
    """Largest batch whose device_used fits the GPU (0 if batch 1 does not); bisection over the
    same estimate (memory is monotone in batch)."""
    sc = _scenario(scenario)
    dev = _device(sc, gpu)
    spec = spec if spec is not None else _spec(sc)

    def fits(b: int) -> bool:
        try:
            s2 = sc.replace(batch_size=b)
        except ScenarioError:
            return False
        return _fits(_figures(s2, dev, spec)[4], dev)

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= MAX_BATCH_CAP and fits(hi):
        lo, hi = hi, hi * 2
    if hi > MAX_BATCH_CAP:
        return MAX_BATCH_CAP
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _bandwidth(fp: Footprint, dev) -> dict:
    """Bytes moved and the time / rate they bound, against datasheet and achievable bandwidth.

    Keys: bytes_per_step, bytes_per_token (decode), tokens_per_step, datasheet_bandwidth_gbs,
    achievable_bandwidth_gbs, min_step_time_s (bytes_per_step / achievable), max_tokens_per_s
    (decode: tokens_per_step / min_step_time_s), min_step_time_datasheet_s."""
    bw = dict(fp.bandwidth)
    peak = float(dev.bandwidth_gbs) * 1e9
    ach = peak * float(dev.achievable_bandwidth_fraction or 0.9)
    bw["datasheet_bandwidth_gbs"] = round(peak / 1e9, 1)
    bw["achievable_bandwidth_gbs"] = round(ach / 1e9, 1)
    step = bw.get("bytes_per_step")
    if step and ach > 0:
        bw["min_step_time_s"] = step / ach
        bw["min_step_time_datasheet_s"] = step / peak
        if bw.get("tokens_per_step"):
            bw["max_tokens_per_s"] = bw["tokens_per_step"] / (step / ach)
    return bw
