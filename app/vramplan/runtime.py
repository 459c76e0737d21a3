"""The runtime's memory outside PyTorch's allocator and the software era it implies: the CUDA
context by GPU generation and module-loading mode, NCCL communicator buffers.

Reads only device traits (`vramplan.hardware.DeviceTraits` or a Device): compute capability,
SM count, max resident threads per SM, vendor, architecture. An early stage: the serving
engine's KV pool (a workload) is sized after the non-torch memory, and the overhead stage adds
it to reserved memory.
"""
from __future__ import annotations

from .parallel import nccl_bytes as parallel_nccl_bytes

MiB = 2**20


def _cc(device) -> float | None:
    try:
        return float(device.compute_capability) if device and device.compute_capability else None
    except (TypeError, ValueError):
        return None


def legacy_stack(scenario, device) -> bool:
    """Assumed software era. Pre-Ampere GPUs (compute capability < 8.0) are assumed to run the
    torch 1.x / CUDA 10-11 stacks they were benchmarked with: eager CUDA module loading, Adam as
    a per-tensor loop, zero_grad() to zeros. Options 'legacy-stack' / 'modern-stack' override."""
    opts = set(getattr(scenario, "options", ()) or ())
    if "legacy-stack" in opts:
        return True
    if "modern-stack" in opts:
        return False
    cc = _cc(device)
    return cc is not None and cc < 8.0


# The context reserves a local-memory stack per resident thread: SMs x max resident threads per
# SM (the hardware database's [[generation]] tables, from the CUDA programming guide) x 1 KiB
# (cudaLimitStackSize default, CUDA runtime API reference).
LOCAL_STACK_BYTES = 1024
# a device whose traits lack SM counts (a user's hwdb entry without hierarchy) is taken as an
# A100: 108 SMs (A100 whitepaper) x 2048 threads (compute capability 8.0)
A100_SMS, A100_THREADS_PER_SM = 108, 2048
_DRIVER_BASE = 200 * MiB        # driver + runtime state, page tables, printf/malloc heaps
_MODULES_EAGER = 700 * MiB      # torch + cuBLAS/cuDNN kernel images loaded at init (CUDA < 11.7
                                # or CUDA_MODULE_LOADING=EAGER); the A-cases measured 1343 MiB
                                # on V100 with torch ~1.10, the B-notes 0.7-0.9 GiB on torch 1.4
_MODULES_LAZY = 150 * MiB       # kernels loaded on first use (lazy loading, CUDA >= 11.7)
_LIBS_LAZY = 512 * MiB          # cuBLAS/cuBLASLt kernels and workspaces once matmuls run
                                # (vLLM logs non-torch 1.8 GiB on H100, HF/optimum ~1.3 GiB A100)


def cuda_context_bytes(device, scenario=None) -> int:
    """CUDA context + library memory outside PyTorch's allocator, by GPU generation and loading
    mode (DESIGN: ~0.3-0.6 GiB with lazy module loading, more without)."""
    if device is None or getattr(device, "vendor", "NVIDIA").lower() not in ("nvidia",):
        return 0 if device is None else 256 * MiB  # ROCm/others: runtime context, unmeasured
    sms = device.compute_units or A100_SMS
    threads = device.max_threads_per_sm or A100_THREADS_PER_SM
    local = sms * threads * LOCAL_STACK_BYTES
    if legacy_stack(scenario, device):
        return _DRIVER_BASE + local + _MODULES_EAGER
    libs = _LIBS_LAZY if (scenario is None or getattr(scenario, "task", "") != "load") else 0
    return _DRIVER_BASE + local + _MODULES_LAZY + libs


def nccl_bytes(layout, device=None) -> int:
    """NCCL buffers with several GPUs: 0.5 GiB per communicator; NVLink-SHARP (NVLS) buffers on
    Hopper+ NVSwitch systems add ~1.25 GiB (vLLM TP2 on H100: non-torch +1.8 GiB)."""
    n = parallel_nccl_bytes(layout)
    arch = (getattr(device, "architecture", "") or "").lower()
    if n and any(x in arch for x in ("hopper", "blackwell")) and layout.tensor > 1:
        n += 1280 * MiB
    return n
