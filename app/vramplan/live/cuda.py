"""Measurements on a real CUDA device: peak memory of a scenario, bandwidth, max batch, leaks.

The scenario's model is built exactly as `vramplan trace` builds it (vramplan.tracing), with
real tensors on the GPU, and run for two steps. The figures are the ones the estimate predicts:
`torch.cuda.max_memory_allocated` / `max_memory_reserved` and NVML's used memory for this process.
"""
from __future__ import annotations

import gc
import time

from ..errors import UnavailableError, VramplanError


class OutOfMemory(VramplanError):
    """The scenario did not fit (CUDA out of memory); memory was released before raising."""


def _torch_cuda():
    try:
        import torch
    except ImportError as exc:
        raise UnavailableError("no torch: pip install 'vramplan[torch]' with a CUDA build") from exc
    if not torch.cuda.is_available():
        raise UnavailableError(f"no CUDA device visible to torch {torch.__version__} "
                               f"(built with CUDA {torch.version.cuda or 'none'})")
    return torch


def _cleanup(torch) -> None:
    gc.collect()
    try:
        torch.cuda.synchronize()
    except Exception:  # a failed kernel leaves the context unusable: still try to free
        pass
    torch.cuda.empty_cache()


def _scenario(scenario, batch: int | None = None):
    from .. import trace
    scn = trace._scenario_obj(scenario)
    if batch is not None:
        scn = scn.replace(batch_size=batch) if hasattr(scn, "replace") else {**scn, "batch_size": batch}
    family, config, mid = trace.resolve_model(scn)
    family, config = trace._fit_family(family, config, mid)
    return scn, family, config


def _nvml_index(torch, device: int) -> int:
    try:
        p = torch.cuda.get_device_properties(device)
        bus = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0".lower()
        from .nvml import probe
        for g in probe():
            if (g["pci_bus_id"] or "").lower().endswith(bus[-12:]):
                return g["index"]
    except Exception:  # older torch without PCI ids, or NVML missing: same index
        pass
    return device


def _gpu_entry(torch, device: int) -> dict:
    name = torch.cuda.get_device_name(device)
    entry = {"id": None, "name": name, "memory_bytes": int(torch.cuda.get_device_properties(device).total_memory)}
    try:
        from ..hardware import get_gpu
        entry["id"] = get_gpu(name).id
    except Exception:  # not in the hardware database
        pass
    return entry


def software() -> dict:
    """Versions a calibration is keyed by."""
    out = {"torch": None, "cuda": None, "driver": None}
    try:
        import torch
        out["torch"], out["cuda"] = torch.__version__, torch.version.cuda
    except ImportError:
        pass
    try:
        from .nvml import probe
        g = probe()
        out["driver"] = g[0]["driver_version"] if g else None
    except VramplanError:
        pass
    return out


def measure(scenario, steps: int = 2, device: int = 0, snapshot: str | None = None) -> dict:
    """Run the scenario for `steps` steps on GPU `device`; the estimate JSON shape with
    "source": "measure" and a "measure" section (memory_stats, versions, snapshot path)."""
    torch = _torch_cuda()
    from ..tracing.runner import job_for, run_job
    scn, family, config = _scenario(scenario)
    torch.cuda.set_device(device)
    _cleanup(torch)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    if snapshot:
        torch.cuda.memory._record_memory_history(max_entries=200_000)
    t0 = time.perf_counter()
    try:
        counted = run_job(job_for(scn, family, config), mode="cuda", steps=steps, timeline=False)
        torch.cuda.synchronize(device)
        peak_alloc = torch.cuda.max_memory_allocated(device) - base
        peak_res = torch.cuda.max_memory_reserved(device)
        stats = torch.cuda.memory_stats(device)
        if snapshot:
            torch.cuda.memory._dump_snapshot(snapshot)
    except torch.OutOfMemoryError as exc:
        counted = None
        _cleanup(torch)
        raise OutOfMemory(f"CUDA out of memory at batch {getattr(scn, 'batch_size', '?')}: "
                          f"{str(exc).splitlines()[0]}") from None
    finally:
        if snapshot:
            torch.cuda.memory._record_memory_history(enabled=None)
    try:
        from .nvml import nvml_process_used
        used = nvml_process_used(_nvml_index(torch, device))
    except VramplanError:
        used = None
    c = counted.counter
    comps = {k: int(c.peak_cat.get(k, 0)) for k in
             ("weights", "gradients", "optimizer_states", "activations", "kv_cache", "temporary")}
    comps["allocator_slack"] = int(peak_res - peak_alloc)
    keep = ("num_alloc_retries", "num_ooms", "allocated_bytes.all.peak", "reserved_bytes.all.peak",
            "active_bytes.all.peak", "inactive_split_bytes.all.peak", "segment.all.peak",
            "num_device_alloc", "num_device_free")
    result = {
        "source": "measure",
        "scenario": scn.to_dict() if hasattr(scn, "to_dict") else scn,
        "gpu": _gpu_entry(torch, device),
        "per_gpu": {"components": comps, "peak_allocated_bytes": int(peak_alloc),
                    "peak_reserved_bytes": int(peak_res),
                    "device_used_bytes": int(used) if used is not None else None},
        "measure": {"steps": steps, "seconds": round(time.perf_counter() - t0, 3),
                    "counter_peak_bytes": int(c.peak), "counter_peak_phase": c.peak_phase,
                    "memory_stats": {k: int(stats[k]) for k in keep if k in stats},
                    "snapshot": snapshot, **software()},
    }
    del counted
    _cleanup(torch)
    return result


