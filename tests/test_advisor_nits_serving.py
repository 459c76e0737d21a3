"""Advisor nits from the browser walk (issue 20.7, 'Serving that agrees with the engine'):
Llama-3.1-70B bf16 served with vLLM at TP2 on 2 x H100 SXM5 80GB, max_model_len 131,072.

By hand (the estimate's serving section): the KV pool holds 12,126 tokens; vLLM's start-up
check needs one max_model_len request, so the engine does not start. 12,126 // 16 = 757 blocks,
less the null block = 756 blocks x 16 = 12,096 tokens: the longest request the pool holds.
Halving max_model_len (131,072 -> 65,536, levers.py's general lever) still needs 65,536 >
12,126 tokens: it fixes nothing and must not be offered."""
from __future__ import annotations

import pytest

from vramplan.advisor import advise

PLAN = {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
        "parallel": {"gpus": 2, "tensor": 2}}          # serve: vLLM's engine
H100 = "nvidia-h100-sxm5-80gb"


@pytest.fixture(scope="module")
def adv():
    return advise(PLAN, H100, allow_job_changes=True)


def test_the_plan_is_blocked_by_its_pool(adv):
    sv = adv.estimate.footprint.serving
    assert sv["engine_starts"] is False
    assert sv["kv_pool_tokens"] == 12_126 and sv["longest_context_tokens"] == 12_096
    assert sv["max_model_len"] == 131_072


def test_a_shorter_max_model_len_is_offered_only_where_the_engine_then_starts(adv):
    shorter = [r for r in adv.recommendations + adv.job_changes
               if "max_model_len" in (r.changes.get("serving") or {})]
    assert shorter, "serve-max-model-len (131,072 -> 12,096) is the fix vLLM users make"
    titles = [r.title for r in shorter]
    assert not any("65,536" in t or "65536" in t for t in titles), titles
    for r in shorter:
        after = r.estimate.footprint.serving
        assert after["engine_starts"], r.title
        assert r.changes["serving"]["max_model_len"] <= after["kv_pool_tokens"], r.title
    plain = next(r for r in shorter if r.id == "serve-max-model-len")
    assert plain.changes["serving"]["max_model_len"] == 12_096


def test_plan_titles_print_token_counts_with_thousands_separators(adv):
    """The solver's pool-length fix: 2**13 = 8,192 <= 12,126 pool tokens < 2**14."""
    titles = [c["title"] for p in adv.plans for c in p.changes if c["id"] == "max-model-len"]
    assert titles == ["max_model_len 131,072 -> 8,192 (what the KV pool holds)"], titles
