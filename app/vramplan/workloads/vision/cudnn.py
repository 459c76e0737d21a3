"""cuDNN convolution workspaces: where they go and why the estimate counts none.

PyTorch allocates a convolution's cuDNN workspace from its caching allocator, so it is part of
`torch.cuda.max_memory_allocated` while the kernel runs (aten/src/ATen/native/cudnn/Conv_v7.cpp
and Conv_v8.cpp, PyTorch 1.x-2.x):

* `torch.backends.cudnn.benchmark = False` (PyTorch's default; mmdetection v2's): cuDNN's
  heuristics rank the algorithms and PyTorch takes the first whose workspace it can allocate.
  The implicit-GEMM algorithms the heuristics favour need little or none (cuDNN API reference:
  IMPLICIT_GEMM "does not require any extra memory workspace", IMPLICIT_PRECOMP_GEMM "some" for
  indices); FFT / Winograd-nonfused ones need much more, but their sizes are cuDNN-internal
  (`cudnnGetConvolution*WorkspaceSize`), with no published formula.
* `benchmark = True` (mmsegmentation v0's default_runtime, many training scripts): the first time
  a convolution shape is seen, `cudnnFind*` times every algorithm with one workspace sized to the
  largest request that fits in the largest free block, optimistically the free device memory
  (CUDACachingAllocator::cacheInfo), then empties the cache; PyTorch's comment there: "the above
  benchmarking uses a huge amount of memory, e.g. a few GBs". That transient depends on the free
  memory of the GPU, not on the model, and it appears only in the first step of each shape.

So the estimate counts no workspace; the note says so, with the step where it can appear.
"""
from __future__ import annotations

WORKSPACE_NOTE = (
    "cuDNN convolution workspaces are not counted: with cudnn.benchmark off (PyTorch's default) "
    "the heuristics' implicit-GEMM algorithms need little or none; with benchmark on, the first "
    "step of each input shape times every algorithm with a workspace up to the largest free "
    "block (PyTorch Conv_v7.cpp: 'a few GBs'), so a peak read over that first step can be "
    "higher by up to the GPU's free memory (workloads/vision/cudnn.py)")


def conv_net(graph) -> bool:
    """A network whose convolutions carry its compute (not only a ViT's patch embedding)."""
    return sum(1 for op in graph.ops if op.kind == "conv") > 1


def notes(graph) -> list[str]:
    return [WORKSPACE_NOTE] if conv_net(graph) else []
