"""Saved activations of Gated DeltaNet and Mamba2 layers in training, as the CUDA kernels keep them.

`activations.layer_coeffs` gives one block's coefficient (bytes per token per hidden unit) as if
every layer were softmax attention + MLP. A hybrid model's (`TransformerArch.layer_kinds`,
catalog/layer_config.py) linear-attention and Mamba2 layers keep other tensors, and Nemotron-H's
blocks hold a mixer or an MLP, not both (NemotronHBlock: one norm, one of mamba / attention /
mlp). `hybrid_adjust` gives the mean over the layers of (this layer's coefficient - the uniform
one) and the share of layers that have attention scores (eager attention's s x s term).

What each layer type keeps, on the path transformers 5.23 takes on a GPU with the kernel
packages installed (`use_kernel_func_from_hub_with_fallback`, integrations/hub_kernels.py):

* Gated DeltaNet (models/qwen3_next/modeling_qwen3_next.py, Qwen3NextGatedDeltaNet.forward):
  - the input of in_proj_qkvz / in_proj_ba (one tensor, counted once as for q / k / v);
  - causal-conv1d's CausalConv1dFn saves its input x, the concatenated q | k | v projections,
    conv_dim = 2 key_dim + value_dim wide (the SiLU is recomputed in backward);
  - fla's ChunkGatedDeltaRuleFunction (fla/ops/gated_delta_rule/chunk.py, fla-org/
    flash-linear-attention@bc3b101d; use_qk_l2norm_in_kernel=True) saves the l2-normalised q and
    k (key_dim each), their fp32 rstd (one per key head), v (value_dim, made contiguous), g's
    chunk-local cumsum (fp32, one per value head), beta (one per value head) and
    A = [B, T, HV, 64] in k's dtype (solve_tril(output_dtype=k.dtype));
  - the gate `-A_log.float().exp() * softplus(a.float() + dt_bias)`: softplus keeps its fp32
    input, the product keeps softplus's fp32 output (A_log is trained): 8 B per value head;
  - Qwen3NextRMSNormGated (torch on every device): x.float() (4 B), the normed tensor cast back
    (p), `weight * normed` (fp32 weight under autocast: 4 B; else p) and silu(gate.float())
    with its input (4 + 4 B), value_dim wide; then out_proj's input (value_dim, 16-bit).
* Mamba2 in training (GraniteMoeHybridMambaLayer / NemotronHMamba2Mixer / BambaMixer call
  mamba2_split_conv1d_scan_combined with the norm and out_proj weights): mamba_ssm's
  MambaSplitConv1dScanCombinedFn (mamba_ssm/ops/triton/ssd_combined.py, state-spaces/
  mamba@e9594ce1) saves zxbcdt (in_proj's output: 2 inner + 2 groups d_state + heads wide),
  out_x (inner) and the norm's rstd (fp32, one per group); the conv output, the gated norm's
  output and out_proj's input are recomputed in backward. Plus in_proj's own input. Without
  the gated norm (Falcon-H1's `mamba_rms_norm` False: rmsnorm_weight None) there is no rstd.
* A parallel hybrid layer (Falcon-H1, FalconH1DecoderLayer.forward) runs both mixers on the same
  normed input, each on its own scaled copy (`hidden_states * attention_in_multiplier`, and
  FalconH1Mixer's `hidden_states * ssm_in_multiplier`: two new tensors, each saved by its
  projections): the attention core + the Mamba2 core, one norm, one MLP. The output
  multipliers and the sum save nothing.

The tracer emulates the same kernels on a CPU trace (measure/tracing/linear_mixers.py).
"""
from __future__ import annotations

from ...catalog import mixers
from . import moe_buffers
from .activations import Kernels, dropout_flags

FLA_CHUNK = 64      # fla's chunk_size: A holds 64 values per token and value head


def _norm(arch, k: Kernels, lora: bool) -> float:
    """activations.layer_coeffs' norm term (the pre-mixer / pre-MLP norm)."""
    r = 4 if (k.mixed or k.p == 4) else k.p
    if k.compile:
        return r
    if arch.norm == "rmsnorm":
        return 4 if lora else 4 + (4 if k.mixed else k.p)
    return r


