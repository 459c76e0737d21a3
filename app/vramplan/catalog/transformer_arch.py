"""One transformer's shape and the facts its kernels depend on: `TransformerArch`.

Read from Hugging Face `config.json` dicts by `hf_config.arch_from_config` (the keys each
`model_type` uses), or made for a parameter count by `generic_decoder`. The fields are what the
memory model and the tracer's torch modules (measure/tracing) both need: shapes, grouped-query
attention, gated MLPs, tied embeddings, learned positions, Mixture-of-Experts, DeepSeek's
multi-head latent attention (MLA), the MLP activation, dropout and the softmax dtype.

Parameter counts follow the Hugging Face modules layer by layer, so they match
`sum(p.numel() for p in model.parameters())`:

* `param_count()` is the model a job loads: `*ForCausalLM` for decoders (lm_head counted once when
  tied), `*ForConditionalGeneration` for encoder-decoders, the bare `*Model` for encoders (BERT /
  RoBERTa incl. the pooler: their task heads are small and task-specific).
* `base_param_count()` is what `AutoModel` builds: the same less an untied lm_head.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ScenarioError
from ..vocab import TRANSFORMER_FAMILIES
from . import mixers, whisper

KINDS = TRANSFORMER_FAMILIES  # a transformer's kind is its family


@dataclass(frozen=True)
class TransformerArch:
    """One transformer's shape, normalised. Field names are the domain's, not HF's."""

    model_type: str
    kind: str                      # "decoder" | "encoder" | "encoder-decoder"
    layers: int                    # encoder layers for encoder-decoder models
    decoder_layers: int            # encoder-decoder only, else 0
    hidden: int
    heads: int
    kv_heads: int                  # == heads (MHA), < heads (GQA), 1 (MQA)
    head_dim: int                  # explicit `head_dim` wins over hidden // heads
    ffn: int                       # dense MLP width
    gated_mlp: bool                # SwiGLU / GeGLU: 3 matrices, else 2
    vocab: int
    tied_embeddings: bool
    max_positions: int
    learned_positions: bool
    type_vocab: int = 0            # BERT token types
    norm: str = "rmsnorm"          # "layernorm" (weight + bias) | "rmsnorm" (weight)
    bias: bool = False             # biases on attention and MLP projections
    qkv_bias: bool = False         # Qwen2: bias on q, k, v only
    num_experts: int = 0           # routed experts per MoE layer (0: dense model)
    experts_per_token: int = 0
    moe_ffn: int = 0               # one expert's MLP width
    shared_experts: int = 0        # DeepSeek: always-on experts of width moe_ffn
    shared_expert_ffn: int = 0     # Qwen2-MoE: one shared expert of this width (+ sigmoid gate)
    first_dense_layers: int = 0    # DeepSeek first_k_dense_replace
    mla: dict | None = None        # kv_lora_rank, q_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim
    pooler: bool = False           # BERT / RoBERTa pooler (dense hidden x hidden)
    norms_per_layer: int = 2
    activation: str = "silu"       # MLP activation (HF hidden_act / activation_function)
    hidden_dropout: float = 0.0    # dropout on embeddings and block outputs
    attention_dropout: float = 0.0  # dropout on the attention probabilities
    softmax_upcast: bool = True    # eager attention: softmax in fp32 for 16-bit inputs
    attn_softcap: float = 0.0      # tanh soft-capping of attention scores (catalog/softcap.py)
    final_softcap: float = 0.0     # tanh soft-capping of the final logits; 0.0: none
    layer_kinds: tuple = ()        # per layer: full / sliding / chunked / linear / mamba (); all full
    window: int = 0                # tokens a sliding / chunked layer attends to (and caches)
    mixer: dict | None = None      # linear-attention / Mamba2 dims (catalog/mixers.py)
    weight_format: object = field(default=None, compare=False)
    """the shipped format of a checkpoint saved quantised (catalog/weight_formats.WeightFormat)"""
    extra: dict = field(default_factory=dict, compare=False)
    """model-type details the counts need (opt projection dims, t5 buckets, falcon qkv layout)"""

    # ---- derived -------------------------------------------------------------------------
    @property
    def total_layers(self) -> int:
        return self.layers + self.decoder_layers

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def moe_layers(self) -> int:
        return max(0, self.layers - self.first_dense_layers) if self.is_moe else 0

    def _norm_params(self, width: int) -> int:
        return width * (2 if self.norm == "layernorm" else 1)

    def _mlp(self, width: int, bias: bool | None = None) -> int:
        bias = self.bias if bias is None else bias
        mats = 3 if self.gated_mlp else 2
        n = mats * self.hidden * width
        if bias:
            n += (mats - 1) * width + self.hidden
        return n

    def _attention(self) -> int:
        """One self-attention block (q, k, v, o; MLA when configured)."""
        h, d = self.hidden, self.head_dim
        if self.mla:
            m = self.mla
            qk = m["qk_nope_head_dim"] + m["qk_rope_head_dim"]
            if m.get("q_lora_rank"):
                q = h * m["q_lora_rank"] + m["q_lora_rank"] + m["q_lora_rank"] * self.heads * qk
            else:
                q = h * self.heads * qk
            kv = (h * (m["kv_lora_rank"] + m["qk_rope_head_dim"]) + m["kv_lora_rank"]
                  + m["kv_lora_rank"] * self.heads * (m["qk_nope_head_dim"] + m["v_head_dim"]))
            return q + kv + self.heads * m["v_head_dim"] * h
        q_out, kv_out = self.heads * d, self.kv_heads * d
        n = h * q_out + 2 * h * kv_out + q_out * h
        if self.bias:
            n += q_out + 2 * kv_out + h
        elif self.qkv_bias:
            n += q_out + 2 * kv_out
        return n

    # ---- kernels -------------------------------------------------------------------------
    def dropout(self, training: bool) -> tuple[float, float]:
        """(hidden, attention) dropout probabilities a step applies: the config's (its HF config
        class default where it gives none) in training, none in eval / no_grad. The one decision
        of dropout: the estimate (workloads/transformer/activations.py) and the tracer's modules
        (measure/tracing/transformer.py) both read it."""
        if not training:
            return 0.0, 0.0
        return self.hidden_dropout, self.attention_dropout

    # ---- parameters ----------------------------------------------------------------------
    def param_breakdown(self) -> dict[str, int]:
        """Parameters by part: embeddings, position_embeddings, attention, mlp, router, norms,
        lm_head, pooler. Sums to `param_count()`."""
        h, L = self.hidden, self.layers
        x = self.extra
        emb_dim = x.get("word_embed_proj_dim", h)
        out = {"embeddings": self.vocab * emb_dim + self.type_vocab * h,
               "position_embeddings": 0, "attention": 0, "mlp": 0, "router": 0, "norms": 0,
               "lm_head": 0, "pooler": 0}
        if emb_dim != h:  # OPT-350m: project_in / project_out, no bias
            out["embeddings"] += 2 * emb_dim * h
        if self.learned_positions:
            out["position_embeddings"] = (self.max_positions + x.get("position_offset", 0)) * h

        if x.get("whisper"):
            return whisper.whisper_breakdown(self, out)
        if self.kind == "encoder-decoder":
            return self._t5_breakdown(out)

        attn = self._attention()
        if x.get("falcon_qkv"):  # Falcon: fused query_key_value of (heads + 2 kv) * head_dim
            d = self.head_dim
            attn = h * (self.heads + 2 * self.kv_heads) * d + h * h
            if self.bias:
                attn += (self.heads + 2 * self.kv_heads) * d + h
        out["attention"] = L * attn
        out["norms"] = L * self.norms_per_layer * self._norm_params(h)
        if x.get("qk_norm_full"):   # OLMoE / OLMo 2: over the whole q and k projections
            out["norms"] += L * (self.heads + self.kv_heads) * self.head_dim
        elif x.get("qk_norm"):  # Qwen3: RMSNorm over q and k heads
            out["norms"] += L * 2 * self.head_dim
        dense_layers = L - self.moe_layers
        out["mlp"] = dense_layers * self._mlp(self.ffn)
        if self.is_moe:
            per_layer = self.num_experts * self._mlp(self.moe_ffn, bias=x.get("expert_bias", False))
            per_layer += self.shared_experts * self._mlp(self.moe_ffn, bias=False)
            if self.shared_expert_ffn:
                per_layer += self._mlp(self.shared_expert_ffn, bias=False)
            out["mlp"] += self.moe_layers * per_layer
            router = self.num_experts * h
            if x.get("router_bias_correction") or x.get("router_bias"):
                router += self.num_experts
            if self.shared_expert_ffn and x.get("shared_gate", True):
                router += h  # shared_expert_gate: hidden -> 1
            out["router"] = self.moe_layers * router
        if self.layer_kinds or x.get("attention_sinks") or x.get("attn_output_gate"):
            mixers.adjust_breakdown(self, out)   # per-layer kinds, sinks, output gates
        if x.get("final_norm", True):
            out["norms"] += self._norm_params(h)
        if x.get("embedding_norm"):  # BLOOM word_embeddings_layernorm, BERT embeddings LayerNorm
            out["norms"] += self._norm_params(h)
        if self.kind == "decoder" and not self.tied_embeddings:
            out["lm_head"] = h * self.vocab + (self.vocab if x.get("lm_head_bias") else 0)
        if self.pooler:
            out["pooler"] = h * h + h
        return out

    def _t5_breakdown(self, out: dict[str, int]) -> dict[str, int]:
        h, inner = self.hidden, self.heads * self.head_dim
        buckets = self.extra.get("relative_attention_num_buckets", 32)
        attn = 4 * h * inner
        rel = buckets * self.heads  # relative position bias: first layer of each stack
        out["attention"] = (self.layers * attn + rel) + (self.decoder_layers * 2 * attn + rel)
        out["mlp"] = (self.layers + self.decoder_layers) * self._mlp(self.ffn, bias=False)
        out["norms"] = (self.layers * 2 + 1 + self.decoder_layers * 3 + 1) * self._norm_params(h)
        if not self.tied_embeddings:
            out["lm_head"] = h * self.vocab
        return out

    def param_count(self) -> int:
        """Parameters of the model a job loads (see module docstring)."""
        return int(sum(self.param_breakdown().values()))

    def param_groups(self) -> dict[str, int]:
        """Parameters by what a weight format may quantise: attention (every token mixer),
        mlp (dense MLPs and shared experts), experts (the routed experts), router (with a
        pooler), embeddings, lm_head, norms. Sums to `param_count()`."""
        bd = self.param_breakdown()
        experts = self.moe_layers * self.num_experts * self._mlp(
            self.moe_ffn, bias=self.extra.get("expert_bias", False)) if self.is_moe else 0
        return {"attention": bd["attention"], "mlp": bd["mlp"] - experts, "experts": experts,
                "router": bd["router"] + bd["pooler"],
                "embeddings": bd["embeddings"] + bd["position_embeddings"],
                "lm_head": bd["lm_head"], "norms": bd["norms"]}

    def base_param_count(self) -> int:
        """What `AutoModel.from_config` builds: `param_count()` less an untied lm_head."""
        return self.param_count() - self.param_breakdown()["lm_head"]

    def active_param_count(self) -> int:
        """Parameters one token passes through: all but the routed experts it is not sent to."""
        if not self.is_moe:
            return self.param_count()
        idle = self.num_experts - self.experts_per_token
        return self.param_count() - self.moe_layers * idle * self._mlp(self.moe_ffn, bias=False)

    def embedding_param_count(self) -> int:
        b = self.param_breakdown()
        return b["embeddings"] + b["position_embeddings"] + b["lm_head"]

    # ---- caches --------------------------------------------------------------------------
    def kv_bytes_per_token(self, dtype_bytes: float, *, mla_latent: bool = True) -> int:
        """KV-cache bytes per token of decoder self-attention:
        `2 * layers * kv_heads * head_dim * bytes` (GQA/MQA use kv_heads; head_dim may differ
        from hidden/heads). Encoders hold none. MLA (DeepSeek) caches the compressed latent and
        the shared RoPE key, `(kv_lora_rank + qk_rope_head_dim) * layers * bytes`, as vLLM,
        SGLang and DeepSeek's own inference code do; `mla_latent=False` gives what HF's eager
        DeepSeek code caches instead (full per-head K and V after up-projection)."""
        if self.kind == "encoder":
            return 0
        L = self.decoder_layers if self.kind == "encoder-decoder" else self.layers
        if self.mla:
            m = self.mla
            if mla_latent:
                return int((m["kv_lora_rank"] + m["qk_rope_head_dim"]) * L * dtype_bytes)
            per = self.heads * (m["qk_nope_head_dim"] + m["qk_rope_head_dim"] + m["v_head_dim"])
            return int(per * L * dtype_bytes)
        return int(2 * L * self.kv_heads * self.head_dim * dtype_bytes)

    def cross_kv_bytes_per_token(self, dtype_bytes: float) -> int:
        """Encoder-decoder: cross-attention K/V cached per *encoder* token (all decoder layers)."""
        if self.kind != "encoder-decoder":
            return 0
        return int(2 * self.decoder_layers * self.heads * self.head_dim * dtype_bytes)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__
             if k not in ("extra", "weight_format")}
        d["layer_kinds"] = list(self.layer_kinds)
        if self.weight_format is not None:
            d["weight_format"] = self.weight_format.describe(self.hidden)
        d["param_count"] = self.param_count()
        return d



