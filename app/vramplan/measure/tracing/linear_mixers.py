"""CUDA's fused Mamba2 and Gated DeltaNet kernels for traces (`--kernels cuda`), by their
allocations.

transformers 5.23 calls these layers' kernels through `use_kernel_func_from_hub_with_fallback`
(integrations/hub_kernels.py: a Hub kernel, else the original package, else the torch function):
on a GPU with `mamba_ssm` / `fla` / `causal_conv1d` installed the layer runs one fused autograd
function; a CPU trace gets the torch fallback, which keeps every chunk's intermediate tensors for
backward (several times what the kernel keeps) or, for Mamba2 in training, a different path (the
fallback returns None and the layer runs its step-by-step torch_forward). While the emulation is
active the modelling modules' names point at functions that allocate and save what the kernels
do (fake tensors only; a real CPU run keeps the fallback). gpt-oss's attention with sinks has
no SDPA path in transformers 5.23 (eager only); its GPU path is a flash kernel with sinks
(`FlashSinks`).

* Mamba2 in training (GraniteMoeHybridMambaLayer, NemotronHMamba2Mixer, BambaMixer call
  `mamba2_split_conv1d_scan_combined(in_proj(x), ..., rmsnorm_weight, outproj_weight)`):
  mamba_ssm `MambaSplitConv1dScanCombinedFn` (mamba_ssm/ops/triton/ssd_combined.py, state-spaces/
  mamba@e9594ce1) saves `zxbcdt` (the in_proj output), the conv weight / bias, `out_x` (the
  scan output, heads x head_dim, zxbcdt's dtype), A, D, dt_bias, the norm weight, `rstd` (fp32,
  one per token and group), the out_proj weight / bias; the conv output, the gated norm output
  and out_proj's input are temporaries (recomputed in backward). Under autocast it casts the
  norm output and out_proj's weight to the autocast dtype for the projection. Falcon-H1's
  FalconH1Mixer calls it too, with rmsnorm_weight None when `mamba_rms_norm` is false: then
  the kernel gates the scan output by silu(z) itself and saves no rstd (ssd_combined.py, the
  `rmsnorm_weight is None` branch).
* Gated DeltaNet (Qwen3NextGatedDeltaNet): `causal_conv1d_fn` is causal-conv1d's
  `CausalConv1dFn` (saves x, weight, bias; the SiLU is recomputed in backward) and
  `torch_chunk_gated_delta_rule` is fla's `ChunkGatedDeltaRuleFunction` (fla/ops/
  gated_delta_rule/chunk.py, fla-org/flash-linear-attention@bc3b101d): with
  use_qk_l2norm_in_kernel it saves the l2-normalised q and k (new tensors, q's dtype) and their
  fp32 rstd (one per token and key head), v (made contiguous by `input_guard`: a copy of the
  conv output's slice), g (the chunk-local cumsum, fp32, `chunk_local_cumsum(output_dtype=
  torch.float)`), beta, and A ([B, T, HV, 64], k's dtype: `solve_tril(output_dtype=k.dtype)`).
"""
from __future__ import annotations

import sys

import torch
from torch._subclasses.fake_tensor import is_fake

CHUNK = 64          # fla's chunk_size (the width of A per token and value head)
MAMBA_MODULES = ("granitemoehybrid", "nemotron_h", "bamba", "falcon_h1")


class Mamba2Combined(torch.autograd.Function):
    """mamba_ssm MambaSplitConv1dScanCombinedFn with its out_proj, by its allocations."""

    @staticmethod
    def forward(ctx, zxbcdt, conv_w, conv_b, dt_bias, A, D, norm_w, out_w, out_b, heads,
                head_dim, groups):
        b, s, _ = zxbcdt.shape
        inner = heads * head_dim
        conv_dim = conv_w.shape[0]
        xbc = zxbcdt.new_empty((b, s, conv_dim))          # causal_conv1d_fwd output (temp.)
        out_x = zxbcdt.new_empty((b, s, heads, head_dim))  # the chunked scan's output
        rstd = None if norm_w is None else torch.empty((b * s * groups,), dtype=torch.float32,
                                                       device=zxbcdt.device)
        out = zxbcdt.new_empty((b, s, inner))   # the gated RMSNorm's output (without the norm,
        # Falcon-H1's mamba_rms_norm false: the scan's y * silu(z), the same size)
        del xbc
        w = out_w
        if torch.is_autocast_enabled(zxbcdt.device.type):
            dt = torch.get_autocast_dtype(zxbcdt.device.type)
            out, w = out.to(dt), out_w.to(dt)
        with torch.autocast(zxbcdt.device.type, enabled=False):
            y = torch.nn.functional.linear(out, w, None if out_b is None else out_b.to(w.dtype))
        ctx.save_for_backward(zxbcdt, conv_w, conv_b, out_x, A, D, dt_bias, norm_w, rstd,
                              out_w, out_b)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        zxbcdt, conv_w, conv_b, out_x, A, D, dt_bias, norm_w, rstd, out_w, out_b = \
            ctx.saved_tensors
        # mamba_ssm's backward: dzxbcdt = empty_like(zxbcdt), the recomputed conv output and
        # norm output, the scan's dout_x; then the parameters' gradients
        dz = torch.empty_like(zxbcdt)
        tmp = (zxbcdt.new_empty((*zxbcdt.shape[:2], conv_w.shape[0])), torch.empty_like(out_x),
               torch.empty_like(out_x))
        del tmp

        def g(t):
            return None if t is None or not t.requires_grad else torch.empty_like(t)
        return (dz, g(conv_w), g(conv_b), g(dt_bias), g(A), g(D), g(norm_w), g(out_w), g(out_b),
                None, None, None)


