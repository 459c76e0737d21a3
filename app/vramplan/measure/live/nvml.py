"""NVML reads (nvidia-ml-py, import name `pynvml`): no CUDA context is created.

Each per-GPU field degrades to None when its NVML call fails (as nvitop does); only a missing
library or driver raises UnavailableError.
"""
from __future__ import annotations

import os
import time
from typing import Iterator

from ...errors import UnavailableError, VramplanError
from ...hardware import get_gpu


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


QUIET_CODES = (2, 3, 13)   # NVML_ERROR_INVALID_ARGUMENT, _NOT_SUPPORTED, _FUNCTION_NOT_FOUND


def _quiet(exc) -> bool:
    """An NVML error that only means "this GPU / driver has no such reading"."""
    return getattr(exc, "value", None) in QUIET_CODES or "not supported" in _msg(exc).lower()


def _try(nv, fn, *args, missing: dict | None = None, field: str | None = None):
    """fn(*args), or None when NVML fails; a real failure (not "not supported") is noted in
    missing[field] so the caller can say what it could not read."""
    if fn is None:
        return None
    try:
        return fn(*args)
    except nv.NVMLError as exc:
        if missing is not None and field and not _quiet(exc):
            missing.setdefault(field, _msg(exc))
        return None
    except (AttributeError, TypeError):  # an older nvidia-ml-py without the call
        return None


def _processes(nv, h, missing: dict | None = None) -> list[dict]:
    out, seen = [], set()
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        procs = _try(nv, getattr(nv, fn, None), h, missing=missing, field="processes")
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
        return get_gpu(name).id
    except VramplanError:  # not in the hardware database
        return None


FIELDS = ("name", "hwdb_id", "uuid", "pci_bus_id", "memory_total_bytes", "memory_free_bytes",
          "memory_used_bytes", "bus_width_bits", "memory_clock_max_mhz", "memory_clock_mhz",
          "sm_clock_max_mhz", "pcie_generation", "pcie_width", "pcie_max_generation",
          "nvlink_active_links", "other_processes_bytes")


def _count(nv) -> int:
    try:
        return int(nv.nvmlDeviceGetCount())
    except nv.NVMLError as exc:
        raise UnavailableError(f"NVML cannot count the GPUs: {_msg(exc)}") from None


def probe() -> list[dict]:
    """One dict per GPU: name, hardware-database id, memory total/free/used, bus width, clocks,
    PCIe, NVLink links, driver / CUDA versions and other processes' memory. A reading NVML
    fails on is None and named in "missing" ({field: NVML's message}); a GPU NVML cannot open at
    all has only None readings and its "error"."""
    nv = _nvml()
    try:
        n = _count(nv)
        driver = _s(_try(nv, nv.nvmlSystemGetDriverVersion))
        cuda = _try(nv, getattr(nv, "nvmlSystemGetCudaDriverVersion", None))
        cuda = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None
        gpus = []
        for i in range(n):
            try:
                h = nv.nvmlDeviceGetHandleByIndex(i)
            except nv.NVMLError as exc:
                gpus.append({"index": i, **dict.fromkeys(FIELDS), "processes": [],
                             "driver_version": driver, "cuda_driver_version": cuda,
                             "missing": {}, "error": _msg(exc)})
                continue
            gpus.append(_gpu(nv, i, h, driver, cuda))
        return gpus
    finally:
        _try(nv, nv.nvmlShutdown)


