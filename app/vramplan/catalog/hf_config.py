"""Hugging Face `config.json` dicts read into one `TransformerArch` (transformer_arch.py).

`arch_from_config(config)` reads the keys each `model_type` uses (GPT-2's `n_embd`, T5's
`d_model`, Llama's `hidden_size`, ...): the shapes, and what the kernels a step runs depend on
(the MLP activation, dropout probabilities, whether eager attention upcasts its softmax). Where a
config leaves a key out, the default of the model type's HF config class applies (GPT-2, BERT,
RoBERTa, GPT-BigCode and T5 train with dropout 0.1; OPT with dropout 0.1 and no attention
dropout; the Llama family and the rest without dropout).

Conventions worth knowing: OPT's learned position table has `max_position_embeddings + 2` rows
(the offset OPT inherited from fairseq); RoBERTa's configs already include its offset
(`max_position_embeddings` 514); Falcon's layer norms always carry a bias; DeepSeek-V3's MoE gate
holds an `e_score_correction_bias` and its multi-token-prediction layer is not part of the HF
model (671B, not 685B).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from ..errors import ScenarioError
from .layer_config import extras, layer_facts
from .softcap import softcap_facts
from .transformer_arch import TransformerArch
from .weight_formats import weight_format
from .whisper import whisper_fields

# model_type -> (kind, style). `style` selects the reader below; any type not listed is read as
# a Llama-like decoder ("generic") when it carries the Llama keys.
MODEL_TYPES: dict[str, tuple[str, str]] = {
    "llama": ("decoder", "llama"), "mistral": ("decoder", "llama"),
    "mixtral": ("decoder", "llama"), "qwen2": ("decoder", "llama"),
    "qwen2_moe": ("decoder", "llama"), "qwen3": ("decoder", "llama"),
    "qwen3_moe": ("decoder", "llama"), "gemma": ("decoder", "llama"),
    "gemma2": ("decoder", "llama"), "phi3": ("decoder", "llama"),
    "granite": ("decoder", "llama"), "olmo2": ("decoder", "llama"),
    "gpt_oss": ("decoder", "llama"), "gemma3_text": ("decoder", "llama"),
    "qwen3_next": ("decoder", "llama"), "llama4_text": ("decoder", "llama"),
    "granitemoehybrid": ("decoder", "llama"), "nemotron_h": ("decoder", "llama"),
    "glm4_moe": ("decoder", "llama"), "falcon_h1": ("decoder", "llama"),
    "generic": ("decoder", "llama"),
    "phi": ("decoder", "phi"), "gpt2": ("decoder", "gpt2"), "gpt_bigcode": ("decoder", "gpt2"),
    "opt": ("decoder", "opt"), "falcon": ("decoder", "falcon"), "bloom": ("decoder", "bloom"),
    "gpt_neox": ("decoder", "gpt_neox"), "deepseek_v3": ("decoder", "deepseek"),
    "deepseek_v2": ("decoder", "deepseek"),
    # Kimi K2 ships DeepseekV3ForCausalLM under its own model_type (moonshotai/Kimi-K2-Instruct
    # config.json: architectures ["DeepseekV3ForCausalLM"], model_type "kimi_k2")
    "kimi_k2": ("decoder", "deepseek"),
    "bert": ("encoder", "bert"), "roberta": ("encoder", "bert"),
    "t5": ("encoder-decoder", "t5"), "mt5": ("encoder-decoder", "t5"),
    "whisper": ("encoder-decoder", "whisper"),   # catalog/whisper.py
}

# HF's PretrainedConfig default is tie_word_embeddings=True; these config classes override it.
_UNTIED_BY_DEFAULT = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                      "phi3", "phi", "gpt_neox", "deepseek_v3", "deepseek_v2", "granite", "olmo2",
                      "kimi_k2", "generic", "gpt_oss", "qwen3_next", "llama4_text", "nemotron_h",
                      "glm4_moe", "falcon_h1"}

# ---- what the kernels depend on ----------------------------------------------------------

# (hidden, attention) dropout of the HF config classes that train with dropout by default
# (GPT2Config resid/embd/attn_pdrop 0.1, BertConfig / RobertaConfig hidden_dropout_prob and
# attention_probs_dropout_prob 0.1, GPTBigCodeConfig 0.1, OPTConfig dropout 0.1 and
# attention_dropout 0.0, T5Config dropout_rate 0.1); every other listed type defaults to 0.0.
DROPOUT_DEFAULTS: dict[str, tuple[float, float]] = {
    "gpt2": (0.1, 0.1), "gpt_bigcode": (0.1, 0.1), "bert": (0.1, 0.1), "roberta": (0.1, 0.1),
    "opt": (0.1, 0.0), "t5": (0.1, 0.1), "mt5": (0.1, 0.1)}
HIDDEN_DROPOUT_KEYS = ("resid_pdrop", "hidden_dropout_prob", "hidden_dropout", "dropout",
                       "dropout_rate")
ATTENTION_DROPOUT_KEYS = ("attn_pdrop", "attention_probs_dropout_prob", "attention_dropout",
                          "dropout_rate")
# HF modules whose eager attention keeps softmax in the input dtype for 16-bit inputs:
# BERT / RoBERTa, and GPT-2 unless `reorder_and_upcast_attn`. The others (Llama family, OPT in
# fp16, GPTBigCode, T5, BLOOM, Falcon, NeoX) run softmax(..., dtype=torch.float32), cast back.
# gpt-oss: softmax(combined_logits, dtype=combined_logits.dtype) over the scores and the sinks
# (transformers 5.23 models/gpt_oss/modeling_gpt_oss.py eager_attention_forward).
# Whisper: its eager_attention_forward (BART's) runs softmax(attn_weights, dim=-1) in the input
# dtype (transformers models/whisper/modeling_whisper.py).
NO_SOFTMAX_UPCAST = {"bert", "roberta", "gpt2", "gpt_oss", "whisper"}
ACTIVATION_KEYS = ("hidden_activation", "hidden_act", "activation_function")
# the MLP activation where a config names none (the HF config classes' defaults)
_ACTIVATION_DEFAULTS = {"llama": "silu", "deepseek": "silu", "gpt2": "gelu_new", "opt": "relu",
                        "bert": "gelu", "falcon": "gelu", "bloom": "gelu", "gpt_neox": "gelu",
                        "phi": "gelu_new"}


def default_dropout(model_type: str) -> tuple[float, float]:
    """(hidden, attention) dropout of a model type's HF config class (0.0 when unlisted)."""
    return DROPOUT_DEFAULTS.get(model_type, (0.0, 0.0))


