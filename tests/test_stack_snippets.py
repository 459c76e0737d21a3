"""The advisor's how-to snippets in the plan's stack's own configuration syntax first
(advisor/stack_snippets.py, advisor/data/stack_snippets.toml; each stack's source in its
[sources] table)."""
from __future__ import annotations

import tomllib

from vramplan.advisor import stack_snippets as S
from vramplan.advisor.recommend import BY_ID, context, evaluate, how_for
from vramplan.catalog import stacks
from vramplan.hardware import default_db
from vramplan.report.content import recommendations
from vramplan.scenario import Scenario

H100 = "nvidia-h100-sxm5-80gb"
FSDP = {"model": "meta-llama/Meta-Llama-3-8B", "task": "train", "seq_len": 8192,
        "parallel": {"gpus": 8, "zero": 3}, "gpu": H100}
HOW = tomllib.loads((S.DATA.parent / "how.toml").read_text(encoding="utf-8"))


def test_every_snippet_is_for_a_lever_and_a_stack_with_a_source():
    table = tomllib.loads(S.DATA.read_text(encoding="utf-8"))
    sources = table.pop("sources")
    assert set(table) <= set(HOW)               # a key how.toml has (a lever's how or id)
    names = set(stacks.names())
    for key, per_stack in table.items():
        assert set(per_stack) <= names, key     # stack names of catalog/data/stacks.toml
        assert set(per_stack) <= set(sources), key
    assert set(sources) <= names


def test_the_plans_stack_comes_first_then_pytorch():
    how = HOW["checkpointing-full"]
    got = S.ordered("checkpointing-full", how, "torchtitan@2025-06")
    assert list(got)[:2] == ["torchtitan", "pytorch"]
    assert got["torchtitan"] == '[activation_checkpoint]\nmode = "full"'
    assert set(got) == set(how) | set(S.snippets("checkpointing-full"))
    default = S.ordered("checkpointing-full", how, None)
    assert list(default)[0] == "pytorch" and default["hf"] == how["hf"]
    # a stack without a snippet for the lever: pytorch first
    assert list(S.ordered("compile", HOW["compile"], "megatron"))[0] == "pytorch"


def _how(plan: dict, lever: str, gpu: str = H100) -> dict:
    dev = default_db().get(gpu)
    sc = Scenario.from_dict({**plan, "gpu": dev.id})
    rec = evaluate(context(sc, dev), BY_ID[lever])
    assert rec is not None, lever
    return rec.how


def test_recommendations_speak_the_stacks_syntax():
    """Llama-3 8B FSDP 1 x 8192 without checkpointing: the advisor recommends checkpointing;
    its how-to leads with the stack's own switch."""
    sel = _how({**FSDP, "stack": "torchtitan@2025-06"}, "checkpointing-selective")
    assert next(iter(sel.items())) == ("torchtitan", '[activation_checkpoint]\nmode = '
                                       '"selective"\nselective_ac_option = "op"  # per-op '
                                       'policy; an integer n checkpoints every n-th block')
    meg = _how({**FSDP, "stack": "megatron"}, "checkpointing-selective")
    assert list(meg)[0] == "megatron" and "--recompute-granularity selective" in meg["megatron"]
    hf = _how({**FSDP, "stack": "hf"}, "checkpointing-full")
    assert list(hf)[0] == "hf" and "gradient_checkpointing=True" in hf["hf"]
    uns = _how({**FSDP, "stack": "unsloth"}, "checkpointing-full")
    assert list(uns)[0] == "unsloth" and 'use_gradient_checkpointing="unsloth"' in uns["unsloth"]
    ds = _how({**FSDP, "parallel": {"gpus": 8}, "stack": "deepspeed"}, "zero-1")
    assert list(ds)[0] == "deepspeed" and '"zero_optimization": {"stage": N}' in ds["deepspeed"]
    plain = _how(FSDP, "checkpointing-full")
    assert list(plain)[0] == "pytorch"


def test_serving_engines_get_their_own_flags():
    serve = {"model": "meta-llama/Llama-3.1-8B", "task": "serve"}
    sg = _how({**serve, "stack": "sglang"}, "kv-cache-fp8")
    assert list(sg)[0] == "sglang" and "--kv-cache-dtype fp8_e5m2" in sg["sglang"]
    vl = _how({**serve, "stack": "vllm"}, "max-model-len")
    assert list(vl)[0] == "vllm" and "--max-model-len" in vl["vllm"]


def test_how_for_without_a_plan_keeps_how_toml_and_adds_the_stacks():
    got = how_for(BY_ID["checkpointing-full"])
    assert list(got)[0] == "pytorch" and {"torchtitan", "megatron", "torchtune"} <= set(got)


def test_the_report_shows_the_stacks_snippet_first():
    rec = {"id": "checkpointing-full", "title": "x", "saves_bytes": 1, "fits": True,
           "cost": {}, "source": [],
           "how": {"pytorch": "checkpoint(block, x)", "hf": "gradient_checkpointing=True",
                   "torchtitan": "[activation_checkpoint]\nmode = \"full\""}}
    shown = recommendations({"recommendations": [rec],
                             "scenario": {"stack": "torchtitan@2025-06"}}, "en")[0]["how"]
    assert [k for k, _ in shown] == ["torchtitan", "pytorch"]
    plain = recommendations({"recommendations": [rec], "scenario": {}}, "en")[0]["how"]
    assert [k for k, _ in plain] == ["pytorch", "hf"]              # as before: pytorch first