def _gpu(nv, i: int, h, driver, cuda) -> dict:
    miss: dict = {}

    def rd(field, fn, *args):
        return _try(nv, fn, *args, missing=miss, field=field)
    name = _s(rd("name", nv.nvmlDeviceGetName, h))
    mem = rd("memory", nv.nvmlDeviceGetMemoryInfo, h)
    pci = rd("pci_bus_id", nv.nvmlDeviceGetPciInfo, h)
    links = 0
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        st = _try(nv, getattr(nv, "nvmlDeviceGetNvLinkState", None), h, link)
        if st is None:
            break
        links += int(st == 1)
    procs = _processes(nv, h, miss)
    mem_clock, sm_clock = getattr(nv, "NVML_CLOCK_MEM", 2), getattr(nv, "NVML_CLOCK_SM", 1)
    return {
        "index": i, "name": name, "hwdb_id": _match(name),
        "uuid": _s(rd("uuid", nv.nvmlDeviceGetUUID, h)),
        "pci_bus_id": _s(pci.busId) if pci is not None else None,
        "memory_total_bytes": int(mem.total) if mem else None,
        "memory_free_bytes": int(mem.free) if mem else None,
        "memory_used_bytes": int(mem.used) if mem else None,
        "bus_width_bits": rd("bus_width_bits", getattr(nv, "nvmlDeviceGetMemoryBusWidth", None), h),
        "memory_clock_max_mhz": rd("clocks", nv.nvmlDeviceGetMaxClockInfo, h, mem_clock),
        "memory_clock_mhz": rd("clocks", nv.nvmlDeviceGetClockInfo, h, mem_clock),
        "sm_clock_max_mhz": rd("clocks", nv.nvmlDeviceGetMaxClockInfo, h, sm_clock),
        "pcie_generation": rd("pcie", nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
        "pcie_width": rd("pcie", nv.nvmlDeviceGetCurrPcieLinkWidth, h),
        "pcie_max_generation": rd("pcie", nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
        "nvlink_active_links": links,
        "processes": procs,
        "other_processes_bytes": sum(p["used_bytes"] or 0 for p in procs if not p["self"]),
        "driver_version": driver, "cuda_driver_version": cuda,
        "missing": miss, "error": None,
    }


def missing_line(gpus: list[dict]) -> str | None:
    """What NVML could not read, in one line ("GPU 1: not readable (GPU is lost); GPU 0:
    memory, pcie not read (Unknown Error)"), or None."""
    parts = []
    for g in gpus:
        if g.get("error"):
            parts.append(f"GPU {g['index']}: not readable ({g['error']})")
        elif g.get("missing"):
            why = sorted(set(g["missing"].values()))
            parts.append(f"GPU {g['index']}: {', '.join(g['missing'])} not read ({'; '.join(why)})")
    return "; ".join(parts) or None


def nvml_process_used(index: int = 0, pid: int | None = None) -> int | None:
    """Device memory NVML attributes to process `pid` (default: this one) on GPU `index`."""
    nv = _nvml()
    try:
        try:
            h = nv.nvmlDeviceGetHandleByIndex(index)
        except nv.NVMLError as exc:
            raise UnavailableError(f"NVML cannot open GPU {index}: {_msg(exc)}") from None
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
    (`count` rounds, forever when None), as data for a chart. A reading NVML fails on is None,
    with NVML's message in "error"; the samples go on."""
    if interval < 0:
        raise VramplanError(f"--interval must be 0 or more seconds, got {interval}")
    if count is not None and count < 1:
        raise VramplanError(f"--count must be at least 1, got {count}")
    nv = _nvml()
    try:
        n = _count(nv)
        if n == 0:
            raise UnavailableError("no NVIDIA GPUs found")
        if index is not None and not 0 <= index < n:
            raise VramplanError(f"no GPU {index}: NVML sees {n} (0..{n - 1})")
        handles = []
        for i in [index] if index is not None else range(n):
            try:
                handles.append((i, nv.nvmlDeviceGetHandleByIndex(i)))
            except nv.NVMLError as exc:
                if index is not None or n == 1:
                    raise UnavailableError(f"NVML cannot open GPU {i}: {_msg(exc)}") from None
                handles.append((i, None))
        t0, k = time.monotonic(), 0
        while count is None or k < count:
            now = time.monotonic() - t0
            for i, h in handles:
                miss: dict = {}
                mem = _try(nv, nv.nvmlDeviceGetMemoryInfo, h, missing=miss, field="memory") \
                    if h is not None else None
                util = _try(nv, nv.nvmlDeviceGetUtilizationRates, h, missing=miss,
                            field="utilization") if h is not None else None
                err = "cannot open the GPU" if h is None else "; ".join(sorted(set(miss.values())))
                yield {"t": round(now, 3), "index": i,
                       "used_bytes": int(mem.used) if mem else None,
                       "free_bytes": int(mem.free) if mem else None,
                       "total_bytes": int(mem.total) if mem else None,
                       "utilization_pct": int(util.gpu) if util else None,
                       "error": err or None}
            k += 1
            if count is None or k < count:
                sleep(interval)
    finally:
        _try(nv, nv.nvmlShutdown)
