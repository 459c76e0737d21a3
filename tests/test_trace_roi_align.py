"""The tracer's CUDA roi_align (measure/tracing/roi_align.py): the values and gradients of the
fallback it wraps, and only the rois kept for backward, as torchvision's CUDA kernel keeps."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from vramplan.measure.tracing.roi_align import CHUNK, Patched, RoIAlign  # noqa: E402


def box_mean(inp, rois, scale, ph, pw, ratio, aligned):
    """A linear stand-in for torchvision's fallback: each RoI's box mean per channel, spread
    over the ph x pw bins, computed the fallback's way (a gathered [K, C, H, W] copy)."""
    n = rois[:, 0].long()
    x0, y0, x1, y1 = (rois[:, i].long() for i in range(1, 5))
    h = torch.arange(inp.shape[2])
    w = torch.arange(inp.shape[3])
    m = ((h[None, :, None] >= y0[:, None, None]) & (h[None, :, None] < y1[:, None, None])
         & (w[None, None, :] >= x0[:, None, None]) & (w[None, None, :] < x1[:, None, None]))
    g = inp[n] * m[:, None]                                   # [K, C, H, W]: the big gather
    mean = g.sum((2, 3)) / m.sum((1, 2))[:, None].clamp(min=1)
    return mean[:, :, None, None].expand(-1, -1, ph, pw) * scale


def _rois(k, n=2, size=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.randint(0, size // 2, (k, 2), generator=g)
    wh = torch.randint(1, size // 2, (k, 2), generator=g)
    b = torch.randint(0, n, (k, 1), generator=g)
    return torch.cat([b, xy, xy + wh], 1).float()


def test_values_and_gradients_are_the_fallbacks():
    x = torch.randn(2, 3, 16, 16, requires_grad=True)
    rois = _rois(2 * CHUNK + 5)                               # three chunks, the last partial
    ref = box_mean(x, rois, 0.5, 7, 7, 2, False)
    gout = torch.randn_like(ref)
    gref, = torch.autograd.grad(ref, x, gout)
    out = RoIAlign.apply(x, rois, 0.5, 7, 7, 2, False, box_mean)
    g, = torch.autograd.grad(out, x, gout)
    assert torch.allclose(out, ref) and torch.allclose(g, gref, atol=1e-6)


def test_backward_keeps_the_rois_only():
    """CUDA's ROIAlignFunction saves the rois (K x 5) and the input's shape: 64 x 5 x 4 =
    1,280 B for 64 RoIs, where the stand-in's own graph keeps its K x H x W box mask
    (64 x 16 x 16 B = 16,384 B) besides."""
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    x = torch.randn(2, 3, 16, 16, requires_grad=True)
    rois = _rois(64)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        RoIAlign.apply(x, rois, 1.0, 7, 7, 2, False, box_mean)
    assert saved == [64 * 5 * 4]
    saved.clear()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        box_mean(x, rois, 1.0, 7, 7, 2, False)
    assert 64 * 16 * 16 in saved


def test_torchvision_roi_align_takes_the_cuda_path_and_agrees():
    libs = pytest.importorskip("vramplan.measure.tracing.libs")
    if not libs.ensure_torchvision():
        pytest.skip("torchvision is not installed (the tracing extra)")
    import sys
    from torchvision.ops import roi_align
    mod = sys.modules["torchvision.ops.roi_align"]
    x = torch.randn(2, 8, 24, 24, requires_grad=True)
    rois = _rois(40, size=24)
    ref = roi_align(x, rois, (7, 7), 0.5, 2)
    gout = torch.randn_like(ref)
    gref, = torch.autograd.grad(ref, x, gout)
    counts = {}
    with Patched(lambda what: counts.__setitem__(what, counts.get(what, 0) + 1)):
        assert getattr(mod._roi_align, "vramplan_cuda", False)
        out = roi_align(x, rois, (7, 7), 0.5, 2)
        g, = torch.autograd.grad(out, x, gout)
    assert not getattr(mod._roi_align, "vramplan_cuda", False)   # restored
    assert counts == {"roi_align->cuda": 1}
    assert torch.allclose(out, ref, atol=1e-5) and torch.allclose(g, gref, atol=1e-5)


def test_no_input_gradient_allocates_nothing_in_backward():
    """A frozen input (a frozen backbone's features) while something else asks for gradients
    (here the rois): backward runs and makes no input-sized buffer."""
    made = []
    x = torch.randn(2, 3, 16, 16)                              # requires no grad
    rois = _rois(8).requires_grad_(True)
    out = RoIAlign.apply(x, rois, 1.0, 7, 7, 2, False, box_mean)
    real_zeros = torch.Tensor.new_zeros

    def counting(self, *a, **k):
        made.append(a)
        return real_zeros(self, *a, **k)

    torch.Tensor.new_zeros = counting
    try:
        out.sum().backward()
    finally:
        torch.Tensor.new_zeros = real_zeros
    assert rois.grad is None and not made