def upcasts_softmax(model_type: str) -> bool:
    """Whether a model type's eager attention runs softmax in fp32 for 16-bit inputs."""
    return model_type not in NO_SOFTMAX_UPCAST


def _kernel_facts(r: "_Reader", mt: str, style: str) -> dict:
    """activation, hidden_dropout, attention_dropout, softmax_upcast of a config."""
    hid0, att0 = default_dropout(mt)
    if style == "t5":  # feed_forward_proj "relu" / "gated-gelu" (T5 maps gelu to gelu_new)
        proj = r.cfg.get("feed_forward_proj", "relu")
        act = proj.split("-")[-1]
        act = "gelu_new" if act == "gelu" else act
    else:
        act = r.str(*ACTIVATION_KEYS, default=_ACTIVATION_DEFAULTS.get(style, "silu"))
    upcast = upcasts_softmax(mt) or (mt == "gpt2" and r.bool("reorder_and_upcast_attn", False))
    return {"activation": act.lower(), "softmax_upcast": upcast,
            "hidden_dropout": r.prob(*HIDDEN_DROPOUT_KEYS, default=hid0),
            "attention_dropout": r.prob(*ATTENTION_DROPOUT_KEYS, default=att0),
            **softcap_facts(r.cfg, mt)}


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

    def prob(self, *keys: str, default: float) -> float:
        """A probability in [0, 1] (the first of `keys` the config gives)."""
        for k in keys:
            v = self.cfg.get(k)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise _bad(f"'{k}' must be a probability between 0 and 1, got {v!r}")
            return float(v)
        return default

    def str(self, *keys: str, default: str) -> str:
        for k in keys:
            v = self.cfg.get(k)
            if v is None:
                continue
            if not isinstance(v, str) or not v:
                raise _bad(f"'{k}' must be a name (a string), got {v!r}")
            return v
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
    arch = dataclasses.replace(reader(r, mt, kind, tied), **_kernel_facts(r, mt, style))
    if style == "llama":   # per-layer kinds, mixers, model-type extras, the shipped format
        arch = dataclasses.replace(arch, **layer_facts(r, mt, arch.layers))
    elif style == "deepseek":   # DeepSeek-V3 / R1 and Kimi K2 ship block-scaled FP8
        arch = dataclasses.replace(arch, weight_format=weight_format(
            config.get("quantization_config")))
    if arch.heads % max(arch.kv_heads, 1):
        raise _bad(f"num_attention_heads ({arch.heads}) must be a multiple of the KV heads "
                   f"({arch.kv_heads})")
    if arch.experts_per_token > arch.num_experts:
        raise _bad(f"'num_experts_per_tok' ({arch.experts_per_token}) exceeds the number of "
                   f"experts ({arch.num_experts})")
    return arch