def attention_core(arch, k: Kernels, keep: dict) -> float:
    """The attention terms of activations.layer_coeffs (inputs of q / k / v and o, the kernel's
    saved q, k, v, output and logsumexp), bytes per token per hidden unit."""
    p, h = k.p, arch.hidden
    lin = 2 if k.mixed else (1.0 if k.float8 else p)
    qr, kvr = arch.heads * arch.head_dim / h, arch.kv_heads * arch.head_dim / h
    if arch.mla:
        m = arch.mla
        qr = kvr = arch.heads * (m["qk_nope_head_dim"] + m["qk_rope_head_dim"]) / h
    c = lin if keep["qkv"] else 0
    if k.attention == "eager":
        kv_eff = qr if arch.kv_heads < arch.heads else kvr
        return c + p * (qr + 2 * kv_eff) + (lin * qr if keep["o"] else 0)
    kv_eff = kvr if k.attention == "flash" else (qr if arch.kv_heads < arch.heads else kvr)
    c += p * (qr + 2 * kv_eff) + p * qr + 4 * arch.heads / h
    return c + (lin * qr if (not k.compile and keep["o"]) else 0)


def deltanet_core(arch, k: Kernels, keep: dict) -> float:
    """One Gated DeltaNet mixer's saved bytes per token per hidden unit (module docstring)."""
    m, p, h = arch.mixer, k.p, arch.hidden
    lin = 2 if k.mixed else (1.0 if k.float8 else p)
    kd, vd, nk, nv = m["nk"] * m["dk"], m["nv"] * m["dv"], m["nk"], m["nv"]
    conv_dim = 2 * kd + vd
    w = 4 if (k.mixed or p == 4) else p
    c = lin if keep["qkv"] else 0
    c += p * conv_dim                                           # CausalConv1dFn's x
    c += p * (2 * kd + vd) + 4 * 2 * nk + 4 * nv + p * nv + p * FLA_CHUNK * nv   # fla's saved
    c += 8 * nv                                                 # softplus in / out (fp32)
    c += (4 + p + w + 4 + 4) * vd                               # the gated RMSNorm
    c += lin * vd if keep["o"] else 0                           # out_proj's input
    return c / h


def mamba_core(arch, k: Kernels, keep: dict) -> float:
    """One Mamba2 mixer's saved bytes per token per hidden unit (module docstring)."""
    m, p, h = arch.mixer, k.p, arch.hidden
    lin = 2 if k.mixed else (1.0 if k.float8 else p)
    inner = m["heads"] * m["head_dim"]
    zxbcdt = 2 * inner + 2 * m["groups"] * m["state"] + m["heads"]
    c = lin if keep["qkv"] else 0
    rstd = 4 * m["groups"] if m.get("gated_norm", True) else 0
    return (c + p * zxbcdt + p * inner + rstd) / h


# q_norm / k_norm classes (transformers 5.23): Gemma-style (Gemma3RMSNorm, Qwen3NextRMSNorm:
# `_norm(x.float()) * (1 + weight.float())`, cast back; Olmo2RMSNorm: `(weight * normed)
# .to(input_dtype)`) keep x.float() and the fp32 normed tensor, 8 B per element; Llama-style
# (Qwen3RMSNorm, Qwen3MoeRMSNorm, Glm4MoeRMSNorm, OlmoeRMSNorm: `weight *
# normed.to(input_dtype)`) keep x.float() and the cast normed tensor, 4 + p. Per head or over
# the whole projection (OLMoE, OLMo 2), the elements are the same: q's and k's.
_GEMMA_STYLE_QK_NORM = {"gemma3_text", "qwen3_next", "olmo2"}


def qk_norm_coeff(arch, k: Kernels) -> float:
    """Bytes per token per hidden unit that one attention layer's q_norm and k_norm keep for
    backward (RMSNorm over each head of q and of k: `TransformerArch.extra['qk_norm']`); 0 for
    models without it. Compiled: the fused norm keeps its input (p)."""
    if not arch.extra.get("qk_norm"):
        return 0.0
    h = arch.hidden
    width = (arch.heads + arch.kv_heads) * arch.head_dim / h
    if k.compile:
        return k.p * width
    per = 8 if arch.model_type in _GEMMA_STYLE_QK_NORM else 4 + k.p
    return per * width