def mamba2_combined(original):
    """A stand-in for transformers' `mamba2_split_conv1d_scan_combined`."""
    def call(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D, chunk_size=256, *args,
             rmsnorm_weight=None, outproj_weight=None, outproj_bias=None, headdim=None,
             ngroups=1, **kwargs):
        if not is_fake(zxbcdt) or outproj_weight is None:
            return original(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D, chunk_size,
                            *args, rmsnorm_weight=rmsnorm_weight, outproj_weight=outproj_weight,
                            outproj_bias=outproj_bias, headdim=headdim, ngroups=ngroups,
                            **kwargs)
        Patched.count("mamba2->mamba_ssm combined kernel")
        heads = D.shape[0]
        return Mamba2Combined.apply(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D,
                                    rmsnorm_weight, outproj_weight, outproj_bias, heads,
                                    int(headdim), int(ngroups))
    return call


class CausalConv1d(torch.autograd.Function):
    """causal-conv1d's CausalConv1dFn (silu inside, recomputed in backward)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight, bias)
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx, grad):
        x, weight, bias = ctx.saved_tensors
        return (torch.empty_like(x), torch.empty_like(weight),
                None if bias is None else torch.empty_like(bias))


def causal_conv1d(original):
    def call(hidden_states, weight, bias=None, activation=None, **kwargs):
        if not is_fake(hidden_states):
            return original(hidden_states, weight, bias, activation, **kwargs)
        Patched.count("causal_conv1d->kernel")
        return CausalConv1d.apply(hidden_states, weight, bias)
    return call


class GatedDeltaRule(torch.autograd.Function):
    """fla ChunkGatedDeltaRuleFunction (use_qk_l2norm_in_kernel=True), by its allocations."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta):
        b, s, hk, _ = q.shape
        hv = v.shape[2]
        f32 = dict(dtype=torch.float32, device=q.device)
        qn, kn = torch.empty_like(q, memory_format=torch.contiguous_format), \
            torch.empty_like(k, memory_format=torch.contiguous_format)
        q_rstd, k_rstd = torch.empty((b, s, hk), **f32), torch.empty((b, s, hk), **f32)
        vc = v.contiguous()
        gc = torch.empty(g.shape, **f32)                      # chunk_local_cumsum, fp32
        A = k.new_empty((b, s, hv, CHUNK))                    # solve_tril(output_dtype=k.dtype)
        o = q.new_empty((b, s, hv, v.shape[-1]))
        ctx.save_for_backward(qn, q_rstd, kn, k_rstd, vc, gc, beta, A)
        return o

    @staticmethod
    def backward(ctx, grad_o):
        qn, q_rstd, kn, k_rstd, vc, gc, beta, A = ctx.saved_tensors
        return (torch.empty_like(qn), torch.empty_like(kn), torch.empty_like(vc),
                torch.empty_like(gc), torch.empty_like(beta))


