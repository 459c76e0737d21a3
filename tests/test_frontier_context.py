"""The longest context that fits (issue 21.5): `max_context` in the estimate's JSON, for
generate (the longest prompt at the plan's batch and new tokens) and serve (the engine's
longest request), every layer kind counted by its own cache."""
from __future__ import annotations

from vramplan.estimate import estimate
from vramplan.scenario import Scenario


def _est(**d):
    return estimate(Scenario.from_dict(d)).to_dict()


def test_generate_max_context_is_the_last_prompt_that_fits():
    """gpt-oss-20b as shipped on a 16 GB card: max_context fits, one token more does not."""
    base = {"model": "openai/gpt-oss-20b", "gpu": "nvidia-rtx-5060-ti-16gb", "task": "generate"}
    n = _est(**base)["max_context"]
    assert n > 4096                                    # the 4k prompt of the done-when fits
    assert _est(**base, seq_len=n)["fits"] is True
    assert _est(**base, seq_len=n + 1)["fits"] is False


def test_generate_max_context_is_capped_by_the_positions():
    """Llama-2-7b (4096 positions) on an 80 GB card: 4096 - 256 new tokens = 3840."""
    e = _est(model="meta-llama/Llama-2-7b-hf", gpu="nvidia-h100-sxm5-80gb", task="generate")
    assert e["max_context"] == 4096 - 256


def test_sliding_layers_lengthen_the_context():
    """Gemma 3 27B bf16 on an H100: with 52 of 62 layers windowed at 1024 tokens the KV cache
    grows 81,920 B/token instead of 507,904 B/token, so the longest prompt is far beyond
    what an all-full cache would allow: 80 GB / 507,904 B < 170k tokens even with no weights;
    with ~50 GiB of weights the all-full cache would allow < 64k."""
    e = _est(model="google/gemma-3-27b-pt", gpu="nvidia-h100-sxm5-80gb", task="generate")
    assert e["max_context"] > 64_000


def test_serve_max_context_is_the_engines_longest_request():
    e = _est(model="google/gemma-3-4b-pt", gpu="nvidia-h100-sxm5-80gb", task="serve",
             serving={"kv_cache_dtype": "fp8"})
    assert e["max_context"] == e["serving"]["longest_context_tokens"] > 0


def test_other_tasks_have_no_max_context():
    e = _est(model="meta-llama/Llama-2-7b-hf", gpu="nvidia-h100-sxm5-80gb", task="train")
    assert "max_context" not in e
