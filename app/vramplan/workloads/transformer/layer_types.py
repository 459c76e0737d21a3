"""What each layer kind keeps per sequence: the KV cache of full, sliding and chunked attention
layers, and the constant state of linear-attention and Mamba2 layers.

Per decoder layer (`TransformerArch.layer_kinds`, catalog/layer_config.py):

* full attention: K and V of every token, `2 * kv_heads * head_dim * bytes` per token.
* sliding window (Gemma 2/3, gpt-oss) and chunked local attention (Llama 4): at most `window`
  tokens. transformers `cache_utils.DynamicSlidingWindowLayer` (which HF builds for
  "sliding_attention" layers, and for "chunked_attention" with `attention_chunk_size` as the
  window) keeps the last `window - 1` tokens after a step and holds `window` during it (the
  step's new token concatenated); vLLM's hybrid KV-cache manager
  (`vllm/v1/core/single_type_kv_cache_manager.py`, SlidingWindowManager /
  ChunkedLocalAttentionManager) frees the blocks outside the window. Counted as `window` tokens.
* linear attention (Qwen3-Next Gated DeltaNet, `Qwen3NextDynamicCache`) and Mamba2 (Granite
  4.0-H / Nemotron-H, `HybridMambaAttentionDynamicCache`; vLLM's MambaManager: one state per
  request): a conv state `[conv_dim, kernel]` and a recurrent / SSM state, whatever the length
  (catalog/mixers.state_elements). The recurrent state is fp32 under transformers 5.23: the
  Gated DeltaNet's (torch_chunk_gated_delta_rule and the fla kernels return the final state in
  float32) and Mamba2's (mamba_ssm's _state_passing_fwd allocates final_states in float32,
  state-spaces/mamba@e9594ce1 ssd_state_passing.py; Granite 4.0-H, Nemotron-H and Falcon-H1
  hand it to `cache.update_recurrent_state`, whose LinearAttentionLayer.lazy_initialization
  keeps `zeros_like` of it, and the decode kernel updates it in place); the conv states and
  every state under vLLM (mamba_ssm_cache_dtype "auto") take the model dtype. fp8 KV
  (`kv_cache_dtype`) applies to the attention layers only.
* parallel hybrid (Falcon-H1: attention and Mamba2 side by side in every layer; transformers
  5.23 `LinearAttentionAndFullAttentionLayer`, a DynamicLayer and a LinearAttentionLayer in one):
  both, the sum of the two rules above: K and V of every token AND the Mamba2 state.

Models without layer kinds (every layer full attention) give exactly `tokens *
kv_bytes_per_token`, the formula used before per-layer kinds existed.
"""
from __future__ import annotations

from ...catalog import mixers
from ...vec import vmin


def is_hybrid(arch) -> bool:
    return bool(arch.layer_kinds)


def _per_layer_token(arch, kv_b: float, mla_latent: bool) -> int:
    """KV bytes one attention layer keeps per token."""
    return arch.kv_bytes_per_token(kv_b, mla_latent=mla_latent) // max(1, arch.layers)


def state_bytes(arch, kv_b: float, engine: str = "hf") -> int:
    """Constant state one sequence keeps over all linear / Mamba2 (and parallel) layers."""
    n = mixers.count(arch, mixers.STATEFUL)
    if not n:
        return 0
    conv, rec = mixers.state_elements(arch)
    model_b = 4 if kv_b == 4 else 2
    rec_b = 4 if engine == "hf" else model_b
    return int(n * (conv * model_b + rec * rec_b))


def growth_per_token(arch, kv_b: float, tp: int = 1, mla_latent: bool = True) -> int:
    """Bytes the cache grows per token once past every window: the full-attention layers'."""
    if not is_hybrid(arch):
        return arch.kv_bytes_per_token(kv_b, mla_latent=mla_latent) // max(1, tp)
    return mixers.count(arch, mixers.GROWING) * _per_layer_token(arch, kv_b, mla_latent) \
        // max(1, tp)


def cache_fn(arch, kv_b: float, tp: int = 1, *, mla_latent: bool = True, engine: str = "hf",
             state_b: float | None = None):
    """tokens -> cache bytes of one sequence on this GPU (tensor-parallel share)."""
    tp = max(1, tp)
    if not is_hybrid(arch):
        kvpt = arch.kv_bytes_per_token(kv_b, mla_latent=mla_latent) // tp
        return lambda t: t * kvpt
    per = _per_layer_token(arch, kv_b, mla_latent)
    full = mixers.count(arch, mixers.GROWING)
    windowed = mixers.count(arch, ("sliding", "chunked"))
    state = state_bytes(arch, kv_b if state_b is None else state_b, engine)
    w = arch.window

    def fn(t):
        return (full * per * t + windowed * per * vmin(t, w) + state) // tp
    return fn


def one_layer_bytes(arch, total, seqs, tokens: int, kv_b: float, tp: int = 1,
                    mla_latent: bool = True):
    """The largest single layer's cache of `seqs` sequences at `tokens` (what DynamicCache's
    torch.cat copies, one layer at a time): `total // layers` for uniform models, one
    full-attention layer's for hybrids (the windowed layers and states are smaller)."""
    full = mixers.count(arch, mixers.GROWING)
    if not is_hybrid(arch) or not full:   # Llama 3.2 Vision: its self-attention layers only
        return total // max(1, arch.layers - getattr(arch, "cross_layers", 0))
    return seqs * tokens * _per_layer_token(arch, kv_b, mla_latent) // max(1, tp)


def note(arch, kv_b: float) -> str:
    """What the per-layer cache is, for the estimate's notes ('' for uniform models)."""
    if not is_hybrid(arch):
        return ""
    per = _per_layer_token(arch, kv_b, True)
    n_par = mixers.count(arch, (mixers.PARALLEL,))
    parts = [f"{mixers.count(arch, ('full',))} full-attention layers grow by {per:,} B/token each"]
    if n_par:
        parts = [f"{n_par} parallel attention + Mamba2 layers grow by {per:,} B/token each"]
    for kind, what in (("sliding", "sliding-window"), ("chunked", "chunked local-attention")):
        n = mixers.count(arch, (kind,))
        if n:
            parts.append(f"{n} {what} layers keep at most {arch.window:,} tokens")
    n = mixers.count(arch, mixers.STATEFUL)
    if n:
        kind = "Gated DeltaNet" if arch.mixer["type"] == "linear" else "Mamba2"
        who = "and their Mamba2 mixers keep" if n_par else f"{n} {kind} layers keep"
        parts.append(f"{who} a constant state "
                     f"({state_bytes(arch, kv_b):,} B per sequence in all)")
    return "per-layer KV cache: " + "; ".join(parts)