def gated_delta_rule(original):
    """A stand-in for `torch_chunk_gated_delta_rule`: with grad, fla's autograd function; in
    a prefill (no_grad, a cache) its forward: the output, the fp32 final state [B, HV, K, V]
    and, as temporaries, w / u (k's and v's widths per value head), the per-chunk states h
    [B, chunks, HV, K, V] and v_new (chunk_gated_delta_rule_fwd)."""
    def call(query, key, value, g, beta, chunk_size=64, initial_state=None,
             output_final_state=False, use_qk_l2norm_in_kernel=False, **kwargs):
        grad = torch.is_grad_enabled()
        if (not is_fake(query) or not use_qk_l2norm_in_kernel
                or (grad and (initial_state is not None or output_final_state))):
            return original(query, key, value, g, beta, chunk_size, initial_state,
                            output_final_state, use_qk_l2norm_in_kernel, **kwargs)
        Patched.count("gated-delta-rule->fla chunk kernel")
        if grad:
            return GatedDeltaRule.apply(query, key, value, g, beta), None
        b, s, _, dk = query.shape
        hv, dv = value.shape[2], value.shape[3]
        nc = -(-s // CHUNK)
        tmp = (key.new_empty((b, s, hv, dk)), value.new_empty((b, s, hv, dv)),
               key.new_empty((b, nc, hv, dk, dv)), value.new_empty((b, s, hv, dv)),
               key.new_empty((b, s, hv, CHUNK)))
        o = query.new_empty((b, s, hv, dv))
        del tmp
        state = (torch.empty((b, hv, dk, dv), dtype=torch.float32, device=query.device)
                 if output_final_state else None)
        return o, state
    return call


def chunk_scan(original):
    """A stand-in for transformers' `mamba2_chunk_scan` outside training (prefill with a cache:
    mamba_ssm `mamba_chunk_scan_combined` under no_grad). Its forward allocates, besides the
    output (x's dtype) and the fp32 final state, the fp32 chunk states [B, chunks, H, P, N],
    the fp32 C.B^T of each chunk [B, chunks, G, chunk, chunk] and the fp32 dt / dA cumsum
    [B, H, chunks, chunk] (ssd_combined.py _mamba_chunk_scan_combined_fwd); they are
    temporaries. With grad the original runs (training takes the combined function)."""
    def call(hidden_states, dt, A, B, C, chunk_size, *args, return_final_states=False,
             **kwargs):
        if not is_fake(hidden_states) or torch.is_grad_enabled():
            return original(hidden_states, dt, A, B, C, chunk_size, *args,
                            return_final_states=return_final_states, **kwargs)
        Patched.count("mamba2 chunk scan->mamba_ssm kernel")
        b, s, h, p = hidden_states.shape
        g, n = B.shape[2], B.shape[3]
        nc = -(-s // chunk_size)
        f32 = dict(dtype=torch.float32, device=hidden_states.device)
        tmp = (torch.empty((b, nc, h, p, n), **f32), torch.empty((b, nc, g, chunk_size,
               chunk_size), **f32), torch.empty((2, b, h, nc, chunk_size), **f32))
        out = hidden_states.new_empty((b, s, h, p))
        del tmp
        if return_final_states:
            return out, torch.empty((b, h, p, n), **f32)
        return out
    return call


class FlashSinks(torch.autograd.Function):
    """A flash-attention kernel with attention sinks (the gpt-oss model card's GPU path,
    `attn_implementation="kernels-community/vllm-flash-attn3"`: FA3 with `s_aux`), by its
    allocations: it saves q, k, v (key / value heads unrepeated), its output and an fp32
    logsumexp per head and token, plus the sinks; backward allocates dq, dk, dv, an fp32 dq
    accumulator and an fp32 softmax_d per head and token."""

    @staticmethod
    def forward(ctx, q, k, v, sinks):
        b, h, s, d = q.shape
        out = q.new_empty((b, s, h, v.shape[-1]))
        lse = torch.empty((b, h, s), dtype=torch.float32, device=q.device)
        ctx.save_for_backward(q, k, v, out, lse, sinks)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse, sinks = ctx.saved_tensors
        work = (torch.empty(q.shape, dtype=torch.float32, device=q.device),
                torch.empty(lse.shape, dtype=torch.float32, device=q.device))
        del work
        return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
                torch.empty_like(sinks))


def flash_sinks(original):
    """A stand-in for gpt-oss's eager_attention_forward (scores, sinks, softmax in the input
    dtype), which transformers 5.23 runs for "sdpa" too (SDPA has no sinks)."""
    def call(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        if not is_fake(query) or dropout:
            return original(module, query, key, value, attention_mask, scaling, dropout,
                            **kwargs)
        Patched.count("gpt-oss eager attention->flash with sinks")
        if torch.is_autocast_enabled(query.device.type):
            dt = torch.get_autocast_dtype(query.device.type)
            query, key, value = (t.to(dt) for t in (query, key, value))
        with torch.autocast(query.device.type, enabled=False):
            return FlashSinks.apply(query, key, value, module.sinks), None
    return call


_SWAPS = [(f"transformers.models.{m}.modeling_{m}", name, make) for m in MAMBA_MODULES
          for name, make in (("mamba2_split_conv1d_scan_combined", mamba2_combined),
                             ("mamba2_chunk_scan", chunk_scan),
                             ("causal_conv1d_fn", causal_conv1d))] + [
    ("transformers.models.qwen3_next.modeling_qwen3_next", "causal_conv1d_fn", causal_conv1d),
    ("transformers.models.qwen3_next.modeling_qwen3_next", "torch_chunk_gated_delta_rule",
     gated_delta_rule),
    ("transformers.models.gpt_oss.modeling_gpt_oss", "eager_attention_forward", flash_sinks)]


class Patched:
    """While active, the modelling modules already imported call the kernel stand-ins (nested
    uses are fine: the outermost one patches); nothing happens for modules not imported."""
    depth = 0
    saved: list = []
    counter = None

    def __init__(self, count=None):
        self._count = count

    @staticmethod
    def count(what):
        if Patched.counter is not None:
            Patched.counter(what)

    def __enter__(self):
        if Patched.depth == 0:
            Patched.counter = self._count
            Patched.saved = []
            for mod_name, name, make in _SWAPS:
                mod = sys.modules.get(mod_name)
                if mod is not None and hasattr(mod, name):
                    original = getattr(mod, name)
                    Patched.saved.append((mod, name, original))
                    setattr(mod, name, make(original))
        Patched.depth += 1
        return self

    def __exit__(self, *exc):
        Patched.depth -= 1
        if Patched.depth == 0:
            for mod, name, original in Patched.saved:
                setattr(mod, name, original)
            Patched.saved, Patched.counter = [], None
        return False
