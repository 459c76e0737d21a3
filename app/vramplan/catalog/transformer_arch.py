"""Transformer architectures normalised from Hugging Face `config.json` dicts.

`arch_from_config(config)` reads the keys each `model_type` uses (GPT-2's `n_embd`, T5's
`d_model`, Llama's `hidden_size`, ...) into one `TransformerArch`, whose fields are what the
memory model needs: shapes, grouped-query attention, gated MLPs, tied embeddings, learned
positions, Mixture-of-Experts and DeepSeek's multi-head latent attention (MLA).

Parameter counts follow the Hugging Face modules layer by layer, so they match
`sum(p.numel() for p in model.parameters())`:

* `param_count()` is the model a job loads: `*ForCausalLM` for decoders (lm_head counted once when
  tied), `*ForConditionalGeneration` for encoder-decoders, the bare `*Model` for encoders (BERT /
  RoBERTa incl. the pooler: their task heads are small and task-specific).
* `base_param_count()` is what `AutoModel` builds: the same less an untied lm_head.

Conventions worth knowing: OPT's learned position table has `max_position_embeddings + 2` rows
(the offset OPT inherited from fairseq); RoBERTa's configs already include its offset
(`max_position_embeddings` 514); Falcon's layer norms always carry a bias; DeepSeek-V3's MoE gate
holds an `e_score_correction_bias` and its multi-token-prediction layer is not part of the HF
model (671B, not 685B).
"""
from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Any

from ..errors import ScenarioError
from ..vocab import TRANSFORMER_FAMILIES

KINDS = TRANSFORMER_FAMILIES  # a transformer's kind is its family

# model_type -> (kind, style). `style` selects the reader below; any type not listed is read as
# a Llama-like decoder ("generic") when it carries the Llama keys.
MODEL_TYPES: dict[str, tuple[str, str]] = {
    "llama": ("decoder", "llama"), "mistral": ("decoder", "llama"),
    "mixtral": ("decoder", "llama"), "qwen2": ("decoder", "llama"),
    "qwen2_moe": ("decoder", "llama"), "qwen3": ("decoder", "llama"),
    "qwen3_moe": ("decoder", "llama"), "gemma": ("decoder", "llama"),
    "gemma2": ("decoder", "llama"), "phi3": ("decoder", "llama"),
    "granite": ("decoder", "llama"), "olmo2": ("decoder", "llama"),
    "generic": ("decoder", "llama"),
    "phi": ("decoder", "phi"), "gpt2": ("decoder", "gpt2"), "gpt_bigcode": ("decoder", "gpt2"),
    "opt": ("decoder", "opt"), "falcon": ("decoder", "falcon"), "bloom": ("decoder", "bloom"),
    "gpt_neox": ("decoder", "gpt_neox"), "deepseek_v3": ("decoder", "deepseek"),
    "deepseek_v2": ("decoder", "deepseek"),
    "bert": ("encoder", "bert"), "roberta": ("encoder", "bert"),
    "t5": ("encoder-decoder", "t5"), "mt5": ("encoder-decoder", "t5"),
}

# HF's PretrainedConfig default is tie_word_embeddings=True; these config classes override it.
_UNTIED_BY_DEFAULT = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                      "phi3", "phi", "gpt_neox", "deepseek_v3", "deepseek_v2", "granite", "olmo2",
                      "generic"}


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
        if x.get("qk_norm"):  # Qwen3: RMSNorm over q and k heads
            out["norms"] += L * 2 * self.head_dim
        dense_layers = L - self.moe_layers
        out["mlp"] = dense_layers * self._mlp(self.ffn)
        if self.is_moe:
            per_layer = self.num_experts * self._mlp(self.moe_ffn, bias=False)
            per_layer += self.shared_experts * self._mlp(self.moe_ffn, bias=False)
            if self.shared_expert_ffn:
                per_layer += self._mlp(self.shared_expert_ffn, bias=False)
            out["mlp"] += self.moe_layers * per_layer
            router = self.num_experts * h
            if x.get("router_bias_correction"):
                router += self.num_experts
            if self.shared_expert_ffn:
                router += h  # shared_expert_gate: hidden -> 1
            out["router"] = self.moe_layers * router
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
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "extra"}
        d["param_count"] = self.param_count()
        return d


# ---- reading configs ---------------------------------------------------------------------

def _bad(msg: str) -> ScenarioError:
    return ScenarioError("architecture", msg)


