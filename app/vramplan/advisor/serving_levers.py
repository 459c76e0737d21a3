"""What vLLM users do when the engine will not start (issue 20.7): the advisor's serving
proposals for a plan whose estimate says `serving.engine_starts` is false.

vLLM refuses to start when its KV pool cannot hold one request of `max_model_len` tokens
(`workloads/transformer/engine.py`, vllm/v1/core/kv_cache_utils.py
`check_enough_kv_cache_memory`); its own error names the ways out, and each is a lever here:

| lever | change | what it costs |
| --- | --- | --- |
| `serve-max-model-len` | `max_model_len` -> the longest request the pool holds (vLLM's `estimate_max_model_len`, the serving section's `longest_context_tokens`) | requests above it are refused: a job change |
| `serve-kv-fp8` | `kv_cache_dtype` fp8: half the pool bytes per token (and, where that still is not enough, `max_model_len` -> what the fp8 pool holds) | small accuracy loss (vLLM Quantized KV Cache docs) |
| `serve-more-tp` | tensor parallel x2, x4 ... (within the GPU's scale-up domain, heads and KV heads divisible): the weights split over more GPUs leave each a larger pool | more GPUs, an all-reduce per layer |
| `serve-gpu-memory-utilization` | `gpu_memory_utilization` up to what one request needs (at most 0.98) | less memory left for other processes and allocations outside vLLM's profile |

Each `make` re-estimates its change and proposes it only where the engine then starts and the
plan fits (the estimate's `fits`); `recommend.evaluate` then re-estimates once more and prices
it (bytes saved, cost, `gains`: the engine starting, the longest context, the concurrent
sequences before -> after, added by `annotate`).
"""
from __future__ import annotations

from ..errors import ScenarioError
from ..estimate import estimate
from ..workloads.transformer import engine
from . import comm
from . import costs as C
from .levers import Lever
from .makers import serving_change

MAX_UTILISATION = 0.98        # vLLM takes any fraction <= 1; 2% left for the driver and others


def _blocked(ctx) -> dict | None:
    """The serving section of a plan whose engine would not start (None otherwise)."""
    if ctx.task != "serve" or ctx.sc.serving is None:
        return None
    sv = ctx.est.footprint.serving or {}
    return sv if sv and not sv.get("engine_starts", True) else None


def _starts(ctx, changes: dict):
    """(scenario, estimate) of the plan with `changes` where it is valid, the engine starts and
    the plan fits the advisor's limit; else None."""
    try:
        sc2 = ctx.sc.replace(**changes)
        est2 = estimate(sc2, ctx.dev, with_max_batch=False)
    except ScenarioError:
        return None
    sv = est2.footprint.serving or {}
    if not sv.get("engine_starts") or est2.device_used_bytes > ctx.limit:
        return None
    return sc2, est2




def max_model_len(ctx):
    sv = _blocked(ctx)
    if sv is None or sv["reason"] != engine.KV_POOL_BELOW_MAX_MODEL_LEN:
        return None
    mml = int(sv.get("longest_context_tokens") or 0)
    if mml < engine.BLOCK_TOKENS:
        return None
    ch = serving_change(ctx.sc, "max_model_len", mml)   # what follows it is derived again
    if _starts(ctx, ch) is None:
        return None
    return (f"max_model_len {sv['max_model_len']:,} -> {mml:,} (the longest request the KV "
            f"pool of {sv['kv_pool_tokens']:,} tokens holds)"), ch


def kv_fp8(ctx):
    sv = _blocked(ctx)
    cur = ctx.sc.serving
    if sv is None or str(cur.kv_cache_dtype).startswith("fp8"):
        return None
    ch = serving_change(ctx.sc, "kv_cache_dtype", "fp8")
    if _starts(ctx, ch) is not None:
        return "fp8 KV cache (half the bytes per token: the pool holds max_model_len)", ch
    try:
        sc8 = ctx.sc.replace(**ch)
        got = estimate(sc8, ctx.dev, with_max_batch=False).footprint.serving
    except ScenarioError:
        return None
    mml = int((got or {}).get("longest_context_tokens") or 0)
    if mml <= int(sv.get("longest_context_tokens") or 0):
        return None
    ch = serving_change(sc8, "max_model_len", mml)     # sc8's given serving keeps the fp8
    if _starts(ctx, ch) is None:
        return None
    return (f"fp8 KV cache and max_model_len {sv['max_model_len']:,} -> {mml:,} (what the fp8 "
            "pool holds)"), ch


