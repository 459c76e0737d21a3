"""Speculative decoding (scenario key `speculative`): the proposer's weights, its KV cache and the
verify step's extra tokens, as vLLM v1 runs it (and transformers' assisted generation for
task generate).

vLLM v1 (github.com/vllm-project/vllm, vllm/v1/spec_decode/; llm_base_proposer.py @82720b1):
* draft_model.py `DraftModelProposer`: a separate model of the same tokenizer, loaded with its
  own embeddings and lm_head (`_maybe_share_embeddings` / `_maybe_share_lm_head` do nothing),
  tensor-parallel like the target (draft_tensor_parallel_size must equal it).
* eagle.py / llm_base_proposer.py `SpecDecodeBaseProposer` (EAGLE, EAGLE-3, MTP): the head's
  embed_tokens and lm_head are the target's unless the head has its own
  (`has_own_embed_tokens` / `has_own_lm_head`); MTP always shares them (also each MTP layer's
  `shared_head.head`).
* The proposer's attention layers are registered with the engine's KV-cache manager beside the
  target's (`draft_attn_groups`, `kv_cache_gid`): one pool, so every token of a sequence is
  cached in the target's layers and the proposer's.
* The scheduler schedules 1 + num_speculative_tokens tokens per running request and reserves
  the lookahead slots for them (`num_lookahead_tokens` in the KV-cache manager); the rejection
  sampler takes the target's logits of all of them (`SpecDecodeMetadata`), so the sampler's
  fp32 buffers grow with 1 + k.

Proposer shapes:
* draft_model: the catalog model (`speculative.model`), counted like any decoder.
* eagle: one LlamaDecoderLayer of the target's width (vllm/model_executor/models/llama_eagle.py
  @00da923: its first layer's input_layernorm is deleted, no final norm) + `fc` (2 h -> h, no
  bias); embeddings and lm_head shared.
* eagle3: one decoder layer whose q/k/v read 2 h (the embedding and the fused hidden state),
  `fc` (3 h -> h, the target's three auxiliary hidden states), four RMSNorms and its own lm_head
  over `draft_vocab_size` tokens (vllm/model_executor/models/llama_eagle3.py @00bd149: layer 0's
  QKVParallelLinear reads 2 * hidden; input_layernorm, hidden_norm, post_attention_layernorm
  and a final norm; fc 3 * target_hidden_size -> hidden; ParallelLMHead(draft_vocab_size));
  embeddings shared. The head's config is not in the catalog: its layer is taken at the
  target's hidden size, heads and MLP width and the draft vocabulary at 32,000 (the EAGLE-3
  Llama-3.1 heads' `draft_vocab_size`; vLLM falls back to the full vocabulary when a head
  states none), stated in the notes. Its int64 draft_id_to_target_id map (8 B per draft token)
  is left out.
* mtp: the target's `num_nextn_predict_layers` (DeepSeek-V3 / R1, GLM-4.5) or
  `mtp_num_hidden_layers` (Qwen3-Next) layers, each a decoder layer like the target's last
  (MoE where the model is) + enorm, hnorm, eh_proj (2 h -> h) and the shared head's norm
  (vllm/model_executor/models/deepseek_mtp.py DeepSeekMultiTokenPredictorLayer: enorm, hnorm,
  eh_proj, mtp_block = DeepseekV2DecoderLayer, shared_head = norm + the shared head). The
  layer is counted in the plan's format (some vLLM versions keep eh_proj unquantised: 2 h^2
  parameters, 0.1B for DeepSeek-V3).
* ngram: prompt lookup, no weights and no cache.

transformers' generate runs draft_model (`assistant_model`: its own DynamicCache over the same
tokens) and ngram (`prompt_lookup_num_tokens`); EAGLE and MTP are not part of it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ... import precision as prec_mod
from ...errors import ScenarioError
from . import formats, layer_types

EAGLE3_DRAFT_VOCAB = 32000
GENERATE_METHODS = ("draft_model", "ngram")


@dataclass(frozen=True)
class Proposer:
    method: str
    k: int                          # num_speculative_tokens
    weight_bytes: int               # the proposer's own weights on this GPU
    cache: Callable[[int], int]     # tokens -> the proposer's cache bytes of one sequence
    per_token: int                  # its cache growth per token on this GPU
    label: str


def _mtp_layers(spec) -> int:
    cfg = spec.config if spec is not None else {}
    n = cfg.get("num_nextn_predict_layers") or cfg.get("mtp_num_hidden_layers") or 0
    if not isinstance(n, int) or n < 1:
        raise ScenarioError("speculative.method", f"'mtp' needs a model with multi-token-"
                            f"prediction layers (config.json num_nextn_predict_layers or "
                            f"mtp_num_hidden_layers); '{getattr(spec, 'id', 'this model')}' "
                            "has none")
    return n


def _one_layer_params(a) -> tuple[int, int]:
    """(linear, norm) parameters of one decoder layer like the target's last one."""
    h, d = a.hidden, a.head_dim
    if a.mla:
        attn = a.param_breakdown()["attention"] // max(1, a.layers)
    else:
        attn = 2 * h * a.heads * d + 2 * h * a.kv_heads * d
    if a.is_moe:
        mats = 3 if a.gated_mlp else 2
        mlp = (a.num_experts + a.shared_experts) * mats * h * a.moe_ffn
        mlp += mats * h * a.shared_expert_ffn + a.num_experts * h
    else:
        mlp = (3 if a.gated_mlp else 2) * h * a.ffn
    return attn + mlp, 2 * h


