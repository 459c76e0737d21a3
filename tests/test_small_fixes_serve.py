"""Small serve fixes (H15):

1. Llama-3.1-70B bf16 served with vLLM at TP2 on 2 x H100 SXM5 80GB: the KV pool holds 12,126
   tokens (12,096 in whole blocks) < max_model_len 131,072, so the engine does not start
   (vLLM's check_enough_kv_cache_memory: one max_model_len request in the pool). Halving
   max_num_seqs (256 -> 128, the `fewer-seqs` job change) leaves that check as it was, so it
   is no fix and is not offered; on a plan that starts (70B at TP4) it still is.
2. The estimate's no-start note names the vLLM engine (as report/words.engine_why does).
3. offload_experts on a dense model is refused by the scenario pass, not only the estimate.
"""
from __future__ import annotations

import pytest

from vramplan.advisor import advise

H100 = "nvidia-h100-sxm5-80gb"
SERVE_70B_TP2 = {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
                 "parallel": {"gpus": 2, "tensor": 2}}
SERVE_70B_TP4 = {**SERVE_70B_TP2, "parallel": {"gpus": 4, "tensor": 4}}


@pytest.fixture(scope="module")
def blocked():
    return advise(SERVE_70B_TP2, H100, allow_job_changes=True)


def _ids(adv):
    return [r.id for r in adv.recommendations + adv.job_changes]


def test_fewer_seqs_is_not_offered_where_the_engine_still_would_not_start(blocked):
    sv = blocked.estimate.footprint.serving
    assert sv["engine_starts"] is False and sv["longest_context_tokens"] == 12_096
    ids = _ids(blocked)
    assert "fewer-seqs" not in ids, ids
    assert "serve-max-model-len" in ids                  # the fix that starts it stays
    for r in blocked.recommendations + blocked.job_changes:
        if r.cost.changes_job and (r.changes.get("serving") or {}):
            assert r.estimate.footprint.serving["engine_starts"], r.title


def test_fewer_seqs_stays_for_a_plan_that_starts():
    adv = advise(SERVE_70B_TP4, H100, allow_job_changes=True)
    assert adv.estimate.footprint.serving["engine_starts"] is True
    seqs = next(r for r in adv.recommendations + adv.job_changes if r.id == "fewer-seqs")
    assert seqs.changes["serving"]["max_num_seqs"] == 256 // 2 == 128


# 2. Llama-3.1-70B bf16 on one H100 SXM5 80GB: 70.6 GB of weights on 0.9 x 79.6 GiB leave no
#    memory for the KV cache (vLLM: "No available memory for the cache blocks"); the estimate's
#    note names the engine as the page's verdict does (report/words.engine_why).
SERVE_70B_ONE = {**SERVE_70B_TP2, "parallel": {"gpus": 1}, "gpu": H100}


def test_the_no_start_note_names_the_vllm_engine_in_both_languages():
    from vramplan.estimate import estimate
    from vramplan.i18n import translate_message
    notes = estimate(SERVE_70B_ONE, with_max_batch=False).to_dict()["notes"]
    mine = [n for n in notes if "does not start" in n]
    assert len(mine) == 1 and mine[0].startswith("serve: the vLLM engine does not start: no "
                                                 "memory is left for the KV cache"), mine
    assert translate_message(mine[0], "zh").startswith("serve：vLLM 引擎无法启动：扣除权重")


# 3. offload_experts on a dense model: Llama-3.1-8B has no routed experts (config.json: no
#    num_local_experts), so llama.cpp's --n-cpu-moe has nothing to keep in host memory. The
#    scenario pass refuses it under the key, with the estimate's message (one rule:
#    scenario/inference_keys.check_offload_experts); Mixtral 8x7B (32 MoE layers) takes 4
#    and refuses 33.
DENSE_GENERATE = {"model": "meta-llama/Llama-3.1-8B", "task": "generate", "precision": "bf16",
                  "offload_experts": 4}
NO_EXPERTS = "'llama' has no routed experts; use offload_layers"


def test_the_scenario_pass_refuses_offload_experts_on_a_dense_model():
    from vramplan.errors import ScenarioError
    from vramplan.scenario import Scenario
    from vramplan.scenario import form
    with pytest.raises(ScenarioError) as got:
        Scenario.from_dict(DENSE_GENERATE)
    assert got.value.key == "offload_experts" and NO_EXPERTS in str(got.value)
    errors = form.check(DENSE_GENERATE)
    assert set(errors) == {"offload_experts"} and NO_EXPERTS in errors["offload_experts"]


def test_offload_experts_on_an_moe_model_is_read_up_to_its_moe_layers():
    from vramplan.errors import ScenarioError
    from vramplan.scenario import Scenario
    mixtral = {**DENSE_GENERATE, "model": "mistralai/Mixtral-8x7B-v0.1"}
    assert Scenario.from_dict(mixtral).extra["offload_experts"] == 4
    with pytest.raises(ScenarioError, match="33 exceeds the model's 32 MoE layers"):
        Scenario.from_dict({**mixtral, "offload_experts": 33})


def test_a_diffusion_plan_still_resolves():
    # the offload_experts rule reads the transformer architecture only when the key is given:
    # a diffusion model has none (98e118e refused every diffusion plan, naming 'model')
    from vramplan.scenario import Scenario
    sc = Scenario.from_dict({"model": "black-forest-labs/FLUX.1-dev", "task": "denoise",
                             "gpu": "nvidia-h100-sxm5-80gb"})
    assert sc.model == "black-forest-labs/FLUX.1-dev" and sc.task == "denoise"
