"""Serving advice ranked and drawn by the KV pool (issue 20.7): a serving engine
pre-allocates gpu_memory_utilization x memory whatever a change does, and starts only when its
KV pool holds one max_model_len request; so a change to a serve plan is ranked by the room it
gains in the pool (advisor/serving_levers.pool_gain), and the savings waterfall of a serve
plan draws pool tokens against a max_model_len line (charts/waterfall_pool.py), not device
bytes.

Llama-3.1-70B bf16, TP 2 on 2 x H100 SXM 80 GB (usable 85,520,809,984 B), vLLM defaults
(gpu_memory_utilization 0.90, max_model_len 131,072), by hand:
- KV bytes per token on one GPU: 80 layers x 2 (K, V) x 8 / 2 KV heads x 128 x 2 B = 163,840
- pool = int(0.9 x 85,520,809,984) - 70,555,025,408 (weights / 2) - 1,367,080,960 (profile
  activations) - 1,180,696,576 (CUDA context) - 1,879,048,192 (NCCL) = 1,986,877,849 B
  = 12,126 tokens (1,986,877,849 // 163,840)
- one request: (131,072 / 16 + 1 null block) x 16 x 163,840 = 21,477,457,920 B
- TP 4: 81,920 B per token per GPU; the estimate's pool 37,749,610,905 B = 460,810 tokens,
  +448,684 tokens = 448,684 x 163,840 B at today's bytes per token.
"""
import pytest

from vramplan.advisor import advise
from vramplan.charts.waterfall import savings_waterfall_chart, waterfall_rows

H100 = "nvidia-h100-sxm5-80gb"
SERVE = {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
         "gpu": H100, "parallel": {"gpus": 2, "tensor": 2}}


@pytest.fixture(scope="module")
def adv():
    return advise(SERVE, gpu_table_too=False)


def test_the_pool_by_hand(adv):
    sv = adv.estimate.footprint.serving
    assert sv["kv_pool_bytes"] == int(0.9 * 85_520_809_984) - 70_555_025_408 - 1_367_080_960 \
        - 1_180_696_576 - 1_879_048_192 == 1_986_877_849
    assert sv["kv_pool_tokens"] == 1_986_877_849 // 163_840 == 12_126
    assert sv["request_bytes"] == (131_072 // 16 + 1) * 16 * 163_840
    assert not sv["engine_starts"]


def test_serving_changes_rank_by_the_pool_they_gain(adv):
    recs = {r.id: r for r in adv.recommendations}
    tp = recs["serve-more-tp"]
    assert tp.kv_pool["tokens"] == [12_126, 460_810]
    assert tp.pool_gain == (448_684, 448_684 * 163_840)
    assert tp.benefit_bytes == 448_684 * 163_840           # was its device bytes + a batch
    fp8kv = recs["kv-cache-fp8"]                             # the same bytes, twice the tokens
    assert fp8kv.kv_pool["bytes"][0] == fp8kv.kv_pool["bytes"][1]
    assert fp8kv.pool_gain == (12_127, 12_127 * 163_840)
    # device bytes the pool does not get start nothing: after every change that grows the pool
    order = [r.id for r in adv.recommendations]
    grow = [i for i, r in enumerate(adv.recommendations) if r.pool_gain[0] > 0]
    flat = [i for i, r in enumerate(adv.recommendations) if r.pool_gain[0] <= 0]
    assert "expandable-segments" in order and recs["expandable-segments"].saves_bytes > 0
    assert recs["expandable-segments"].pool_gain[0] == 0
    assert max(grow) < min(flat), order
    ratios = [r.ratio for r in adv.recommendations]
    assert ratios == sorted(ratios, reverse=True)
    assert adv.recommendations[0].to_dict(full=False)["pool_gain"] == {
        "tokens": 448_684, "bytes": 448_684 * 163_840}


def test_a_shorter_max_model_len_gains_what_it_no_longer_needs(adv):
    rec = {r.id: r for r in adv.job_changes}["serve-max-model-len"]
    mml = rec.scenario.serving.max_model_len                 # the longest the pool holds
    assert rec.kv_pool["tokens"] == [12_126, 12_126]
    assert rec.pool_gain[0] == 131_072 - mml > 0


def test_the_savings_waterfall_of_a_serve_plan_is_in_pool_tokens(adv):
    d = adv.to_dict(full=False)
    rows = waterfall_rows(d, estimate=adv.estimate)
    assert rows[0]["kind"] == "today" and rows[0]["end"] == 12_126
    assert {r["unit"] for r in rows} == {"tokens"} and rows[0]["need"] == 131_072
    first = rows[1]                                           # the best change: TP 2 -> 4
    assert first["id"] == "serve-more-tp"
    assert (first["start"], first["end"]) == (12_126, 460_810)
    assert first["text"].startswith("+448,684 tokens")
    assert rows[-1]["kind"] == "fits" and rows[-1]["end"] == 460_810   # holds one request
    assert len(rows) == 3                                     # stops once the pool holds one
    plan = adv.plans[0]
    prows = waterfall_rows(d, estimate=adv.estimate, plan={
        "steps": plan.changes, "estimate": plan.estimate.to_dict()})
    after = plan.estimate.footprint.serving
    assert prows[-1]["end"] == after["kv_pool_tokens"] + (131_072 - after["max_model_len"])
    out = next(p for p in adv.plans if p.changes[0]["id"] == "scale-out")   # the solver's
    srows = waterfall_rows(d, estimate=adv.estimate, plan={              # own layout: named
        "steps": out.changes, "estimate": out.estimate.to_dict(), "cost": out.cost.to_dict()})
    assert srows[1]["step"] == out.changes[0]["title"] and srows[1]["start"] == 12_126
    assert srows[1]["end"] == out.estimate.footprint.serving["kv_pool_tokens"] == 460_810
    spec = savings_waterfall_chart(d, estimate=adv.estimate).to_dict()
    assert "KV pool" in str(spec["title"]) and "131,072" in str(spec)


def test_a_training_plan_keeps_the_device_bytes_waterfall():
    a = advise({"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": 4,
                "seq_len": 4096, "gpu": "nvidia-rtx-4090"}, gpu_table_too=False)
    rows = waterfall_rows(a.to_dict(full=False), estimate=a.estimate)
    assert rows[0]["kind"] == "today" and "unit" not in rows[0]
    assert rows[0]["bytes"] == a.estimate.device_used_bytes
