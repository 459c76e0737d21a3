"""What a transformer step moves and computes, per GPU: the weights it reads (MoE: only the
experts its tokens are routed to), its FLOPs, and the serving engine's decode step.

Conventions (each stated in the estimate's notes where it applies):
- MoE routing is taken as uniform: with T tokens in a step and top-k of E experts per layer,
  the expected number of distinct experts a layer runs is E * (1 - (1 - k/E)^T) (each token
  misses a given expert with probability 1 - k/E). One decode token reads k experts (Mixtral:
  2 of 8, about 13B of 47B parameters); a prefill or training step of thousands of tokens
  reads them all.
- FLOPs count the matmuls (2 per multiply-add): the per-token matmul parameters N (attention,
  MLP with the active experts, router, LM head; no embedding lookup) and attention
  4 * layers * context * width per token forward (QK^T and AV, the non-causal count of the
  PaLM / Megatron MFU formula). Training: 6N + 3 attention per token (forward + two backward
  matmuls); LoRA / QLoRA: 4N + 3 attention (frozen base: no weight gradients); full
  recomputation adds a forward (2N + attention), selective the attention core. Inference:
  2N + attention. Divided over tensor x pipeline x context ranks (one data-parallel rank's
  micro-batches).
"""
from __future__ import annotations

from ... import precision as prec_mod
from ...units import counted
from ...vec import to_int
from . import formats


def expert_params(arch) -> int:
    """Parameters of one routed expert (gate/up/down or up/down of width moe_ffn)."""
    return (3 if arch.gated_mlp else 2) * arch.hidden * arch.moe_ffn


