"""Measurements on a real CUDA device: peak memory of a scenario, bandwidth, max batch, leaks.

The scenario's model is built exactly as `vramplan trace` builds it (measure/tracing, from the
same Scenario and ModelSpec: measure/buildable.py), with real tensors on the GPU, and run for two
steps. The figures are the ones the estimate predicts: `torch.cuda.max_memory_allocated` /
`max_memory_reserved` and NVML's used memory for this process; `measure()` returns them as a
`vramplan.result.MemoryReport` (source "measure", sections "measure" and "missing").
"""
from __future__ import annotations

import gc
import time

from ... import safejson
from ...errors import UnavailableError, VramplanError
from ...hardware import get_gpu
from ...result import MemoryReport
from ...units import format_size
from ...vocab import ALLOCATOR_SLACK, COMPONENTS
from ..buildable import scenario_of, spec_of


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


class MeasureError(VramplanError):
    """CUDA failed during a measurement (not out of memory); memory was released."""


def _cleanup(torch) -> None:
    gc.collect()
    try:
        torch.cuda.synchronize()
    except Exception:  # a failed kernel leaves the context unusable: still try to free
        pass
    torch.cuda.empty_cache()


def _release(torch, device: int) -> None:
    """Give the memory of a measurement back, whatever happened: drop the garbage, empty the
    caching allocator, reset the peak counters. Never raises (it runs in `finally`)."""
    gc.collect()
    for step in (lambda: torch.cuda.synchronize(device), torch.cuda.empty_cache,
                 lambda: torch.cuda.reset_peak_memory_stats(device)):
        try:
            step()
        except Exception:  # a broken context: free what can be freed
            pass


def _oom_types(torch) -> tuple:
    """torch.OutOfMemoryError (2.1+) / torch.cuda.OutOfMemoryError (1.13+), whichever exist."""
    found = [getattr(torch, "OutOfMemoryError", None),
             getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)]
    return tuple(dict.fromkeys(t for t in found if isinstance(t, type))) or (MemoryError,)


def _others(device: int) -> str:
    """"; other processes hold 78.00 GiB of it" (units.format_size) when NVML can tell."""
    try:
        from .nvml import probe
        g = [x for x in probe() if x["index"] == device]
        held = g[0]["other_processes_bytes"] if g else None
    except VramplanError:
        return ""
    return f"; other processes hold {format_size(held)} of it" if held else ""


def _failure(torch, exc: BaseException, what: str, device: int, free: int | None = None):
    """The one-line VramplanError for a CUDA failure during `what`."""
    msg = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, _oom_types(torch)) or "out of memory" in msg.lower():
        others = _others(device)
        if free is not None:
            at = f" ({format_size(free)} free at the start{others})"
        else:
            at = f" ({others[2:]})" if others else ""
        return OutOfMemory(f"CUDA out of memory {what}{at}: {msg}")
    if "busy or unavailable" in msg.lower():
        return UnavailableError(f"GPU {device} is busy or unavailable (taken by another process "
                                f"in exclusive compute mode?): {msg}")
    return MeasureError(f"CUDA failed {what}: {msg}")


def _check_device(torch, device: int) -> None:
    n = torch.cuda.device_count()
    if not 0 <= device < n:
        raise VramplanError(f"no CUDA device {device}: torch sees {n} (0..{n - 1})" if n else
                            "no CUDA device visible to torch")


def _free(torch, device: int) -> int | None:
    try:
        return int(torch.cuda.mem_get_info(device)[0])
    except Exception:  # a busy GPU can refuse even this; the error comes with the run
        return None


def _run_steps(scn, spec, steps: int, on_step=None):
    """Run the scenario's job on CUDA (tracing.runner; imports torch)."""
    from ..tracing.jobs import job_for
    from ..tracing.runner import run_job
    return run_job(job_for(scn, spec), mode="cuda", steps=steps, timeline=False, on_step=on_step)


