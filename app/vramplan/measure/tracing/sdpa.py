"""CUDA's memory-efficient SDPA kernel, emulated where the CPU's SDPA takes the math path.

Two SDPA calls the CPU serves with the math path (materialised b x h x n x n scores and
probabilities, kept for backward; checked with torch 2.13: `bmm` + `_safe_softmax`), where CUDA
runs `_scaled_dot_product_efficient_attention` (pytorch aten/src/ATen/native/transformers/
cuda/sdp_utils.cpp: flash needs q, k and v of one head dim and no mask; the memory-efficient
kernel takes `attn_mask` and a value head dim other than q's (`check_head_dim_size_mem_efficient`
asks only q == k and both divisible by the GEMM alignment)):

- a value head unlike the query head (MLA: q/k 192, v 128);
- a float `attn_mask` that requires grad (T5's relative position bias): an additive bias.

What the CUDA path allocates (torch 2.13's own meta functions, torch/_meta_registrations.py
`meta__scaled_dot_product_efficient_attention` / `..._backward`, and attention.cpp /
attention_backward.cu):

- before the kernel, the mask goes through `preprocess_mask`: padded (a copy, `pad_bias<8>`)
  only when a stride other than the last is not a multiple of 8, then `expand`ed to
  b x h x n_q x n_k (a view);
- forward: out (b x n_q x h x d_v, q's dtype, returned as its (1, 2) transpose) and, when an
  input requires grad, a logsumexp, fp32, b x h x ceil(n_q / 32) * 32. Saved for backward:
  q, k, v, the expanded mask (the storage of the mask passed in), out, logsumexp;
- backward: grad q, k, v (q's / k's / v's shapes and dtypes, b x n x h x d layout); the
  bias gradient when the mask requires grad, b x h x n_q x n_k (the expanded shape, last dim
  padded to 16) in the mask's dtype, reduced to the mask's own shape by autograd's expand
  backward afterwards; `delta`, fp32 b x h x n_q (16-bit: the kernel fills it,
  `kKernelComputesDelta`; fp32: `(grad_out.float() * out.float()).sum(-1)`, one fp32 product of
  out's size first); a workspace, which for 16-bit inputs is dominated by the fp32 grad-q
  accumulator (`kNeedsAccumGradQ`: b x h x n_q x d fp32, tile padding left out; the per-split
  grad-k / grad-v staging of a few key blocks is left out too).

Under fake tensors only these allocations are made (values are not needed). With real CPU
tensors the values are computed too, by query blocks of the math formulas (fp32 blocks of
b x h x 128 x n_k: temporaries a GPU does not have, in real CPU runs only). Dropout is not
applied (as the fused-dropout rewrite: memory only).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import is_fake

BLOCK = 128


def needs_mem_efficient(q, k, v, mask) -> bool:
    """The calls the CPU runs on the math path and CUDA on the memory-efficient kernel."""
    if not all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in (q, k, v)):
        return False
    if q.shape[-1] != k.shape[-1] or q.shape[1] != k.shape[1] or k.shape[1] != v.shape[1]:
        return False      # grouped-query calls (enable_gqa) are left as they are
    bias_grad = (isinstance(mask, torch.Tensor) and mask.is_floating_point()
                 and mask.requires_grad and torch.is_grad_enabled())
    return v.shape[-1] != q.shape[-1] or bias_grad


def preprocess_mask(mask, q, k):
    """attention.cpp `preprocess_mask`: pad when unaligned (pad_bias<8>), expand to b x h x n x n."""
    if any(mask.stride(i) % 8 for i in range(mask.dim() - 1)) or mask.stride(-1) != 1:
        n = mask.shape[-1]
        mask = F.pad(mask, (0, 8 - n % 8))[..., :n]
    return mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])


def _bmhk(shape, like):
    """A b x h x n x d tensor in the kernels' b x n x h x d memory layout."""
    b, h, n, d = shape
    return torch.empty((b, n, h, d), dtype=like.dtype, device=like.device).transpose(1, 2)


