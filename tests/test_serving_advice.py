"""The advisor's serving proposals (issue 20.7): when vLLM would refuse to start (the KV pool
cannot hold one max_model_len request), the advisor proposes what vLLM users do, each priced
and each fitting, with the engine starting, when re-estimated."""
import pytest

from vramplan.advisor import advise
from vramplan.estimate import estimate
from vramplan.scenario import Scenario

H100 = "nvidia-h100-sxm5-80gb"


def _plan(mml=131072, **serving):
    return {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
            "gpu": H100, "parallel": {"tensor": 2},
            "serving": {"max_model_len": mml, **serving}}


@pytest.fixture(scope="module")
def advice():
    return advise(_plan(), gpu_table_too=False)


def _by_id(adv):
    return {r.id: r for r in adv.recommendations + adv.job_changes}


def test_the_plan_does_not_start():
    """Llama-3.1-70B bf16, TP 2 on 2 x H100 at max_model_len 131,072: a KV pool of 12,126
    tokens, each 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 B / TP 2 = 163,840 B per GPU."""
    sv = estimate(_plan()).footprint.serving
    assert not sv["engine_starts"] and sv["reason"] == "kv_pool_below_max_model_len"
    assert sv["kv_pool_tokens"] == 12126
    assert sv["kv_pool_bytes"] // 163840 == 12126


def test_proposals_are_what_vllm_users_do(advice):
    recs = _by_id(advice)
    assert {"serve-max-model-len", "serve-kv-fp8", "serve-more-tp"} <= set(recs)
    # the longest request the pool holds: (ceil(L / 16) + 1 null block) x 16 <= 12,126 tokens
    # -> 757 blocks -> L = 756 x 16 = 12,096
    assert recs["serve-max-model-len"].changes["serving"]["max_model_len"] == 12096
    assert recs["serve-more-tp"].scenario.parallel.tensor == 4
    assert recs["serve-more-tp"].cost.gpus == 4
    assert recs["serve-kv-fp8"].changes["serving"]["kv_cache_dtype"] == "fp8"
    # fp8 halves the bytes per token: about twice the bf16 pool, still short of 131,072
    fp8_len = recs["serve-kv-fp8"].changes["serving"]["max_model_len"]
    assert 2 * 12096 <= fp8_len < 131072


def test_each_proposal_fits_when_re_estimated(advice):
    for rid, r in _by_id(advice).items():
        if not rid.startswith("serve-"):
            continue
        est = estimate(Scenario.from_dict(r.scenario.to_dict()))
        assert est.fits and est.footprint.serving["engine_starts"], rid
        assert r.gains["engine_starts"] == [False, True]
        assert r.gains["concurrent_sequences"][1] >= 1


def test_priced_and_split_by_whether_they_change_the_job(advice):
    """A shorter context changes the job (and so does fp8 KV where it needs a shorter context
    too); more tensor parallelism keeps it, priced in GPUs and its all-reduces."""
    keep = {r.id for r in advice.recommendations}
    job = {r.id for r in advice.job_changes}
    assert "serve-more-tp" in keep
    assert {"serve-max-model-len", "serve-kv-fp8"} <= job
    tp = _by_id(advice)["serve-more-tp"]
    assert tp.cost.communication_bytes_per_step > 0 and tp.cost.link
    assert _by_id(advice)["serve-kv-fp8"].cost.accuracy_risk == "low"


def test_higher_utilisation_where_a_little_more_pool_suffices():
    """At max_model_len 16,384 the pool lacks (1,024 + 1) x 16 - 12,126 = 4,274 tokens x
    163,840 B = 0.70 GB, under 1% of the H100's usable memory: 0.90 -> 0.91; fp8 KV alone
    suffices (about 24k tokens); the general fp8 KV lever is not listed twice."""
    adv = advise(_plan(16384), gpu_table_too=False)
    recs = _by_id(adv)
    assert recs["serve-gpu-memory-utilization"].changes["serving"][
        "gpu_memory_utilization"] == 0.91
    assert recs["serve-kv-fp8"].changes["serving"]["max_model_len"] == 16384
    assert "kv-cache-fp8" not in recs
    assert not recs["serve-kv-fp8"].cost.changes_job


def test_an_engine_that_starts_gets_no_serving_proposal():
    adv = advise({"model": "meta-llama/Llama-3.1-8B", "task": "serve", "precision": "bf16",
                  "gpu": H100, "serving": {"max_model_len": 8192}}, gpu_table_too=False)
    assert not any(r.id.startswith("serve-") for r in adv.recommendations + adv.job_changes)
