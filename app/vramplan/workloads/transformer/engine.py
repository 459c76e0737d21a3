"""Does the serving engine start? vLLM's start-up check on the KV pool, and what the pool holds.

vLLM sizes its KV pool after loading the weights and profiling one forward
(`gpu_memory_utilization` x memory - weights - activation peak - non-torch memory) and then
refuses to start when the pool cannot hold one request of `max_model_len` tokens:
`vllm/v1/core/kv_cache_utils.py` `check_enough_kv_cache_memory` (vllm-project/vllm@001cabc1):
"Checks whether `available_memory` is enough for the KV cache to hold at least one request with
the model's max_model_len", where a request takes cdiv(max_model_len, block_size) blocks
(`max_memory_usage_bytes`) and one block is held back for the block pool's null block; with
no memory left for any block it raises "No available memory for the cache blocks. Try
increasing `gpu_memory_utilization`" (the v0 worker's `raise_if_cache_size_invalid`, same
rule: "The model's max seq len (...) is larger than the maximum number of tokens that can be
stored in KV cache (...)"). Its suggestion, `estimate_max_model_len`, is the longest length
whose blocks fit: a binary search over the length, as `longest_context` does here.

`start_check` answers as the estimate's `serving` section: whether the engine starts, why not
(a reason code the advisor and the verdict read), the pool in tokens, the longest context it
holds and the concurrent sequences at the chosen context.
"""
from __future__ import annotations

from typing import Callable

BLOCK_TOKENS = 16
"""vLLM's default KV block size on CUDA (CacheConfig block_size 16)"""
NULL_BLOCKS = 1
"""blocks the block pool holds back (its null block; kv_cache_utils: "Reserve the null block
BlockPool permanently holds back")"""

NO_KV_MEMORY = "no_kv_memory"
"""reason: weights + activation peak + non-torch memory leave no memory for the KV pool"""
KV_POOL_BELOW_MAX_MODEL_LEN = "kv_pool_below_max_model_len"
"""reason: the pool holds fewer tokens than one max_model_len request needs"""
REASONS = {
    NO_KV_MEMORY: "no memory is left for the KV cache after the weights, the profiled "
                  "activation peak and non-torch memory (vLLM: \"No available memory for the "
                  "cache blocks\"); raise gpu_memory_utilization, use more tensor-parallel GPUs "
                  "or a smaller weight format",
    KV_POOL_BELOW_MAX_MODEL_LEN: "the KV pool cannot hold one request of max_model_len tokens "
                                 "(vLLM refuses to start: \"max seq len is larger than the "
                                 "maximum number of tokens that can be stored in KV cache\"); "
                                 "lower max_model_len, use fp8 KV cache, more tensor-parallel "
                                 "GPUs or a higher gpu_memory_utilization",
}


def _blocks(tokens: int) -> int:
    return -(-int(tokens) // BLOCK_TOKENS)


def request_bytes(tokens: int, seq_bytes: Callable[[int], int]) -> int:
    """Pool bytes one request of `tokens` takes: whole blocks, plus the null block."""
    return int(seq_bytes((_blocks(tokens) + NULL_BLOCKS) * BLOCK_TOKENS))


def longest_context(kv_pool: int, seq_bytes: Callable[[int], int], cap: int) -> int:
    """The longest request (a multiple of the block, at most `cap`) the pool holds: vLLM's
    `estimate_max_model_len` (a binary search; per-sequence bytes grow with the length)."""
    if kv_pool <= 0 or request_bytes(BLOCK_TOKENS, seq_bytes) > kv_pool:
        return 0
    lo, hi = 1, max(1, _blocks(cap))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if request_bytes(mid * BLOCK_TOKENS, seq_bytes) <= kv_pool:
            lo = mid
        else:
            hi = mid - 1
    return min(int(cap), lo * BLOCK_TOKENS)


def start_check(kv_pool: int, kv_per_token: int, max_model_len: int, concurrent: int,
                context: int, positions: int | None = None,
                seq_bytes: Callable[[int], int] | None = None) -> dict:
    """The estimate's `serving` section. `kv_per_token`: pool bytes per token on this GPU;
    `seq_bytes`: bytes of one sequence by length where that is not linear (sliding-window
    layers, recurrent state); `concurrent`: the sequences of `context` tokens (the chosen
    context: seq_len, at most max_model_len) the pool runs at once (the footprint's batch
    capacity); `positions`: the model's limit (the longest context reported is never above
    it)."""
    kv_pool = int(kv_pool)
    per = seq_bytes if seq_bytes is not None else (lambda t: int(t) * int(kv_per_token))
    need = request_bytes(max_model_len, per)
    if kv_pool <= 0:
        reason = NO_KV_MEMORY
    elif need > kv_pool:
        reason = KV_POOL_BELOW_MAX_MODEL_LEN
    else:
        reason = None
    cap = positions if positions else max(int(max_model_len), 1 << 24)
    return {"engine_starts": reason is None, "reason": reason,
            "why": REASONS.get(reason, ""),
            "max_model_len": int(max_model_len),
            "kv_pool_bytes": kv_pool,
            "kv_pool_tokens": int(kv_pool // max(1, int(kv_per_token))),
            "request_bytes": int(need),
            "longest_context_tokens": longest_context(kv_pool, per, cap),
            "context_tokens": int(context),
            "concurrent_sequences": int(concurrent) if reason is None else 0,
            "block_tokens": BLOCK_TOKENS}