def experts_touched(experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts per layer that `tokens` tokens are routed to, uniform routing:
    E * (1 - (1 - k/E)^T); k for one token, approaching E as T grows."""
    if experts <= 0 or tokens <= 0:
        return 0.0
    k = min(top_k, experts)
    return experts * (1.0 - (1.0 - k / experts) ** tokens)


def moved_weight_bytes(ctx, tokens: int, fmt: str | None = None) -> int:
    """Weight bytes one step of `tokens` tokens reads on this GPU: all resident weights, less
    the routed experts no token of the step is sent to."""
    w = ctx.base_weight_bytes(fmt)
    a = ctx.arch
    if not a.is_moe:
        return w
    E = a.num_experts
    n = int(a.moe_layers * E * expert_params(a) * ctx.stage_frac / ctx.L.tensor)
    fmt = fmt or ctx.prec
    eb = prec_mod.weights_bytes(n, 0, fmt) if formats.shipped(a, fmt) is None \
        else int(n * formats.expert_bytes_per_param(a, fmt))
    idle = 1.0 - experts_touched(E, a.experts_per_token, tokens) / E
    return int(w - eb * idle)


def matmul_params(arch) -> int:
    """Matmul parameters one token passes through (whole model): attention, MLP (active
    experts only), router, pooler and the LM head (tied or not; encoders have none)."""
    bd = arch.param_breakdown()
    n = bd["attention"] + bd["mlp"] + bd["router"] + bd["pooler"]
    if arch.is_moe:
        n -= arch.moe_layers * (arch.num_experts - arch.experts_per_token) * expert_params(arch)
    if arch.kind != "encoder":
        n += arch.vocab * arch.hidden
    return int(n)


def attention_flops(arch, context: float) -> float:
    """Forward attention FLOPs of one token over `context` keys, all layers: QK^T and AV."""
    if arch.mla:
        m = arch.mla
        qk = arch.heads * (m["qk_nope_head_dim"] + m["qk_rope_head_dim"])
        v = arch.heads * m["v_head_dim"]
    else:
        qk = v = arch.heads * arch.head_dim
    if arch.layer_kinds:   # windowed layers attend to at most `window` keys; linear / Mamba2
        # layers' state update is a matmul of their projections (counted in matmul_params);
        # a parallel hybrid layer (Falcon-H1) attends to every key besides its Mamba2
        full = sum(k in ("full", "parallel_hybrid") for k in arch.layer_kinds)
        windowed = sum(k in ("sliding", "chunked") for k in arch.layer_kinds)
        return 2.0 * (qk + v) * (full * context + windowed * min(context, arch.window))
    return 2.0 * context * (qk + v) * arch.total_layers


def per_gpu(ctx, flops: float) -> int:
    L = ctx.L
    return to_int(flops / max(1, L.tensor * L.pipeline * L.context))


def encdec_per_token(ctx) -> tuple[float, float]:
    """Encoder-decoder: (matmul parameters, forward attention FLOPs) per *encoder* token, the
    decoder's share scaled by target_len / seq_len. An encoder token passes the encoder blocks
    and every decoder layer's cross-attention k / v projections; a decoder token the decoder's
    self-attention, the cross-attention q / o, the MLP and the LM head, attending to target_len
    (self) and seq_len (cross) keys."""
    a = ctx.arch
    bd = a.param_breakdown()
    Le, Ld = a.layers, a.decoder_layers
    attn = bd["attention"] / max(1, Le + 2 * Ld)   # one block's q, k, v, o (cross: the same)
    mlp = bd["mlp"] / max(1, Le + Ld)
    r = ctx.t / max(1, ctx.s)
    n = Le * (attn + mlp) + Ld * attn / 2 + r * (Ld * (1.5 * attn + mlp) + a.vocab * a.hidden)
    qkv = 2 * a.heads * a.head_dim
    att = 2.0 * qkv * (ctx.s * Le + r * (ctx.t + ctx.s) * Ld)
    return n, att


def train_flops(ctx, tokens: int, lora: bool, checkpointing: str) -> int:
    """FLOPs of one optimizer step (all micro-batches) per GPU, `tokens` per data rank."""
    a = ctx.arch
    n, att = matmul_params(a), attention_flops(a, ctx.s)
    if a.kind == "encoder-decoder":
        n, att = encdec_per_token(ctx)
    per_tok = (4 if lora else 6) * n + 3 * att
    if checkpointing == "full":
        per_tok += 2 * n + att
    elif checkpointing == "selective":
        per_tok += att
    return per_gpu(ctx, per_tok * tokens)


def inference_flops(ctx, tokens: int, context: float, encdec: bool = False) -> int:
    """FLOPs of `tokens` tokens each attending to `context` keys, per GPU (`encdec`: a forward
    of the encoder over seq_len and the decoder over target_len, `tokens` encoder tokens)."""
    a = ctx.arch
    if encdec and a.kind == "encoder-decoder":
        n, att = encdec_per_token(ctx)
        return per_gpu(ctx, tokens * (2 * n + att))
    return per_gpu(ctx, tokens * (2 * matmul_params(a) + attention_flops(a, context)))


def serve_step(ctx, kv_pool: int, kv_per_token: int, max_num_seqs: int, max_model_len: int,
               seq_bytes=None):
    """The engine's pool and its decode step at the stated length.

    Returns (capacity, bandwidth dict, note). batch = the sequences decoded together in one
    engine step (vLLM's running batch), one new token each: min(batch_size, capacity), where
    capacity = min(max_num_seqs, pool tokens // stated length) and the stated length is
    seq_len (at most max_model_len). The step reads the weights it routes to and every running
    sequence's KV at that length, so it moves at most weights + the pool."""
    length = max(1, min(ctx.s, max_model_len))
    pool_tokens = kv_pool // max(1, kv_per_token)
    seq_bytes = seq_bytes or (lambda t: t * kv_per_token)   # per-layer kinds: layer_types.py
    capacity = int(min(max_num_seqs, kv_pool // max(1, seq_bytes(length))))
    running = int(min(ctx.b, capacity))
    bw = {"kv_pool_bytes": int(kv_pool), "kv_pool_tokens": int(pool_tokens),
          "kv_bytes_per_token": int(kv_per_token), "context_tokens": int(length),
          "concurrent_sequences": running}
    if running:
        w = moved_weight_bytes(ctx, running)
        kv_read = running * seq_bytes(length)
        step = w + kv_read
        bw.update({"bytes_per_step": int(step), "tokens_per_step": running,
                   "bytes_per_token": step / running, "weight_bytes_per_step": int(w),
                   "kv_bytes_per_step": int(kv_read),
                   "flops_per_step": inference_flops(ctx, running, length)})
    waiting = max(0, ctx.b - running)
    note = (f"serve: 'batch' is the sequences the engine decodes together in one step (vLLM's "
            f"running batch), one new token each. The KV pool ({kv_pool / 2**30:.2f} GiB, "
            f"{counted(pool_tokens, 'token')} at {kv_per_token:,} B/token) holds "
            f"{counted(capacity, 'sequence')} of {counted(length, 'token')} at once (max_num_seqs "
            f"{max_num_seqs}); of batch_size's {counted(ctx.b, 'request')} the engine runs "
            f"{running:,}" + (f" and queues {waiting:,}" if waiting else "")
            + ". max_batch_size is that capacity; the bandwidth figures are one decode step of "
              "the running sequences at that length (KV read <= the pool)")
    if not capacity:
        note += (f". The pool cannot hold one sequence of {counted(length, 'token')}: vLLM refuses to "
                 "start (max_model_len larger than the KV cache); lower max_model_len / seq_len "
                 "or raise gpu_memory_utilization")
    return capacity, bw, note