def _bytes(linear: int, kept: int, arch, prec: str, tp: int) -> int:
    wf = formats.shipped(arch, prec)
    if wf is not None:
        return int((linear * wf.bytes_per_param(arch.hidden) + 2 * kept) / tp)
    return int(prec_mod.weights_bytes(linear, kept, prec) / tp)


def _attn_token_bytes(a, kv_b: float, tp: int, mla_latent: bool) -> int:
    """KV bytes per token of one attention layer of the target's shape."""
    if a.mla:
        m = a.mla
        per = (m["kv_lora_rank"] + m["qk_rope_head_dim"]) if mla_latent else \
            a.heads * (m["qk_nope_head_dim"] + m["qk_rope_head_dim"] + m["v_head_dim"])
        return int(per * kv_b)
    return int(2 * a.kv_heads * a.head_dim * kv_b) // tp


def proposer(ctx, kv_b: float, *, engine: str) -> Proposer | None:
    """The scenario's proposer on this GPU (None without `speculative`)."""
    cfg = (ctx.sc.extra or {}).get("speculative")
    if not cfg:
        return None
    method, a, tp = cfg["method"], ctx.arch, max(1, ctx.L.tensor)
    if engine == "hf" and method not in GENERATE_METHODS:
        raise ScenarioError("speculative.method", f"'{method}' is not part of transformers' "
                            "generate (it runs draft_model as assistant_model and ngram as "
                            "prompt lookup); estimate task 'serve' (vLLM) for it")
    mla_latent = engine == "vllm"
    zero = Proposer(method, int(cfg.get("num_speculative_tokens") or 0), 0, lambda t: 0, 0,
                    "n-gram prompt lookup (no weights, no cache)")
    if method == "ngram":
        return zero
    h = a.hidden
    if method == "draft_model":
        from ...catalog import get_model
        d = get_model(cfg["model"]).arch
        bd = d.param_breakdown()
        linear = bd["attention"] + bd["mlp"] + bd["router"]
        kept = bd["norms"] + bd["embeddings"] + bd["position_embeddings"] + bd["lm_head"]
        w = _bytes(linear, kept, d, ctx.prec, tp)
        cache = layer_types.cache_fn(d, kv_b, tp, mla_latent=mla_latent, engine=engine,
                                     state_b=kv_b if engine == "vllm" else None)
        per = layer_types.growth_per_token(d, kv_b, tp, mla_latent)
        return Proposer(method, zero.k, w, cache, per,
                        f"draft model {cfg['model']} ({d.param_count() / 1e9:.2f}B parameters)")
    linear, kept = _one_layer_params(a)
    layers = 1
    if method == "eagle":
        linear, kept = linear + 2 * h * h, h          # fc 2h -> h; no input_layernorm
        label = "EAGLE head (one decoder layer of the target's shape + fc 2h -> h)"
    elif method == "eagle3":
        wider_qkv = h * (a.heads + 2 * a.kv_heads) * a.head_dim   # q/k/v read 2h, not h
        linear += wider_qkv + 3 * h * h + EAGLE3_DRAFT_VOCAB * h     # + fc, its own lm_head
        kept = 4 * h
        label = (f"EAGLE-3 head (one decoder layer of the target's shape, q/k/v over 2h, "
                 f"fc 3h -> h, its own lm_head over {EAGLE3_DRAFT_VOCAB:,} draft tokens)")
    else:
        layers = _mtp_layers(ctx.sc.spec)
        linear, kept = layers * (linear + 2 * h * h), layers * (kept + 3 * h)
        label = (f"{layers} MTP layer(s) of the target (one decoder layer each + eh_proj "
                 "2h -> h; embeddings and lm_head shared)")
    per = layers * _attn_token_bytes(a, kv_b, tp, mla_latent)
    k = zero.k or layers
    return Proposer(method, k, _bytes(linear, kept, a, ctx.prec, tp), lambda t: t * per, per,
                    label)