def _blocks(q, k, bias, scale, causal):
    """(rows, fp32 scores) per block of BLOCK queries (real tensors only)."""
    kf = k.float().transpose(-2, -1)
    for r0 in range(0, q.shape[2], BLOCK):
        r1 = min(r0 + BLOCK, q.shape[2])
        s = torch.matmul(q[:, :, r0:r1].float(), kf) * scale
        if bias is not None:
            s = s + bias[:, :, r0:r1].float()
        if causal:   # top-left causal, as CustomMaskType::CausalFromTopLeft
            rows = torch.arange(r0, r1, device=q.device)[:, None]
            s = s.masked_fill(torch.arange(k.shape[2], device=q.device)[None, :] > rows,
                              float("-inf"))
        yield r0, r1, s


def _probs(s, lse):
    lse = lse.masked_fill(torch.isinf(lse), 0.0)      # a fully masked row: probabilities 0
    return torch.exp(s - lse[..., None])


class MemEfficientSDPA(torch.autograd.Function):
    """`_scaled_dot_product_efficient_attention` and its backward, by their allocations."""

    @staticmethod
    def forward(ctx, q, k, v, bias, causal, scale):
        b, h, m, _ = q.shape
        out = _bmhk((b, h, m, v.shape[-1]), q)
        grad = any(t.requires_grad for t in (q, k, v))   # compute_log_sumexp
        lse = torch.empty((b, h, math.ceil(m / 32) * 32 if grad else 0), dtype=torch.float32,
                          device=q.device)
        if not is_fake(q):
            for r0, r1, s in _blocks(q, k, bias, scale, causal):
                blk = torch.logsumexp(s, -1)
                out[:, :, r0:r1] = torch.matmul(_probs(s, blk), v.float()).to(out.dtype)
                if grad:
                    lse[:, :, r0:r1] = blk
        ctx.causal, ctx.scale = causal, scale
        ctx.save_for_backward(q, k, v, bias, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        with torch.autocast(grad_out.device.type, enabled=False):
            return MemEfficientSDPA._backward(ctx, grad_out)

    @staticmethod
    def _backward(ctx, grad_out):
        q, k, v, bias, out, lse = ctx.saved_tensors
        gq, gk, gv = _bmhk(q.shape, q), _bmhk(k.shape, k), _bmhk(v.shape, v)
        gbias = None
        if bias is not None and ctx.needs_input_grad[3]:
            n = bias.shape[-1]
            gbias = torch.empty((*bias.shape[:-1], -(-n // 16) * 16), dtype=bias.dtype,
                                device=bias.device)[..., :n]
        if q.dtype in (torch.float16, torch.bfloat16):
            delta = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
            work = torch.empty(q.shape, dtype=torch.float32, device=q.device)   # grad-q accum.
        else:
            delta = (grad_out.float() * out.float()).sum(-1)
            work = None
        if not is_fake(q):
            if work is not None:
                delta.copy_((grad_out.float() * out.float()).sum(-1))
            vf = v.float().transpose(-2, -1)
            dk = torch.zeros(k.shape, dtype=torch.float32, device=k.device)
            dv = torch.zeros(v.shape, dtype=torch.float32, device=v.device)
            for r0, r1, s in _blocks(q, k, bias, ctx.scale, ctx.causal):
                p = _probs(s, lse[:, :, r0:r1])
                go = grad_out[:, :, r0:r1].float()
                dv += torch.matmul(p.transpose(-2, -1), go)
                ds = p * (torch.matmul(go, vf) - delta[:, :, r0:r1, None])
                gq[:, :, r0:r1] = (torch.matmul(ds, k.float()) * ctx.scale).to(gq.dtype)
                dk += torch.matmul(ds.transpose(-2, -1), q[:, :, r0:r1].float()) * ctx.scale
                if gbias is not None:
                    gbias[:, :, r0:r1] = ds.to(gbias.dtype)
            gk.copy_(dk)
            gv.copy_(dv)
        del delta, work
        return gq, gk, gv, gbias, None, None


def mem_efficient_sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """F.scaled_dot_product_attention as CUDA's memory-efficient kernel runs it. The caller has
    applied autocast's casts (ATen/autocast_mode.h lists scaled_dot_product_attention among the
    lower-precision ops: every floating input but fp64 cast, the mask too, nothing cached)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if isinstance(attn_mask, torch.Tensor) and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros_like(attn_mask, dtype=q.dtype).masked_fill(
            attn_mask.logical_not(), float("-inf"))           # convert_boolean_attn_mask
    bias = preprocess_mask(attn_mask, q, k) if attn_mask is not None else None
    with torch.autocast(q.device.type, enabled=False):
        return MemEfficientSDPA.apply(q, k, v, bias, bool(is_causal), float(scale))