def _bad(msg: str) -> ScenarioError:
    return ScenarioError("architecture", msg)


# ---- a decoder of a given size -----------------------------------------------------------

GENERIC_VOCAB = 32000


def generic_decoder(params: float, vocab: int = GENERIC_VOCAB) -> TransformerArch:
    """A Llama-like decoder of about `params` parameters (within 2% from 5e7 up).

    Rule (documented so results are reproducible): head_dim 128 (64 below 1B); hidden is a
    multiple of 128 chosen with layers ~= hidden / 128 (the depth/width ratio of Llama 2 7B:
    4096 / 32), heads = hidden / head_dim, no GQA, SwiGLU width 8/3 * hidden rounded up to a
    multiple of 256, untied embeddings, vocab 32000, max positions 4096. Per layer that is
    ~12.0 * hidden^2 parameters. For each hidden size the layer count closest to the request is
    taken (kept within half to twice hidden / 128); among shapes within 0.5% of the request the
    one nearest the Llama depth ratio wins, else the closest shape."""
    if isinstance(params, bool) or not isinstance(params, (int, float)) or params != params:
        raise _bad(f"'params' must be a number, got {params!r}")
    if not 2e7 <= params <= 1e13:  # below ~2e7 a 32000-token vocabulary is the whole model
        raise _bad(f"'params' must be between 2e7 and 1e13, got {params!r}")

    def build(hidden: int, layers: int) -> TransformerArch:
        hd = 128 if hidden >= 2048 else 64
        heads = max(1, hidden // hd)
        ffn = -(-int(hidden * 8 / 3) // 256) * 256
        return TransformerArch(
            model_type="generic", kind="decoder", layers=layers, decoder_layers=0, hidden=hidden,
            heads=heads, kv_heads=heads, head_dim=hidden // heads, ffn=ffn, gated_mlp=True,
            vocab=vocab, tied_embeddings=False, max_positions=4096, learned_positions=False,
            extra={"model_type": "generic"})

    # params(hidden, layers) = layers * per_layer(hidden) + fixed(hidden): for each hidden size
    # take the layer count that lands closest, within half to twice the Llama depth ratio;
    # among shapes within 0.5% of the request prefer the one nearest that ratio.
    cands = []
    for hidden in range(128, 65536 + 1, 128):
        one, two = build(hidden, 1).param_count(), build(hidden, 2).param_count()
        per_layer, fixed = two - one, one - (two - one)
        ratio = max(1, round(hidden / 128))
        if cands and fixed + per_layer * max(1, ratio // 2) > 2 * params:
            break
        layers = min(max(round((params - fixed) / per_layer), max(1, ratio // 2)), 2 * ratio)
        err = abs(fixed + per_layer * layers - params) / params
        cands.append((err, abs(layers - ratio) / ratio, hidden, layers))
    close = [c for c in cands if c[0] <= 0.005]
    _, _, hidden, layers = min(close, key=lambda c: c[1]) if close else min(cands)
    arch = build(hidden, layers)
    return arch