def _heads_ok(ctx, t: int) -> bool:
    a = getattr(ctx.spec, "arch", None)
    return a is not None and a.heads % t == 0 and (a.kv_heads % t == 0 or t % a.kv_heads == 0)


def more_tp(ctx):
    """The least tensor-parallel degree (x2, x4 ...) at which the engine starts, inside the
    GPU's scale-up domain (comm.network: its hwdb system, else the stated 8 per node); none
    for a unified-memory device (one GPU per machine: Apple, DGX Spark, Ryzen AI Max)."""
    sv = _blocked(ctx)
    if sv is None or not ctx.transformer or getattr(ctx.dev, "unified_memory", False):
        return None
    p = ctx.sc.parallel
    domain = comm.network(ctx.dev).domain
    t = p.tensor * 2
    while t * p.pipeline <= domain and _heads_ok(ctx, t):
        ch = ctx.par(tensor=t, gpus=t * p.pipeline * p.data * p.context)
        if _starts(ctx, ch) is not None:
            return (f"tensor parallel {p.tensor} -> {t} ({t * p.pipeline} x GPU per replica: "
                    "the weights split further leave each GPU a larger KV pool)"), ch
        t *= 2
    return None


def higher_utilisation(ctx):
    """gpu_memory_utilization raised by what one max_model_len request lacks (the pool is
    utilisation x usable memory less the rest: workloads/transformer/footprint.serve)."""
    sv = _blocked(ctx)
    if sv is None:
        return None
    cur = ctx.sc.serving
    short = int(sv["request_bytes"]) - max(0, int(sv["kv_pool_bytes"]))
    usable = int(ctx.dev.usable_bytes)
    u = -(-int((cur.gpu_memory_utilization + short / usable) * 10000) // 100) / 100
    if u > MAX_UTILISATION or u <= cur.gpu_memory_utilization:
        return None
    for step in range(4):            # block rounding: one more hundredth where it falls short
        ch = serving_change(ctx.sc, "gpu_memory_utilization", round(u + step / 100, 2))
        if u + step / 100 <= MAX_UTILISATION and _starts(ctx, ch) is not None:
            return (f"gpu_memory_utilization {cur.gpu_memory_utilization:.2f} -> "
                    f"{u + step / 100:.2f} (the pool grows by what one request lacks)"), ch
    return None


SERVING_LEVERS: tuple[Lever, ...] = (
    Lever("serve-max-model-len", ("serving.len",), "job-change", max_model_len,
          "max-model-len"),
    Lever("serve-kv-fp8", ("serving.kv",), "kv-cache-fp8", kv_fp8, "kv-cache-fp8"),
    Lever("serve-more-tp", ("layout",), "tensor-parallel", more_tp, "tensor-parallel"),
    Lever("serve-gpu-memory-utilization", ("serving.util",), "gpu-memory-utilization",
          higher_utilisation, "gpu-memory-utilization"),
)
IDS = frozenset(lv.id for lv in SERVING_LEVERS)


def annotate(ctx, rec) -> None:
    """Add to a serving proposal's `gains` what it changes of the engine: whether it starts,
    the longest context the pool holds and the concurrent sequences at the chosen context
    ([before, after]); a proposal that lowers max_model_len (fp8 KV where fp8 alone is not
    enough) is also priced as a job change (shorter requests only)."""
    if rec.id not in IDS:
        return
    if "max_model_len" in (rec.changes.get("serving") or {}) and not rec.cost.changes_job and \
            rec.changes["serving"]["max_model_len"] != ctx.sc.serving.max_model_len:
        rec.cost = rec.cost + C.of("job-change", gpus=rec.cost.gpus,
                                   step_time_s=rec.cost.step_time_s)
    before = ctx.est.footprint.serving or {}
    after = rec.estimate.footprint.serving or {}
    for key in ("engine_starts", "longest_context_tokens", "concurrent_sequences",
                "max_model_len"):
        if before.get(key) != after.get(key):
            rec.gains[key] = [before.get(key), after.get(key)]


def token_bytes(sv: dict) -> float:
    """Pool bytes one token of a max_model_len request takes on a GPU (the serving section's
    request_bytes over the request's whole blocks and the null block: engine.request_bytes);
    0 where the section has none."""
    blocks = -(-int(sv.get("max_model_len") or 0) // engine.BLOCK_TOKENS) + engine.NULL_BLOCKS
    return int(sv.get("request_bytes") or 0) / (blocks * engine.BLOCK_TOKENS)


def pool_gain(est, est2) -> tuple[int, int] | None:
    """(tokens, bytes) of room a change gains in vLLM's KV pool over one max_model_len
    request (what decides whether the engine starts, and how many requests run at once):
    (pool tokens - max_model_len) after less before; bytes at the plan's own bytes per token
    (`token_bytes`), so fp8 KV (twice the tokens in the same bytes) and more tensor-parallel
    GPUs (fewer bytes per token on each) count by the tokens they add. A shorter max_model_len
    gains what it no longer needs where the changed plan has a pool at all. None for a plan
    without a KV pool (not a serve plan)."""
    before = est.footprint.serving or {}
    after = est2.footprint.serving or {}
    if "kv_pool_tokens" not in before or "kv_pool_tokens" not in after:
        return None
    tokens = int(after["kv_pool_tokens"]) - int(before["kv_pool_tokens"])
    if int(after["kv_pool_tokens"]) > 0:
        tokens += int(before["max_model_len"]) - int(after["max_model_len"])
    return tokens, int(tokens * token_bytes(before))


def pool_of(ctx, rec) -> None:
    """On a serve plan, what a change buys is room in vLLM's KV pool, not device bytes: vLLM
    pre-allocates gpu_memory_utilization x memory whatever the change, and the pool takes what
    the weights, activations and the rest leave (vllm/v1/worker/gpu_worker.py
    `determine_available_memory`; workloads/transformer/footprint.serve). Sets `rec.kv_pool`
    to the pool's bytes and tokens per GPU, [before, after] (the estimates' `serving` section);
    nothing for other plans."""
    before = ctx.est.footprint.serving or {}
    after = rec.estimate.footprint.serving or {}
    if "kv_pool_bytes" not in before or "kv_pool_bytes" not in after:
        return
    rec.kv_pool = {k: [int(before.get(f"kv_pool_{k}") or 0), int(after.get(f"kv_pool_{k}") or 0)]
                   for k in ("bytes", "tokens")}


def with_engine_gains(ctx, recs: list) -> list:
    """`recs` with every serving proposal annotated (`annotate`), every change to a serve plan
    with its KV pool before -> after (`pool_of`) and, where a general lever makes the very
    same change as a serving proposal (levers.py's fp8 KV cache), only the proposal kept. On a
    plan whose engine would not start, a serving job change is kept only where the engine
    then starts (`_job_change_but_blocked`: levers.py's halving, 131,072 -> 65,536 on a pool of
    12,126 tokens, fixes nothing; serve-max-model-len goes down to what the pool holds; nor
    does fewer-seqs, max_num_seqs 256 -> 128, since vLLM's check is one max_model_len request
    whatever max_num_seqs is)."""
    for r in recs:
        annotate(ctx, r)
        pool_of(ctx, r)
    mine = [r.scenario for r in recs if r.id in IDS]
    return [r for r in recs if (r.id in IDS or r.scenario not in mine)
            and not _job_change_but_blocked(ctx, r)]


def _job_change_but_blocked(ctx, rec) -> bool:
    """Whether `rec` changes the job through the serving section (a shorter max_model_len,
    fewer max_num_seqs, levers.py's job-change utilisation) on a plan whose engine would not
    start and the engine still would not start after it (vLLM's start-up check: the KV pool
    holds one request of max_model_len tokens, engine.KV_POOL_BELOW_MAX_MODEL_LEN; vllm/v1/
    core/kv_cache_utils.py `check_enough_kv_cache_memory` reads max_model_len, not
    max_num_seqs). A change that costs the job nothing (fp8 KV, no CUDA graphs) and grows the
    pool stays, ranked by the pool it gains."""
    sv_change = rec.changes.get("serving") or {}
    if _blocked(ctx) is None or not sv_change:
        return False
    if not (rec.cost.changes_job or "max_model_len" in sv_change):
        return False
    return not (rec.estimate.footprint.serving or {}).get("engine_starts", False)