# larger than any real config value (vocabularies ~256k, context lengths ~10M); keeps
# products of dimensions far from float overflow
MAX_DIM = 2**40


class _Reader:
    """Typed access to a config dict; every failure is a ScenarioError naming the HF key."""

    def __init__(self, cfg: dict):
        self.cfg = cfg

    def has(self, *keys: str) -> bool:
        return any(self.cfg.get(k) is not None for k in keys)

    def int(self, *keys: str, default: Any = ..., minimum: int = 1) -> int:
        for k in keys:
            v = self.cfg.get(k)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (
                    isinstance(v, float) and (not math.isfinite(v) or not v.is_integer())):
                raise _bad(f"'{k}' must be an integer, got {v!r}")
            if v > MAX_DIM:
                raise _bad(f"'{k}' must be <= {MAX_DIM:,}, got {v!r}")
            if v < minimum:
                raise _bad(f"'{k}' must be >= {minimum}, got {v!r}")
            return int(v)
        if default is ...:
            raise _bad(f"missing key '{keys[0]}'" + (f" (or {', '.join(map(repr, keys[1:]))})"
                                                    if len(keys) > 1 else ""))
        return default

    def bool(self, key: str, default: bool) -> bool:
        v = self.cfg.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise _bad(f"'{key}' must be true or false, got {v!r}")
        return v


def arch_from_config(config: dict) -> TransformerArch:
    """Normalise a Hugging Face config.json dict. Unknown `model_type`s (or none) are read as a
    Llama-like decoder (gated MLP, RMSNorm, no biases) from the Llama key names. Raises
    ScenarioError('architecture', ...) naming the missing or bad key."""
    if not isinstance(config, dict):
        raise _bad(f"must be an object (a config.json), got {type(config).__name__}")
    mt = config.get("model_type", "generic")
    if not isinstance(mt, str):
        raise _bad(f"'model_type' must be a string, got {mt!r}")
    kind, style = MODEL_TYPES.get(mt, ("decoder", "llama"))
    r = _Reader(config)
    tied = r.bool("tie_word_embeddings", mt not in _UNTIED_BY_DEFAULT)
    reader = _READERS[style]
    arch = reader(r, mt, kind, tied)
    if arch.heads % max(arch.kv_heads, 1):
        raise _bad(f"num_attention_heads ({arch.heads}) must be a multiple of the KV heads "
                   f"({arch.kv_heads})")
    if arch.experts_per_token > arch.num_experts:
        raise _bad(f"'num_experts_per_tok' ({arch.experts_per_token}) exceeds the number of "
                   f"experts ({arch.num_experts})")
    return arch


def _heads(r: _Reader, hidden: int, heads: int) -> int:
    if r.has("head_dim"):
        return r.int("head_dim")
    if hidden % heads:
        raise _bad(f"hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads}); "
                   f"give 'head_dim'")
    return hidden // heads


def _llama(r: _Reader, mt: str, kind: str, tied: bool) -> TransformerArch:
    hidden = r.int("hidden_size", "n_embd", "d_model")
    layers = r.int("num_hidden_layers", "n_layer", "num_layers")
    heads = r.int("num_attention_heads", "n_head", "num_heads")
    kv = r.int("num_key_value_heads", default=heads)
    ffn = r.int("intermediate_size", "n_inner", "ffn_dim", default=None)
    experts = r.int("num_local_experts", "num_experts", "n_routed_experts", default=0, minimum=0)
    moe_ffn = r.int("moe_intermediate_size", default=0, minimum=0) if experts else 0
    if ffn is None:
        if not experts:
            raise _bad("missing key 'intermediate_size'")
        ffn = moe_ffn
    if experts and not moe_ffn:
        moe_ffn = ffn  # Mixtral: experts are full-width MLPs
    shared_ffn = r.int("shared_expert_intermediate_size", default=0, minimum=0) if experts else 0
    norms = 4 if mt == "gemma2" else 2
    qkv_bias = mt in ("qwen2", "qwen2_moe") or r.bool("attention_bias", False)
    return TransformerArch(
        model_type=mt, kind=kind, layers=layers, decoder_layers=0, hidden=hidden, heads=heads,
        kv_heads=kv, head_dim=_heads(r, hidden, heads), ffn=ffn, gated_mlp=True,
        vocab=r.int("vocab_size"), tied_embeddings=tied,
        max_positions=r.int("max_position_embeddings", "n_positions", default=4096),
        learned_positions=False, norm="rmsnorm", bias=False, qkv_bias=qkv_bias,
        num_experts=experts,
        experts_per_token=r.int("num_experts_per_tok", default=2 if experts else 0, minimum=0),
        moe_ffn=moe_ffn, shared_expert_ffn=shared_ffn, norms_per_layer=norms,
        extra={"model_type": mt, "qk_norm": mt in ("qwen3", "qwen3_moe")})