def bandwidth(size_bytes: int | None = None, iters: int = 20, device: int = 0) -> dict:
    """Device-to-device copy of a large buffer timed with CUDA events (read + write counted)."""
    torch = _torch_cuda()
    free, _total = torch.cuda.mem_get_info(device)
    n = int(min(size_bytes or 2 << 30, free // 4)) // 4096 * 4096
    if n <= 0:
        raise UnavailableError("no free GPU memory for the bandwidth buffer (GPU busy?)")
    a = b = None
    try:
        a = torch.empty(n, dtype=torch.uint8, device=device)
        b = torch.empty_like(a)
        b.copy_(a)
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            b.copy_(a)
        end.record()
        torch.cuda.synchronize(device)
        ms = start.elapsed_time(end)
    except torch.OutOfMemoryError:
        raise OutOfMemory("CUDA out of memory allocating the bandwidth buffers") from None
    finally:
        del a, b
        _cleanup(torch)
    gbs = 2 * n * iters / (ms / 1e3) / 1e9
    gpu = _gpu_entry(torch, device)
    sheet = None
    if gpu["id"]:
        from ..hardware import get_gpu
        sheet = get_gpu(gpu["id"]).bandwidth_gbs
    return {"gpu": gpu, "buffer_bytes": n, "iters": iters, "measured_gbs": round(gbs, 1),
            "datasheet_gbs": sheet, "fraction": round(gbs / sheet, 3) if sheet else None}


def max_batch(scenario, max_share: float = 0.9, limit: int = 4096, device: int = 0,
              trial=None) -> dict:
    """Largest batch that runs two steps without taking more than `max_share` of the memory free
    at the start: the allocator is capped (set_per_process_memory_fraction), an out-of-memory
    trial counts as a failure, and the cache is emptied after every trial."""
    if not 0 < max_share <= 1:
        raise VramplanError(f"--max-share must be in (0, 1], got {max_share}")
    torch = _torch_cuda()
    free, total = torch.cuda.mem_get_info(device)
    budget = int(max_share * free)
    frac = min(1.0, (budget + torch.cuda.memory_reserved(device)) / total)
    torch.cuda.set_per_process_memory_fraction(frac, device)
    trial = trial or (lambda b: measure(_scenario(scenario, b)[0], device=device))
    trials = []

    def ok(b: int) -> bool:
        try:
            r = trial(b)
            peak = r["per_gpu"]["peak_reserved_bytes"]
            good = peak <= budget
            trials.append({"batch_size": b, "fits": good, "peak_reserved_bytes": peak})
            return good
        except (OutOfMemory, torch.OutOfMemoryError):
            trials.append({"batch_size": b, "fits": False, "peak_reserved_bytes": None})
            return False
        finally:
            _cleanup(torch)

    try:
        if not ok(1):
            best = 0
        else:
            lo = 1
            while lo * 2 <= limit and ok(lo * 2):
                lo *= 2
            hi = min(lo * 2, limit + 1)        # lo fits, hi does not (or is past the limit)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if ok(mid) else (lo, mid)
            best = lo
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, device)
        _cleanup(torch)
    return {"max_batch_size": best, "max_share": max_share, "budget_bytes": budget,
            "free_bytes_at_start": int(free), "trials": trials}


def leak_check(scenario, steps: int = 6, device: int = 0, tolerance: int = 1 << 20) -> dict:
    """Allocated memory after each step; growth after the second step is a leak."""
    torch = _torch_cuda()
    from ..tracing.runner import job_for, run_job
    scn, family, config = _scenario(scenario)
    after = []
    _cleanup(torch)
    try:
        run_job(job_for(scn, family, config), mode="cuda", steps=max(steps, 3), timeline=False,
                on_step=lambda s: after.append(int(torch.cuda.memory_allocated(device))))
    except torch.OutOfMemoryError:
        _cleanup(torch)
        raise OutOfMemory("CUDA out of memory during the leak check") from None
    _cleanup(torch)
    growth = (after[-1] - after[1]) / max(1, len(after) - 2)
    return {"allocated_after_step": after, "growth_per_step_bytes": int(growth),
            "leak": growth > tolerance}