def _scenario(scenario, batch: int | None = None):
    """(Scenario, ModelSpec) to run; `batch` replaces the batch size."""
    scn = scenario_of(scenario)
    if batch is not None:
        scn = scn.replace(batch_size=batch)
    return scn, spec_of(scn)


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
        entry["id"] = get_gpu(name).id
    except VramplanError:  # not in the hardware database
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


def _process_used(torch, device: int, missing: dict):
    """NVML's device memory figure for this process (None, with the reason in `missing`,
    where it cannot be read)."""
    try:   # NVML's figure for this process, read while the run's memory is still held
        from .nvml import nvml_process_used
        used = nvml_process_used(_nvml_index(torch, device))
        if used is None:
            missing["device_used_bytes"] = "NVML does not report this process's memory"
    except VramplanError as exc:
        used = None
        missing["device_used_bytes"] = str(exc)
    return used


def _report(torch, device: int, scn, comps: dict, peak_alloc: int, peak_res: int, used,
            stats: dict, run: dict, missing: dict) -> MemoryReport:
    """The MemoryReport of a finished run: the GPU, headroom against its usable memory and
    the "measure" section (`run`: steps, seconds, the counter's peak, snapshot path)."""
    keep = ("num_alloc_retries", "num_ooms", "allocated_bytes.all.peak", "reserved_bytes.all.peak",
            "active_bytes.all.peak", "inactive_split_bytes.all.peak", "segment.all.peak",
            "num_device_alloc", "num_device_free")
    gpu = _gpu_entry(torch, device)
    used = int(used) if used is not None else None
    headroom = None
    if used is not None and gpu["id"]:
        headroom = int(get_gpu(gpu["id"]).usable_bytes - used)
    sections = {"measure": {"steps": run["steps"], "seconds": run["seconds"],
                            "counter_peak_bytes": run["counter_peak_bytes"],
                            "counter_peak_phase": run["counter_peak_phase"],
                            "memory_stats": {k: int(stats[k]) for k in keep if k in stats},
                            "snapshot": run["snapshot"], **software()}}
    if missing:
        sections["missing"] = missing
    return MemoryReport(scenario=scn, gpu=gpu, components=comps, peak_allocated_bytes=peak_alloc,
                        peak_reserved_bytes=peak_res, device_used_bytes=used,
                        fits=None if headroom is None else headroom >= 0,
                        headroom_bytes=headroom, source="measure", sections=sections)


