"""The `stack` key (NAME or NAME@VERSION) and its change points (catalog/data/stacks.toml):
validation naming the key, the URL and the CLI flag from the key table, and the nearest
earlier change point for a version between two."""
from __future__ import annotations

import pytest

from vramplan.catalog import stacks
from vramplan.errors import ScenarioError
from vramplan.scenario import Scenario
from vramplan.scenario.keys import cli_flags

LLAMA = {"model": "meta-llama/Llama-2-7b-hf"}


def test_every_name_the_issue_lists_is_known():
    want = {"pytorch", "hf", "torchtune", "torchtitan", "litgpt", "unsloth", "deepspeed",
            "megatron", "mmdet", "detectron2", "torchvision", "timm", "diffusers", "vllm",
            "sglang"}
    assert want <= set(stacks.names())


def test_default_pytorch_is_omitted_and_a_given_stack_round_trips():
    assert "stack" not in Scenario.from_dict(LLAMA).to_dict()
    assert Scenario.from_dict({**LLAMA, "stack": "pytorch"}).stack is None
    sc = Scenario.from_dict({**LLAMA, "stack": "TorchTitan@2025-06"})
    assert sc.stack == "torchtitan@2025-06" == sc.to_dict()["stack"]
    assert Scenario.from_dict(sc.to_dict()) == sc
    assert Scenario.from_query(sc.to_query()).stack == "torchtitan@2025-06"
    assert sc.replace(stack="hf").stack == "hf"


@pytest.mark.parametrize("bad, words", [
    ("foo", "unknown stack 'foo'"), ("hf@0.4", "not a month"),
    ("torchtune@2025-01", "not a release"), ("hf@2025-13", "not a month"), (3, "NAME"),
])
def test_bad_stack_is_refused_naming_the_key(bad, words):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict({**LLAMA, "stack": bad})
    assert e.value.key == "stack" and words in str(e.value)


def test_cli_flag_comes_from_the_table():
    flag = [f for f in cli_flags() if f.dest == "stack"]
    assert flag and flag[0].flag == "--stack" and flag[0].choices is None


def test_nearest_earlier_change_point():
    # torchtitan's compiled loss starts at 2025-04 (PR #1033): 2025-02 takes 2024-10 (loss
    # parallel, expandable segments), 2025-06 takes 2025-05, no version takes the newest
    # point; 2024-01 is before every point
    early, mid, newest = (stacks.resolve(v) for v in
                          ("torchtitan@2025-02", "torchtitan@2025-06", "torchtitan"))
    assert early.point == "2024-10" and not early.has("compiled-loss")
    assert early.has("expandable-segments") and \
        not stacks.resolve("torchtitan@2024-09").has("expandable-segments")
    before = stacks.resolve("torchtitan@2024-01")
    assert before.point is None and before.mechanisms == {}
    assert "earlier than every change point" in before.resolution_note()
    assert mid.point == "2025-05" and mid.has("compiled-loss")   # 2025-05: cuDNN attention
    assert "nearest earlier" in mid.resolution_note() and "2025-05" in mid.resolution_note()
    assert newest.has("compiled-loss") and "#1033" in newest.mechanisms["compiled-loss"]
    # bitsandbytes 0.43.2 (PR #1270, 2024-07) stopped keeping the 4-bit input
    assert stacks.resolve("hf@2024-06").has("bnb-4bit-keeps-input")
    assert not stacks.resolve("hf@2024-07").has("bnb-4bit-keeps-input")
    assert stacks.resolve(None).mechanisms == {}


def test_every_mechanism_has_a_source():
    for name in stacks.names():
        for mech, src in stacks.resolve(name).mechanisms.items():
            assert src and len(src) > 20, (name, mech)