def _deepseek(r: _Reader, mt: str, kind: str, tied: bool) -> TransformerArch:
    hidden, heads = r.int("hidden_size"), r.int("num_attention_heads")
    mla = {"kv_lora_rank": r.int("kv_lora_rank"),
           "q_lora_rank": r.int("q_lora_rank", default=0, minimum=0),
           "qk_rope_head_dim": r.int("qk_rope_head_dim"),
           "qk_nope_head_dim": r.int("qk_nope_head_dim"),
           "v_head_dim": r.int("v_head_dim")}
    experts = r.int("n_routed_experts", default=0, minimum=0)
    return TransformerArch(
        model_type=mt, kind=kind, layers=r.int("num_hidden_layers"), decoder_layers=0,
        hidden=hidden, heads=heads, kv_heads=r.int("num_key_value_heads", default=heads),
        head_dim=mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"],
        ffn=r.int("intermediate_size"), gated_mlp=True, vocab=r.int("vocab_size"),
        tied_embeddings=tied, max_positions=r.int("max_position_embeddings", default=4096),
        learned_positions=False, norm="rmsnorm", num_experts=experts,
        experts_per_token=r.int("num_experts_per_tok", default=0, minimum=0),
        moe_ffn=r.int("moe_intermediate_size", default=0, minimum=0),
        shared_experts=r.int("n_shared_experts", default=0, minimum=0),
        first_dense_layers=r.int("first_k_dense_replace", default=0, minimum=0), mla=mla,
        extra={"router_bias_correction": mt == "deepseek_v3"})


def _gpt2(r: _Reader, mt: str, kind: str, tied: bool) -> TransformerArch:
    hidden, heads = r.int("n_embd", "hidden_size"), r.int("n_head", "num_attention_heads")
    mq = mt == "gpt_bigcode" and r.bool("multi_query", True)
    return TransformerArch(
        model_type=mt, kind=kind, layers=r.int("n_layer", "num_hidden_layers"), decoder_layers=0,
        hidden=hidden, heads=heads, kv_heads=1 if mq else heads,
        head_dim=_heads(r, hidden, heads), ffn=r.int("n_inner", default=4 * hidden),
        gated_mlp=False, vocab=r.int("vocab_size"), tied_embeddings=tied,
        max_positions=r.int("n_positions", "max_position_embeddings", default=1024),
        learned_positions=True, norm="layernorm", bias=True)


def _opt(r: _Reader, mt: str, kind: str, tied: bool) -> TransformerArch:
    hidden, heads = r.int("hidden_size"), r.int("num_attention_heads")
    pre_ln = r.bool("do_layer_norm_before", True)
    return TransformerArch(
        model_type=mt, kind=kind, layers=r.int("num_hidden_layers"), decoder_layers=0,
        hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads,
        ffn=r.int("ffn_dim"), gated_mlp=False, vocab=r.int("vocab_size"), tied_embeddings=tied,
        max_positions=r.int("max_position_embeddings", default=2048), learned_positions=True,
        norm="layernorm", bias=r.bool("enable_bias", True),
        extra={"position_offset": 2, "final_norm": pre_ln,
               "word_embed_proj_dim": r.int("word_embed_proj_dim", default=hidden)})


def _bert(r: _Reader, mt: str, kind: str, tied: bool) -> TransformerArch:
    hidden, heads = r.int("hidden_size"), r.int("num_attention_heads")
    return TransformerArch(
        model_type=mt, kind=kind, layers=r.int("num_hidden_layers"), decoder_layers=0,
        hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads,
        ffn=r.int("intermediate_size"), gated_mlp=False, vocab=r.int("vocab_size"),
        tied_embeddings=True, max_positions=r.int("max_position_embeddings", default=512),
        learned_positions=True, type_vocab=r.int("type_vocab_size", default=2, minimum=0),
        norm="layernorm", bias=True, pooler=True,
        extra={"final_norm": False, "embedding_norm": True})


