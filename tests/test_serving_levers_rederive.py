"""The serving proposals change the given serving keys and let the scenario derive the rest
again (advisor.makers.serving_change; Scenario.replace re-resolves from the given keys): a
shorter max_model_len brings vLLM's max_num_batched_tokens with it,
max(2048, min(max_model_len, 8192)) (vllm/config/scheduler.py, rules.vllm_batched_tokens).
Llama-3.1-70B served at TP2 on 2 x H100 with gpu_memory_utilization 0.88: the KV pool holds
1,687 tokens, so the proposal is max_model_len 1,664 (whole 16-token blocks) and the batched
tokens become max(2048, 1664) = 2048; with fp8 KV the pool holds twice the tokens, 3,344,
and the batched tokens 3,344. Before, every serving sub-key was passed as given and the
batched tokens stayed at 8,192, derived from the old max_model_len of 131,072."""
from vramplan.advisor import advise

PLAN = {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "gpu": "nvidia-h100-sxm5-80gb",
        "parallel": {"tensor": 2, "gpus": 2}, "serving": {"gpu_memory_utilization": 0.88}}


def test_shorter_max_model_len_rederives_the_batched_tokens():
    a = advise(PLAN, gpu_table_too=False, allow_job_changes=True, grow=False)
    got = {r.id: r for r in list(a.recommendations) + list(a.job_changes)}
    mml = got["serve-max-model-len"].scenario.serving
    assert (mml.max_model_len, mml.max_num_batched_tokens) == (1664, 2048)
    fp8 = got["serve-kv-fp8"].scenario.serving
    assert (fp8.kv_cache_dtype, fp8.max_model_len, fp8.max_num_batched_tokens) == \
        ("fp8", 3344, 3344)
    # only what the proposal sets is given: the rest stays derived
    assert got["serve-max-model-len"].changes["serving"] == \
        {"gpu_memory_utilization": 0.88, "max_model_len": 1664}