def measure(scenario, steps: int = 2, device: int = 0, snapshot: str | None = None) -> MemoryReport:
    """Run the scenario for `steps` steps on GPU `device`: a MemoryReport (source "measure")
    with a "measure" section (memory_stats, versions, snapshot path). What could not be read is
    None and named in a "missing" section ({what: why}). The memory the run took is given back
    whatever happens (out of memory, a CUDA error, Ctrl-C)."""
    if steps < 1:
        raise VramplanError(f"--steps must be at least 1, got {steps}")
    if isinstance(scenario, dict):
        safejson.check_value(scenario, "scenario")
    scn, spec = _scenario(scenario)
    torch = _torch_cuda()
    _check_device(torch, device)
    batch = scn.batch_size
    missing: dict = {}
    free = counted = failure = None
    try:
        torch.cuda.set_device(device)
        _cleanup(torch)
        free = _free(torch, device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        if snapshot:
            torch.cuda.memory._record_memory_history(max_entries=200_000)
        t0 = time.perf_counter()
        counted = _run_steps(scn, spec, steps)
        torch.cuda.synchronize(device)
        seconds = round(time.perf_counter() - t0, 3)
        peak_alloc = int(torch.cuda.max_memory_allocated(device) - base)
        peak_res = int(torch.cuda.max_memory_reserved(device))
        stats = torch.cuda.memory_stats(device)
        if snapshot:
            torch.cuda.memory._dump_snapshot(snapshot)
        used = _process_used(torch, device, missing)   # while the run's memory is held
        c = counted.counter
        comps = {k: int(c.peak_cat.get(k, 0)) for k in COMPONENTS}
        counter_peak, counter_phase = int(c.peak), c.peak_phase
    except VramplanError:
        raise
    except (RuntimeError, MemoryError, *_oom_types(torch)) as exc:
        # raised after `finally`, without the CUDA error (whose traceback holds the tensors)
        failure = _failure(torch, exc, f"at batch {batch if batch is not None else '?'}", device,
                           free)
    finally:
        if snapshot:
            try:
                torch.cuda.memory._record_memory_history(enabled=None)
            except Exception:  # recording was never started
                pass
        counted = None
        _release(torch, device)
    if failure is not None:
        raise failure
    comps[ALLOCATOR_SLACK] = peak_res - peak_alloc
    run = {"steps": steps, "seconds": seconds, "counter_peak_bytes": counter_peak,
           "counter_peak_phase": counter_phase, "snapshot": snapshot}
    return _report(torch, device, scn, comps, peak_alloc, peak_res, used, stats, run, missing)


def bandwidth(size_bytes: int | None = None, iters: int = 20, device: int = 0) -> dict:
    """Device-to-device copy of a large buffer timed with CUDA events (read + write counted)."""
    torch = _torch_cuda()
    _check_device(torch, device)
    a = b = failure = None
    try:
        free, _total = torch.cuda.mem_get_info(device)
        n = int(min(size_bytes or 2 << 30, free // 4)) // 4096 * 4096
        if n <= 0:
            others = _others(device)
            raise UnavailableError(f"no free memory on GPU {device} for the bandwidth buffer "
                                   + (f"({others[2:]})" if others else "(GPU busy?)"))
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
    except VramplanError:
        raise
    except (RuntimeError, MemoryError, *_oom_types(torch)) as exc:
        failure = _failure(torch, exc, "allocating the bandwidth buffers", device)
    finally:
        a = b = None
        _release(torch, device)
    if failure is not None:
        raise failure
    gbs = 2 * n * iters / (ms / 1e3) / 1e9
    gpu = _gpu_entry(torch, device)
    sheet = get_gpu(gpu["id"]).bandwidth_gbs if gpu["id"] else None
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
    trial = trial or (lambda b: measure(_scenario(scenario, b)[0], device=device))  # a report
    trials = []
    oom = (OutOfMemory, *_oom_types(torch))

    def ok(b: int) -> bool:
        try:
            peak = trial(b).peak_reserved_bytes
            good = peak <= budget
            trials.append({"batch_size": b, "fits": good, "peak_reserved_bytes": peak})
            return good
        except oom:
            trials.append({"batch_size": b, "fits": False, "peak_reserved_bytes": None})
            return False
        finally:
            _cleanup(torch)

    try:
        torch.cuda.set_per_process_memory_fraction(frac, device)
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
        try:
            torch.cuda.set_per_process_memory_fraction(1.0, device)
        finally:
            _cleanup(torch)
    return {"max_batch_size": best, "max_share": max_share, "budget_bytes": budget,
            "free_bytes_at_start": int(free), "trials": trials}


def leak_check(scenario, steps: int = 6, device: int = 0, tolerance: int = 1 << 20) -> dict:
    """Allocated memory after each step; growth after the second step is a leak."""
    scn, spec = _scenario(scenario)
    torch = _torch_cuda()
    _check_device(torch, device)
    after, failure = [], None
    try:
        _cleanup(torch)
        _run_steps(scn, spec, max(steps, 3),
                   on_step=lambda s: after.append(int(torch.cuda.memory_allocated(device))))
    except VramplanError:
        raise
    except (RuntimeError, MemoryError, *_oom_types(torch)) as exc:
        failure = _failure(torch, exc, "during the leak check", device)
    finally:
        _release(torch, device)
    if failure is not None:
        raise failure
    growth = (after[-1] - after[1]) / max(1, len(after) - 2)
    return {"allocated_after_step": after, "growth_per_step_bytes": int(growth),
            "leak": growth > tolerance}