def apply_generate(ctx, phases: dict, cache, kv_b: float) -> Proposer | None:
    """transformers' assisted generation: the assistant's weights and DynamicCache beside the
    target's; the verify forward scores k + 1 tokens per sequence (their logits) and both caches
    hold the k candidates until the rejected ones are cropped."""
    p = proposer(ctx, kv_b, engine="hf")
    if p is None:
        return None
    b, s, n = ctx.b, ctx.s, int(ctx.sc.new_tokens or 0)
    for name, ph in phases.items():
        ph["weights"] = ph["weights"] + p.weight_bytes
        ph["kv_cache"] = ph["kv_cache"] + b * p.cache(s)
    if "decode" in phases:
        t = s + n - 1
        dec = phases["decode"]
        dec["kv_cache"] = dec["kv_cache"] - b * p.cache(s) + b * p.cache(t + p.k) + \
            b * (cache(t + p.k) - cache(t))
        dec["activations"] = dec["activations"] + ctx.logits_peak(b * (p.k + 1), False) - \
            ctx.logits_peak(b, False)
    ctx.notes.append(f"speculative decoding ({p.method}, k = {p.k}): {p.label}; proposer "
                     f"weights {p.weight_bytes / 2**30:.2f} GiB, its cache "
                     f"{p.per_token:,} B per token per sequence; the verify forward scores "
                     f"{p.k + 1} tokens per sequence (transformers assisted generation)")
    return p


def serve_terms(ctx, kv_b: float, seqs: int, kvpt: int, seq_bytes):
    """(proposer weights, extra sampler bytes, KV bytes per token, seq_bytes) under vLLM."""
    p = proposer(ctx, kv_b, engine="vllm")
    if p is None:
        return None, 0, kvpt, seq_bytes
    extra_sampler = 3 * 4 * seqs * p.k * ctx.arch.vocab   # logits, probs, logprobs of k more

    def both(t):
        return seq_bytes(t + p.k) + p.cache(t + p.k)
    ctx.notes.append(f"speculative decoding ({p.method}, k = {p.k}, vLLM v1): {p.label}; "
                     f"proposer weights {p.weight_bytes / 2**30:.2f} GiB come out of the pool; "
                     f"its layers share the KV pool (+{p.per_token:,} B per token); each "
                     f"sequence reserves {p.k} lookahead slots; the sampler scores 1 + {p.k} "
                     "tokens per sequence")
    return p, extra_sampler, kvpt + p.per_token, both


def bandwidth(bw: dict, p: Proposer | None) -> dict:
    """The proposer's figures in the estimate's bandwidth section (the JSON)."""
    if p is None:
        return bw
    bw["speculative_tokens"] = p.k
    bw["draft_weight_bytes"] = int(p.weight_bytes)
    bw["draft_kv_bytes_per_token"] = int(p.per_token)
    if bw.get("tokens_per_step"):
        bw["verify_tokens_per_step"] = int(bw["tokens_per_step"]) * (p.k + 1)
    return bw
