"""Token mixers other than full softmax attention: their parameters and their per-sequence state.

A `TransformerArch` with `layer_kinds` has one of these per layer (transformers 4.5x modelling
code, each cited where it is read):

* `full` / `sliding` / `chunked`: softmax attention (q, k, v, o); a sliding layer (Gemma 2/3,
  gpt-oss: `layer_types` "sliding_attention" + `sliding_window`) and a chunked layer (Llama 4:
  `attention_chunk_size`, the layers `no_rope_layers` marks as using RoPE) have the same weights
  and attend to at most `window` keys.
* `linear`: Qwen3-Next's Gated DeltaNet (models/qwen3_next/modeling_qwen3_next.py,
  `Qwen3NextGatedDeltaNet`): in_proj_qkvz hidden -> 2 key_dim + 2 value_dim, in_proj_ba hidden ->
  2 nv, a depthwise conv1d over conv_dim = 2 key_dim + value_dim (no bias), dt_bias and A_log
  (nv each), a gated RMSNorm of head_v_dim, out_proj value_dim -> hidden. Its cache
  (`Qwen3NextDynamicCache`): conv_states [conv_dim, kernel] and recurrent_states
  [nv, head_k_dim, head_v_dim] per sequence.
* `mamba`: Mamba2 (models/granitemoehybrid/modeling_granitemoehybrid.py,
  `GraniteMoeHybridMambaLayer`, as Bamba): intermediate = n_heads * d_head, conv_dim =
  intermediate + 2 n_groups d_state; in_proj hidden -> intermediate + conv_dim + n_heads, conv1d
  conv_dim x d_conv (+ bias), dt_bias / A_log / D (n_heads each), a gated RMSNorm of
  intermediate, out_proj intermediate -> hidden. Its cache (`HybridMambaAttentionDynamicCache`):
  conv_states [conv_dim, d_conv] and ssm_states [n_heads, d_head, d_state] per sequence.
  Nemotron-H's NemotronHMamba2Mixer has the same weights (models/nemotron_h).
* `mlp`: a Nemotron-H block that is only an MLP (NemotronHBlock with block_type "mlp"): no token
  mixer and no cache; the other Nemotron-H blocks have no MLP.
* `parallel_hybrid`: Falcon-H1 (models/falcon_h1/modeling_falcon_h1.py, FalconH1DecoderLayer):
  every layer runs full attention (FalconH1Attention: q, k, v, o) AND a Mamba2 mixer
  (FalconH1Mixer) on the same normed input, sums their outputs, then an MLP. Its weights are
  both mixers'; its cache (transformers 5.23 cache_utils `LinearAttentionAndFullAttentionLayer`,
  the "hybrid" entry of LAYER_TYPE_MAPPING that FalconH1Config.layers_block_type names for
  every layer) keeps K / V per token AND the Mamba2 conv / SSM state. FalconH1Mixer differs
  from Granite's in its inner width (`mamba_d_ssm`), an optional gated RMSNorm
  (`mamba_rms_norm`; nn.Identity otherwise) and out_proj's bias (`projectors_bias`).

Attention sinks (gpt-oss `GptOssAttention.sinks`: one learned logit per head) and Qwen3-Next's
output gate (`attn_output_gate`: q_proj emits a gate as wide as the queries) add parameters.
"""
from __future__ import annotations

ATTENTION_KINDS = ("full", "sliding", "chunked")
PARALLEL = "parallel_hybrid"   # full attention + Mamba2 side by side in one layer (Falcon-H1)
KINDS = ATTENTION_KINDS + ("linear", "mamba", "mlp", PARALLEL)   # mlp: no token mixer
GROWING = ("full", PARALLEL)                    # K / V of every token
STATEFUL = ("linear", "mamba", PARALLEL)        # a constant conv + recurrent state
WITH_ATTENTION = ATTENTION_KINDS + (PARALLEL,)  # softmax attention (scores, q / k norms)


def linear_params(m: dict, hidden: int) -> int:
    """One Gated DeltaNet layer's parameters (Qwen3NextGatedDeltaNet)."""
    kd, vd = m["nk"] * m["dk"], m["nv"] * m["dv"]
    conv = 2 * kd + vd
    return (hidden * (2 * kd + 2 * vd) + hidden * 2 * m["nv"] + conv * m["kernel"]
            + 2 * m["nv"] + m["dv"] + vd * hidden)


def mamba_params(m: dict, hidden: int) -> int:
    """One Mamba2 layer's parameters (GraniteMoeHybridMambaLayer / BambaMixer)."""
    inner = m["heads"] * m["head_dim"]
    conv = inner + 2 * m["groups"] * m["state"]
    proj_bias = m.get("proj_bias", False)
    n = hidden * (inner + conv + m["heads"]) + (inner + conv + m["heads"]) * proj_bias
    n += conv * m["kernel"] + conv * m.get("conv_bias", True)
    n += 3 * m["heads"] + inner * m.get("gated_norm", True) + inner * hidden
    return n + hidden * m.get("out_bias", proj_bias)


def state_elements(arch) -> tuple[int, int]:
    """(conv-state, recurrent/SSM-state) elements one sequence keeps per linear / Mamba2 layer."""
    m = arch.mixer or {}
    if m.get("type") == "linear":
        conv = 2 * m["nk"] * m["dk"] + m["nv"] * m["dv"]
        return conv * m["kernel"], m["nv"] * m["dk"] * m["dv"]
    if m.get("type") == "mamba":
        inner = m["heads"] * m["head_dim"]
        conv = inner + 2 * m["groups"] * m["state"]
        return conv * m["kernel"], m["heads"] * m["head_dim"] * m["state"]
    return 0, 0


def count(arch, kinds) -> int:
    """Layers of `arch` whose kind is in `kinds` (every layer is full attention without
    layer_kinds)."""
    if not arch.layer_kinds:
        return arch.layers if "full" in kinds else 0
    return sum(1 for k in arch.layer_kinds if k in kinds)


def adjust_breakdown(arch, out: dict) -> None:
    """Correct `param_breakdown`'s per-layer attention for the layer kinds, sinks, output
    gates and attention-only q/k norms (in place)."""
    x, h = arch.extra, arch.hidden
    n_att = count(arch, ATTENTION_KINDS)
    n_par = count(arch, (PARALLEL,))        # attention + Mamba2 in one layer
    others = arch.layers - n_att - n_par    # layers without attention
    attn = out["attention"] // max(1, arch.layers)
    q_out = arch.heads * arch.head_dim
    if x.get("attn_output_gate"):
        attn += h * q_out
    if x.get("o_bias"):
        attn += h
    if x.get("attention_sinks"):
        attn += arch.heads
    m = arch.mixer or {}
    mixer = (linear_params(m, h) if m.get("type") == "linear"
             else mamba_params(m, h) if m.get("type") == "mamba" else attn)
    n_mlp = count(arch, ("mlp",))
    out["attention"] = n_att * attn + (others - n_mlp) * mixer + n_par * (attn + mixer)
    if n_mlp:               # Nemotron-H: the MLP lives in its own blocks only
        out["mlp"] = n_mlp * arch._mlp(arch.ffn)
    if x.get("qk_norm"):    # q_norm / k_norm only on the attention layers
        out["norms"] -= others * 2 * arch.head_dim