def _heads(r: _Reader, hidden: int, heads: int) -> int:
    if r.has("head_dim", "attention_head_dim"):   # Nemotron-H: attention_head_dim
        return r.int("head_dim", "attention_head_dim")
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
    shared_ffn = r.int("shared_expert_intermediate_size", "shared_intermediate_size", default=0,
                       minimum=0) if experts else 0
    shared, dense_first = 0, 0
    if mt == "llama4_text":   # Llama4TextMoe: a shared expert as wide as the routed ones;
        # MoE every `interleave_moe_layer_step`th layer, the others dense of intermediate_size_mlp
        step = r.int("interleave_moe_layer_step", default=1)
        shared, dense_first = 1, layers - layers // step
        ffn, moe_ffn = r.int("intermediate_size_mlp", default=ffn), ffn
    if mt == "glm4_moe" and experts:   # Glm4MoeMoE: n_shared_experts of moe_intermediate_size;
        # the first first_k_dense_replace layers are dense MLPs (Glm4MoeConfig defaults 1 and 1)
        shared = r.int("n_shared_experts", default=1, minimum=0)
        dense_first = r.int("first_k_dense_replace", default=1, minimum=0)
    if mt == "granitemoehybrid" and not experts:
        ffn = r.int("shared_intermediate_size", default=ffn)
    norms = 4 if mt in ("gemma2", "gemma3_text") else 1 if mt == "nemotron_h" else 2
    qkv_bias = mt in ("qwen2", "qwen2_moe") or r.bool("attention_bias", False)
    return TransformerArch(
        model_type=mt, kind=kind, layers=layers, decoder_layers=0, hidden=hidden, heads=heads,
        kv_heads=kv, head_dim=_heads(r, hidden, heads), ffn=ffn,
        gated_mlp=mt != "nemotron_h",   # NemotronHMLP: up_proj, relu2, down_proj
        vocab=r.int("vocab_size"), tied_embeddings=tied,
        max_positions=r.int("max_position_embeddings", "n_positions", default=4096),
        learned_positions=False, norm="rmsnorm", bias=False, qkv_bias=qkv_bias,
        num_experts=experts,
        experts_per_token=r.int("num_experts_per_tok", default=2 if experts else 0, minimum=0),
        moe_ffn=moe_ffn, shared_expert_ffn=shared_ffn, norms_per_layer=norms,
        shared_experts=shared, first_dense_layers=dense_first,
        extra={"model_type": mt, "qk_norm": mt in ("qwen3", "qwen3_moe"), **extras(r, mt)})


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
        extra={"router_bias_correction": mt in ("deepseek_v3", "kimi_k2")})


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


def _whisper(r: _Reader, mt: str, kind: str, tied: bool) -> TransformerArch:
    return TransformerArch(**whisper_fields(r, mt, kind, tied, _bad))


_READERS = {"llama": _llama, "deepseek": _deepseek, "gpt2": _gpt2, "opt": _opt, "bert": _bert,
            "t5": _t5, "falcon": _falcon, "bloom": _bloom, "gpt_neox": _gpt_neox, "phi": _phi,
            "whisper": _whisper}

