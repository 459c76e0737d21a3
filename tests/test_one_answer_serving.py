"""Issue 20.7: "fits" for a serving engine means the engine starts: vLLM refuses to start when
its KV pool cannot hold one request of max_model_len tokens (vllm/v1/core/kv_cache_utils.py
`check_enough_kv_cache_memory`: cdiv(max_model_len, 16) blocks plus the block pool's null
block), and the estimate says why, the longest context the pool holds and the concurrent
sequences at the chosen context (the `serving` section)."""
import pytest

from vramplan.cli import main
from vramplan.estimate import estimate
from vramplan.workloads.transformer import engine

H100 = "nvidia-h100-sxm5-80gb"
L70 = {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
       "parallel": {"tensor": 2}, "gpu": H100}
# Llama-3.1-70B: 80 layers x 8 KV heads x 128 dims x (K, V) x 2 bytes = 327,680 B a token,
# half of it on each of 2 tensor-parallel GPUs
KV_PER_TOKEN = 80 * 8 * 128 * 2 * 2 // 2


def test_70b_tp2_does_not_start_at_131072():
    # was: fits true, max batch 0, a pool of 12,126 tokens against max_model_len 131,072
    e = estimate(L70)
    sv = e.to_dict()["serving"]
    assert e.fits is False and e.max_batch_size == 0
    assert sv["engine_starts"] is False and sv["reason"] == engine.KV_POOL_BELOW_MAX_MODEL_LEN
    assert sv["max_model_len"] == 131072 and sv["concurrent_sequences"] == 0
    assert sv["kv_pool_tokens"] == sv["kv_pool_bytes"] // KV_PER_TOKEN == 12126
    # longest: whole 16-token blocks, one held back: 12126 // 16 = 757 blocks - 1 = 756
    assert sv["longest_context_tokens"] == 756 * 16 == 12096
    assert any("does not start" in n or "vLLM refuses to start" in n for n in e.notes)


def test_70b_tp2_starts_at_the_longest_context():
    ok = estimate({**L70, "seq_len": 12096})
    sv = ok.to_dict()["serving"]
    assert ok.fits and sv["engine_starts"] and sv["reason"] is None
    assert sv["concurrent_sequences"] == ok.max_batch_size == 1      # 12126 // 12096
    # 12112 tokens need 757 + 1 blocks = 758 x 16 x 163,840 B > the pool
    assert 758 * 16 * KV_PER_TOKEN > sv["kv_pool_bytes"] >= 757 * 16 * KV_PER_TOKEN
    no = estimate({**L70, "seq_len": 12112})
    assert not no.fits and no.to_dict()["serving"]["reason"] == \
        engine.KV_POOL_BELOW_MAX_MODEL_LEN


def test_concurrency_at_the_chosen_context():
    e = estimate({"model": "meta-llama/Llama-3.1-8B", "task": "serve", "seq_len": 8192,
                  "gpu": H100})
    sv = e.to_dict()["serving"]
    assert e.fits and sv["engine_starts"]
    assert sv["context_tokens"] == 8192
    assert sv["concurrent_sequences"] == min(256, sv["kv_pool_tokens"] // 8192) \
        == e.max_batch_size
    # the pool holds more than the model's 131,072 positions: the longest context is the limit
    assert sv["kv_pool_tokens"] > 131072 and sv["longest_context_tokens"] == 131072


def test_no_kv_memory_reason():
    e = estimate({"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
                  "seq_len": 4096, "gpu": H100})          # 131 GiB of weights on one 80 GiB GPU
    sv = e.to_dict()["serving"]
    assert not e.fits and sv["reason"] == engine.NO_KV_MEMORY
    assert sv["kv_pool_tokens"] == 0 and sv["longest_context_tokens"] == 0


def test_longest_context_search_matches_closed_form():
    per = 1000
    for pool in (0, 15_999, 16_000 * 2, 16_000 * 2 + 15_999, 10**9):
        blocks = pool // (16 * per)
        expect = max(0, blocks - 1) * 16
        assert engine.longest_context(pool, lambda t: t * per, 1 << 30) == expect, pool


def test_non_serving_estimates_have_no_section():
    d = estimate({"model": "meta-llama/Llama-3.1-8B", "task": "forward", "gpu": H100}).to_dict()
    assert "serving" not in d


def test_cli_text_says_why(capsys):
    rc = main(["estimate", "--model", "meta-llama/Llama-3.1-70B", "--task", "serve",
               "--precision", "bf16", "--tensor", "2", "--gpu", H100])
    out = capsys.readouterr().out
    assert rc == 0
    assert "fits: no" in out
    assert "engine: does not start (kv_pool_below_max_model_len)" in out
    assert "longest context it holds 12,096 tokens (max_model_len 131,072)" in out


@pytest.mark.parametrize("util", [0.95])
def test_higher_utilisation_grows_the_pool(util):
    a = estimate(L70).to_dict()["serving"]["kv_pool_tokens"]
    b = estimate({**L70, "serving": {"gpu_memory_utilization": util}}).to_dict()
    assert b["serving"]["kv_pool_tokens"] > a