def layer_adjust(arch, k: Kernels, c: float, lora_inputs: dict | None = None
                 ) -> tuple[float, float]:
    """activations.layer_coeffs' uniform block coefficient `c` corrected for the per-layer
    architecture: (mean over the layers of this layer's coefficient - c, the share of layers
    with attention scores): the q / k norms of the attention layers (qk_norm_coeff) and the
    Mamba2 / Gated DeltaNet layers and Nemotron-H blocks (hybrid_adjust)."""
    dc, share = hybrid_adjust(arch, k, c, lora_inputs)
    return dc + share * qk_norm_coeff(arch, k), share


def hybrid_adjust(arch, k: Kernels, c: float, lora_inputs: dict | None = None
                  ) -> tuple[float, float]:
    """(mean over the layers of this layer's coefficient - `c`, the uniform coefficient of
    activations.layer_coeffs; the share of layers with attention scores). (0, 1) for models
    whose every layer is attention + MLP."""
    kinds = arch.layer_kinds
    m = arch.mixer or {}
    if not kinds or m.get("type") not in ("linear", "mamba"):
        n_att = mixers.count(arch, mixers.WITH_ATTENTION)
        return 0.0, (n_att / len(kinds) if kinds else 1.0)
    keep = lora_inputs or {"qkv": True, "o": True, "up": True, "down": True}
    hid_drop = dropout_flags(arch, True)[0] if k.dropout else False
    norm = _norm(arch, k, lora_inputs is not None)
    attn = attention_core(arch, k, keep)
    attn_half = norm + attn + (1 if hid_drop else 0)
    mlp_half = c - attn_half                       # norm + MLP (+ its mask)
    core = deltanet_core(arch, k, keep) if m["type"] == "linear" else mamba_core(arch, k, keep)
    own_blocks = mixers.count(arch, ("mlp",)) > 0  # Nemotron-H: a block is a mixer or an MLP
    total = 0.0
    for kind in kinds:
        mixer = attn if kind in mixers.ATTENTION_KINDS else core if kind in ("linear", "mamba") \
            else attn + core if kind == mixers.PARALLEL else None
        if own_blocks:
            layer = mlp_half if mixer is None else attn_half - attn + mixer
        else:
            layer = attn_half - attn + mixer + mlp_half
        total += layer - c
    n_att = mixers.count(arch, mixers.WITH_ATTENTION)
    return total / len(kinds), n_att / len(kinds)


def prefill_coeff(arch, p: int, base: float) -> float:
    """The widest moment of one block in a no_grad prefill (bytes per token per hidden unit):
    `base` (activations.inference_coeff: MLP or attention) or, for a model with Mamba2 / Gated
    DeltaNet layers, that mixer's moment on transformers 5.23's kernel path with a cache, if
    wider. Both end in a gated RMSNorm run in torch (GraniteMoeHybridRMSNormGated /
    Qwen3NextRMSNormGated: x.float(), silu(gate.float()) and their fp32 product alive
    together, 12 B per element) while the in_proj output (the gate is a view of it), the conv
    output (the split q / k / v or x / B / C are views of it, held by the forward's locals) and
    the scan output are alive; + 2p for the block's input and residual, as in base.
    Mamba2 (cuda_kernels_forward, cache given): zxbcdt, conv_dim, inner, then 12 x inner.
    DeltaNet (Qwen3NextGatedDeltaNet.forward): in_proj_qkvz (2 key_dim + 2 value_dim),
    in_proj_ba (2 nv), the conv output (conv_dim), the kernel output (value_dim), then the
    norm: its 16-bit normed copy and 12 B per value_dim element. An MoE block's routed
    token copies (moe_buffers.prefill_coeff) count where wider."""
    base = max(base, moe_buffers.prefill_coeff(arch, p))
    m = arch.mixer or {}
    if not arch.layer_kinds or m.get("type") not in ("linear", "mamba"):
        return base
    h = arch.hidden
    if m["type"] == "mamba":
        inner = m["heads"] * m["head_dim"]
        conv = inner + 2 * m["groups"] * m["state"]
        moment = p * (inner + conv + m["heads"] + conv + inner) + 12 * inner
    else:
        kd, vd = m["nk"] * m["dk"], m["nv"] * m["dv"]
        moment = p * (2 * kd + 2 * vd + 2 * m["nv"] + (2 * kd + vd) + vd) + (12 + p) * vd
    return max(base, moment / h + 2 * p)
