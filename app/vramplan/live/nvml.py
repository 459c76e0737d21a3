"""NVML reads (nvidia-ml-py, import name `pynvml`): no CUDA context is created.

Each per-GPU field degrades to None when its NVML call fails (as nvitop does); only a missing
library or driver raises UnavailableError.
"""
from __future__ import annotations

import os
import time
from typing import Iterator

from ..errors import UnavailableError


def _nvml():
    try:
        import pynvml
    except ImportError as exc:
        raise UnavailableError("no NVML bindings: pip install nvidia-ml-py") from exc
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise UnavailableError(f"no NVIDIA driver or GPU (NVML: {_msg(exc)})") from None
    except OSError as exc:  # a broken libnvidia-ml
        raise UnavailableError(f"no NVIDIA driver or GPU (NVML: {exc})") from None
    return pynvml


def _msg(exc) -> str:
    try:
        return str(exc) or type(exc).__name__
    except Exception:  # pynvml errors format through the library itself
        return type(exc).__name__


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def _try(nv, fn, *args):
    try:
        return fn(*args)
    except nv.NVMLError:
        return None
    except (AttributeError, TypeError):  # an older nvidia-ml-py without the call
        return None


def _processes(nv, h) -> list[dict]:
    out, seen = [], set()
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        f = getattr(nv, fn, None)
        procs = _try(nv, f, h) if f else None
        for p in procs or []:
            if p.pid in seen:
                continue
            seen.add(p.pid)
            used = getattr(p, "usedGpuMemory", None)
            out.append({"pid": int(p.pid), "used_bytes": int(used) if isinstance(used, int) else None,
                        "self": p.pid == os.getpid()})
    return out


def _match(name: str | None) -> str | None:
    if not name:
        return None
    try:
        from ..hardware import get_gpu
        return get_gpu(name).id
    except Exception:  # unknown to the database, or hardware not importable
        return None


def probe() -> list[dict]:
    """One dict per GPU: name, hardware-database id, memory total/free/used, bus width, clocks,
    PCIe, NVLink links, driver / CUDA versions and other processes' memory."""
    nv = _nvml()
    try:
        n = nv.nvmlDeviceGetCount()
        driver = _s(_try(nv, nv.nvmlSystemGetDriverVersion))
        cuda = _try(nv, getattr(nv, "nvmlSystemGetCudaDriverVersion", None))
        cuda = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None
        gpus = []
        for i in range(n):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            name = _s(_try(nv, nv.nvmlDeviceGetName, h))
            mem = _try(nv, nv.nvmlDeviceGetMemoryInfo, h)
            pci = _try(nv, nv.nvmlDeviceGetPciInfo, h)
            links = 0
            for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
                st = _try(nv, getattr(nv, "nvmlDeviceGetNvLinkState", None), h, link)
                if st is None:
                    break
                links += int(st == 1)
            procs = _processes(nv, h)
            gpus.append({
                "index": i, "name": name, "hwdb_id": _match(name),
                "uuid": _s(_try(nv, nv.nvmlDeviceGetUUID, h)),
                "pci_bus_id": _s(pci.busId) if pci is not None else None,
                "memory_total_bytes": int(mem.total) if mem else None,
                "memory_free_bytes": int(mem.free) if mem else None,
                "memory_used_bytes": int(mem.used) if mem else None,
                "bus_width_bits": _try(nv, getattr(nv, "nvmlDeviceGetMemoryBusWidth", None), h),
                "memory_clock_max_mhz": _try(nv, nv.nvmlDeviceGetMaxClockInfo, h,
                                             getattr(nv, "NVML_CLOCK_MEM", 2)),
                "memory_clock_mhz": _try(nv, nv.nvmlDeviceGetClockInfo, h,
                                         getattr(nv, "NVML_CLOCK_MEM", 2)),
                "sm_clock_max_mhz": _try(nv, nv.nvmlDeviceGetMaxClockInfo, h,
                                         getattr(nv, "NVML_CLOCK_SM", 1)),
                "pcie_generation": _try(nv, nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
                "pcie_width": _try(nv, nv.nvmlDeviceGetCurrPcieLinkWidth, h),
                "pcie_max_generation": _try(nv, nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
                "nvlink_active_links": links,
                "processes": procs,
                "other_processes_bytes": sum(p["used_bytes"] or 0 for p in procs if not p["self"]),
                "driver_version": driver, "cuda_driver_version": cuda,
            })
        return gpus
    finally:
        _try(nv, nv.nvmlShutdown)


def nvml_process_used(index: int = 0, pid: int | None = None) -> int | None:
    """Device memory NVML attributes to process `pid` (default: this one) on GPU `index`."""
    nv = _nvml()
    try:
        h = nv.nvmlDeviceGetHandleByIndex(index)
        pid = os.getpid() if pid is None else pid
        for p in _processes(nv, h):
            if p["pid"] == pid:
                return p["used_bytes"]
        return None
    finally:
        _try(nv, nv.nvmlShutdown)


def monitor(interval: float = 1.0, count: int | None = None, index: int | None = None,
            sleep=time.sleep) -> Iterator[dict]:
    """Samples {t, index, used, free, total, utilization} per GPU every `interval` seconds
    (`count` rounds, forever when None), as data for a chart."""
    nv = _nvml()
    try:
        n = nv.nvmlDeviceGetCount()
        idx = [index] if index is not None else list(range(n))
        handles = [(i, nv.nvmlDeviceGetHandleByIndex(i)) for i in idx]
        t0, k = time.monotonic(), 0
        while count is None or k < count:
            now = time.monotonic() - t0
            for i, h in handles:
                mem = _try(nv, nv.nvmlDeviceGetMemoryInfo, h)
                util = _try(nv, nv.nvmlDeviceGetUtilizationRates, h)
                yield {"t": round(now, 3), "index": i,
                       "used_bytes": int(mem.used) if mem else None,
                       "free_bytes": int(mem.free) if mem else None,
                       "total_bytes": int(mem.total) if mem else None,
                       "utilization_pct": int(util.gpu) if util else None}
            k += 1
            if count is None or k < count:
                sleep(interval)
    finally:
        _try(nv, nv.nvmlShutdown)