def _t5(r: _Reader, mt: str, kind: str, tied: bool) -> TransformerArch:
    layers = r.int("num_layers")
    proj = r.cfg.get("feed_forward_proj", "relu")
    if not isinstance(proj, str):
        raise _bad(f"'feed_forward_proj' must be a string, got {proj!r}")
    return TransformerArch(
        model_type=mt, kind=kind, layers=layers,
        decoder_layers=r.int("num_decoder_layers", default=layers),
        hidden=r.int("d_model"), heads=r.int("num_heads"), kv_heads=r.int("num_heads"),
        head_dim=r.int("d_kv", default=64), ffn=r.int("d_ff"),
        gated_mlp=proj.startswith("gated"), vocab=r.int("vocab_size"), tied_embeddings=tied,
        max_positions=r.int("n_positions", default=512), learned_positions=False,
        norm="rmsnorm", bias=False, norms_per_layer=2,
        extra={"relative_attention_num_buckets":
               r.int("relative_attention_num_buckets", default=32)})


def _falcon(r: _Reader, mt: str, kind: str, tied: bool) -> TransformerArch:
    hidden, heads = r.int("hidden_size"), r.int("num_attention_heads", "n_head")
    new_arch = r.bool("new_decoder_architecture", False)
    if new_arch:
        kv, norms = r.int("num_kv_heads", default=heads), r.int("num_ln_in_parallel_attn",
                                                                 default=2)
    elif r.bool("multi_query", True):
        kv, norms = 1, 1 if r.bool("parallel_attn", True) else 2
    else:
        kv, norms = heads, 1 if r.bool("parallel_attn", True) else 2
    return TransformerArch(
        model_type=mt, kind=kind, layers=r.int("num_hidden_layers", "n_layer"), decoder_layers=0,
        hidden=hidden, heads=heads, kv_heads=kv, head_dim=hidden // heads,
        ffn=r.int("ffn_hidden_size", default=4 * hidden), gated_mlp=False,
        vocab=r.int("vocab_size"), tied_embeddings=tied,
        max_positions=r.int("max_position_embeddings", default=2048), learned_positions=False,
        norm="layernorm", bias=r.bool("bias", False), norms_per_layer=norms,
        extra={"falcon_qkv": True})


def _bloom(r: _Reader, mt: str, kind: str, tied: bool) -> TransformerArch:
    hidden, heads = r.int("hidden_size", "n_embed"), r.int("n_head", "num_attention_heads")
    return TransformerArch(
        model_type=mt, kind=kind, layers=r.int("n_layer", "num_hidden_layers"), decoder_layers=0,
        hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads, ffn=4 * hidden,
        gated_mlp=False, vocab=r.int("vocab_size"), tied_embeddings=tied,
        max_positions=r.int("seq_length", "max_position_embeddings", default=2048),
        learned_positions=False, norm="layernorm", bias=True, extra={"embedding_norm": True})


def _gpt_neox(r: _Reader, mt: str, kind: str, tied: bool) -> TransformerArch:
    hidden, heads = r.int("hidden_size"), r.int("num_attention_heads")
    return TransformerArch(
        model_type=mt, kind=kind, layers=r.int("num_hidden_layers"), decoder_layers=0,
        hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads,
        ffn=r.int("intermediate_size"), gated_mlp=False, vocab=r.int("vocab_size"),
        tied_embeddings=tied, max_positions=r.int("max_position_embeddings", default=2048),
        learned_positions=False, norm="layernorm", bias=r.bool("attention_bias", True))


def _phi(r: _Reader, mt: str, kind: str, tied: bool) -> TransformerArch:
    """Phi-1/1.5/2: parallel attention + MLP with one LayerNorm, biases, biased lm_head."""
    hidden, heads = r.int("hidden_size"), r.int("num_attention_heads")
    return TransformerArch(
        model_type=mt, kind=kind, layers=r.int("num_hidden_layers"), decoder_layers=0,
        hidden=hidden, heads=heads, kv_heads=r.int("num_key_value_heads", default=heads),
        head_dim=hidden // heads, ffn=r.int("intermediate_size"), gated_mlp=False,
        vocab=r.int("vocab_size"), tied_embeddings=tied,
        max_positions=r.int("max_position_embeddings", default=2048), learned_positions=False,
        norm="layernorm", bias=True, norms_per_layer=1, extra={"lm_head_bias": True})


_READERS = {"llama": _llama, "deepseek": _deepseek, "gpt2": _gpt2, "opt": _opt, "bert": _bert,
            "t5": _t5, "falcon": _falcon, "bloom": _bloom, "gpt_neox": _gpt_neox, "phi": _phi}


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
