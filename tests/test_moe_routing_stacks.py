"""Llama 4's dense routing depends on the stack (stack mechanism topk-moe-routing,
catalog/data/stacks.toml). transformers 5.23.0 Llama4TextMoe.forward repeats every token over
all E experts (`hidden_states.repeat(E, 1)`, then Llama4TextExperts' bmm), so training keeps
the E - k unrouted experts' tensors too (moe_buffers.dense_routing_saved); torchtitan (>=
2025-04, PR #1064), torchtune and Megatron-Core run their own top-k router and grouped experts,
which keep the k routed copies only. Before, every stack was estimated with transformers'
dense routing (the torchtitan - hf differences below were 0)."""
import json

import pytest

from vramplan.catalog import get_model
from vramplan.estimate import estimate

GPU = "nvidia-h100-sxm5-80gb"


def _cut(model, layers=4):
    cfg = json.loads(json.dumps(get_model(model).config))
    n = cfg["num_hidden_layers"]
    for k, v in list(cfg.items()):
        if isinstance(v, list) and len(v) == n:
            cfg[k] = v[:layers]
    cfg["num_hidden_layers"] = layers
    return cfg


def _run(model, stack):
    sc = {"task": "train", "batch_size": 4, "seq_len": 2048, "precision": "bf16",
          "optimizer": "adamw", "attention": "sdpa", "gpu": GPU, "stack": stack,
          "architecture": _cut(model)}
    return estimate(sc, with_max_batch=False)


def _forward_act(e):
    return e.footprint.phases["forward"]["activations"]


def test_torchtitan_keeps_only_the_routed_experts_of_llama4():
    """Llama-4-Scout: h 5120, expert width I 8192, E 16, k 1, every layer MoE, bf16 (p 2),
    4 layers x 4 x 2048 tokens. Each unrouted expert keeps the repeated input and routed_in
    (2 p h), gate_up (2 p I), act(gate) and the product (p I each): per token per hidden unit
    2 x 4 x 8192 / 5120 + 2 x 2 = 16.8, x (16 - 1) experts = 252; x 8192 tokens x 5120 x 4
    layers = 42,278,584,320 B fewer under torchtitan."""
    hf = _run("meta-llama/Llama-4-Scout-17B-16E", "hf")
    tt = _run("meta-llama/Llama-4-Scout-17B-16E", "torchtitan")
    assert _forward_act(hf) - _forward_act(tt) == 252 * 8192 * 5120 * 4 == 42_278_584_320
    assert any("'topk-moe-routing' (torchtitan)" in n for n in tt.notes)
    mech = {m["name"]: m["applied"] for m in tt.to_dict()["stack"]["mechanisms"]}
    assert mech["topk-moe-routing"] is True


@pytest.mark.parametrize("stack", ["torchtune", "megatron"])
def test_the_other_own_moe_stacks_route_top_k(stack):
    hf = _run("meta-llama/Llama-4-Scout-17B-16E", "hf")
    assert _forward_act(hf) - _forward_act(_run("meta-llama/Llama-4-Scout-17B-16E", stack)) \
        == 42_278_584_320


@pytest.mark.parametrize("stack", ["pytorch", "hf", "unsloth", "torchtitan@2025-03"])
def test_transformers_stacks_keep_dense_routing(stack):
    """The default stack (pytorch: a plain loop over the transformers model, as the real-module
    rows trace it), hf, Unsloth (patched transformers models) and torchtitan before Llama 4
    came to it keep transformers' dense routing."""
    ref = _run("meta-llama/Llama-4-Scout-17B-16E", "hf")
    e = _run("meta-llama/Llama-4-Scout-17B-16E", stack)
    assert _forward_act(e) == _forward_act(ref)
    assert not any("topk-moe-routing" in n for n in e.notes)


def test_a_top_k_model_is_the_same_under_every_stack():
    """Qwen3-30B-A3B routes top-k in transformers too: torchtitan changes nothing and says
    nothing about it."""
    hf = _run("Qwen/Qwen3-30B-A3B", "hf")
    tt = _run("Qwen/Qwen3-30B-A3B", "torchtitan")
    assert _forward_act(hf) == _forward_act(tt)
    assert not any("topk-moe-routing" in n for n in tt.notes)
