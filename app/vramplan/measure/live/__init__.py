"""The local GPU: NVML probe and monitor (no CUDA context), measured peaks, bandwidth, max batch.

`nvml`         probe() / monitor(): read memory and links through NVML only (nvidia-ml-py)
`cuda`         measure() (a MemoryReport, source "measure"), bandwidth(), max_batch(),
               leak_check(): real tensors on a CUDA device
`distributed`  per-rank peaks under torch.distributed (torchrun; gloo on CPU in the tests)

pynvml and torch are imported inside the functions. Every failure (no driver, no torch, no CUDA,
out of memory, a busy GPU) is an UnavailableError / VramplanError with one clear message.
"""
from .nvml import probe, monitor, nvml_process_used  # noqa: F401
from .cuda import measure, bandwidth, max_batch, leak_check  # noqa: F401
