"""CUDA's `roi_align` for traces (`--kernels cuda`): what torchvision's compiled kernel keeps.

torchvision's C++ ops do not load with the pinned CPU torch (`libs.py`), so `roi_align` runs
torchvision's pure-Python fallback `torchvision.ops.roi_align._roi_align`, which gathers every
bilinear sample of every RoI into one [K, C, PH, PW, IY, IX] tensor (its own comment: "when
run in eager mode, it uses a lot of memory"), wrapped in `torch.compile` on first use (a
compile of tens of seconds on CPU, and whatever its graph saves for backward). A GPU runs the
compiled C++/CUDA kernel instead (torchvision `csrc/ops/cuda/roi_align_kernel.cu`,
`csrc/ops/autograd/roi_align_kernel.cpp`):

* forward writes only its [K, C, PH, PW] output; autograd's `ROIAlignFunction` saves the rois
  and the input's shape, not the input;
* backward allocates `grad_input = at::zeros({N, C, H, W})` and adds every sample's share into
  it (atomicAdd); nothing of the size of the samples;
* under CUDA autocast (`csrc/ops/autocast/roi_align_kernel.cpp`) input and rois are cast to
  fp32 for the call and the output back to the input's dtype.

`RoIAlign` is an autograd function that keeps just that: the rois. Its values come from
torchvision's own fallback, eager (not compiled), `CHUNK` RoIs at a time: in forward without grad; in backward as the
vector-Jacobian product of the fallback at a zero input (roi_align is linear in its input, so
the product does not depend on the input's values). Those chunks, the zero input and each
chunk's input-sized gradient are temporaries of this emulation that a GPU does not have; with
CHUNK RoIs they are small next to the fallback's whole-K gather.
"""
from __future__ import annotations

import torch

CHUNK = 32        # RoIs per fallback call


class RoIAlign(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, rois, spatial_scale, ph, pw, sampling_ratio, aligned, fallback):
        ctx.save_for_backward(rois)
        ctx.call = (tuple(input.shape), spatial_scale, ph, pw, sampling_ratio, aligned, fallback)
        out = input.new_empty((rois.shape[0], input.shape[1], ph, pw))
        for i in range(0, rois.shape[0], CHUNK):
            out[i:i + CHUNK] = fallback(input, rois[i:i + CHUNK], spatial_scale, ph, pw,
                                        sampling_ratio, aligned)
        return out

    @staticmethod
    def backward(ctx, grad):
        rois, = ctx.saved_tensors
        shape, scale, ph, pw, ratio, aligned, fallback = ctx.call
        if not ctx.needs_input_grad[0]:     # no gradient to make (nothing allocated)
            return (None,) * 8
        grad_input = grad.new_zeros(shape)
        zero = grad.new_zeros(shape).requires_grad_(True)
        with torch.enable_grad():
            for i in range(0, rois.shape[0], CHUNK):
                part = fallback(zero, rois[i:i + CHUNK], scale, ph, pw, ratio, aligned)
                g, = torch.autograd.grad(part, zero, grad[i:i + CHUNK])
                grad_input += g
                del part, g
        return (grad_input,) + (None,) * 7


def cuda_roi_align(fallback, count=None):
    """A drop-in for torchvision's `_roi_align(input, rois, spatial_scale, pooled_height,
    pooled_width, sampling_ratio, aligned)` that allocates as the CUDA kernel does; `count(what)`
    is told of each call."""
    def roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio,
                  aligned):
        if count is not None:
            count("roi_align->cuda")
        dtype = input.dtype
        if torch.is_autocast_enabled(input.device.type) and dtype in (torch.float16,
                                                                      torch.bfloat16):
            with torch.autocast(input.device.type, enabled=False):
                out = RoIAlign.apply(input.float(), rois.float(), spatial_scale, pooled_height,
                                     pooled_width, sampling_ratio, aligned, fallback)
            return out.to(dtype)
        return RoIAlign.apply(input, rois, spatial_scale, pooled_height, pooled_width,
                              sampling_ratio, aligned, fallback)
    roi_align.vramplan_cuda = True
    return roi_align


class Patched:
    """While active, torchvision's `roi_align` takes `cuda_roi_align` (nested uses are fine:
    the outermost one patches and counts); nothing happens when torchvision is not imported."""
    depth = 0
    original = None

    def __init__(self, count=None):
        self.count = count

    def __enter__(self):
        import sys
        mod = sys.modules.get("torchvision.ops.roi_align")
        if mod is not None:
            if Patched.depth == 0:
                Patched.original = mod._roi_align
                # the eager function: torchvision wraps it in torch.compile on first call (and
                # the wrapper writes the compiled one over the module's name)
                eager = getattr(Patched.original, "__wrapped__", Patched.original)
                mod._roi_align = cuda_roi_align(eager, self.count)
            Patched.depth += 1
        self.mod = mod
        return self

    def __exit__(self, *exc):
        if self.mod is not None:
            Patched.depth -= 1
            if Patched.depth == 0:
                self.mod._roi_align = Patched.original
        return False
