"""One allocator model for expandable segments (issue 22): the scenario option
`expandable-segments` and the stack mechanism of the same name (torchtitan from 2024-10) both
mean "the caching allocator runs with expandable_segments:True" and give the same bytes
(vramplan.overhead.expandable_slack); the advisor's lever saves the difference of the two
allocator models, nothing more.

PyTorch c10/cuda/CUDACachingAllocator.cpp: large-pool pages of kLargeBuffer = 20 MiB, small-pool
pages of kSmallBuffer = 2 MiB, should_split at >= 512 B with expandable segments; without them
a request >= 10 MiB gets its own segment rounded to kRoundLarge = 2 MiB."""
from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, strategies as st

from vramplan import overhead
from vramplan.advisor.levers import BY_ID
from vramplan.advisor.recommend import context, evaluate
from vramplan.estimate import estimate
from vramplan.hardware import get_gpu
from vramplan.scenario import Scenario

MiB = 2**20
H100 = "nvidia-h100-sxm5-96gb"
# case F01's plan (torchtitan benchmarks/llama3_h100_202412): Llama-3.1 8B FSDP 8, 2 x 8192
F01 = {"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": 2, "seq_len": 8192,
       "precision": "bf16-mixed", "checkpointing": "selective",
       "parallel": {"gpus": 8, "zero": 3}, "gpu": H100}


def _footprint(components: dict, largest: int):
    """A footprint with a known list of tensors: what overhead reads of one."""
    return SimpleNamespace(allocator="torch", components=components, notes=[], stack=None,
                           peak_allocated_bytes=sum(components.values()),
                           largest_allocation=largest, reserved_floor_bytes=0)


def _est(stack: str | None = None, options: list | None = None):
    d = {**F01, **({"stack": stack} if stack else {}), **({"options": options} if options else {})}
    return estimate(d, with_max_batch=False)


def test_known_tensors_with_and_without_expandable_segments():
    """Persistent: weights 64 MiB + gradients 64 MiB + optimizer states 128 MiB = 256 MiB;
    transient: activations 100 MiB whose largest request is 30 MiB + 1000 B. Allocated 356 MiB.
    Without expandable segments: the largest request rounds to 512 B (30 MiB + 1024) and gets a
    segment rounded to 2 MiB (32 MiB): 2 MiB - 1024 B unused, plus half a 20 MiB segment of the
    1-10 MiB pool (10 MiB); 0.2 x 100 MiB = 20 MiB; 0.005 x 256 MiB = 1,342,177.28 B:
    12,581,888 + 20,971,520 + 1,342,177.28 = 34,895,585 B.
    With them: 356 MiB fill 18 pages of 20 MiB (360 MiB): 4 MiB unfilled + 20 MiB = 24 MiB."""
    fp = _footprint({"weights": 64 * MiB, "gradients": 64 * MiB,
                     "optimizer_states": 128 * MiB, "activations": 100 * MiB}, 30 * MiB + 1000)
    plain = Scenario.from_dict({"model": "gpt2", "task": "train"})
    opt = Scenario.from_dict({"model": "gpt2", "task": "train",
                              "options": ["expandable-segments"]})
    assert overhead.allocator_slack(fp, plain) == 12_581_888 + 20_971_520 + 1_342_177 \
        == 34_895_585
    assert overhead.allocator_slack(fp, opt) == 4 * MiB + 20 * MiB == 25_165_824
    assert overhead.reserved_bytes(fp, opt) == 356 * MiB + 24 * MiB
    # the torchtitan stack from 2024-10 means the same allocator: the same bytes
    titan = Scenario.from_dict({"model": "gpt2", "task": "train", "stack": "torchtitan@2024-10"})
    assert overhead.allocator_slack(fp, titan) == 25_165_824


def test_option_and_stack_give_identical_bytes():
    """F01's plan: 73,252,870,144 B allocated (3493 pages of 20 MiB = 73,253,519,360 B:
    649,216 B unfilled), 61,207,478,272 transient B (0.2 x = 12,241,495,654.4 B): slack
    12,242,144,870 B, reserved 73,252,870,144 + 12,242,144,870 = 85,495,015,014 B, for the
    option on torchtitan@2024-09, for torchtitan@2024-10 and for the option under the default
    stack. The old option (page + 0.02 x transient = 649,216 + 1,224,149,565.44 B) gave
    11,017,346,089 B less than the stack for the same allocator."""
    ref = _est("torchtitan@2024-10")
    assert ref.components["allocator_slack"] == 12_242_144_870
    for got in (_est("torchtitan@2024-09", ["expandable-segments"]),
                _est(None, ["expandable-segments"]),
                _est("torchtitan@2024-10", ["expandable-segments"])):
        assert got.peak_allocated_bytes == ref.peak_allocated_bytes == 73_252_870_144
        assert got.components["allocator_slack"] == ref.components["allocator_slack"]
        assert got.peak_reserved_bytes == ref.peak_reserved_bytes == 85_495_015_014
        assert got.device_used_bytes == ref.device_used_bytes


def test_advisor_saves_the_difference_of_the_two_models():
    """torchtitan@2024-09 (no expandable segments) on F01's plan: slack = rounding_waste
    (the largest request is 2 MiB aligned: no rounding, + 10 MiB of the 1-10 MiB pool's half
    segment = 10,485,760) + 12,241,495,654.4 + 0.005 x 12,045,391,872 persistent B
    (60,226,959.36) = 12,312,208,373 B. With expandable segments 12,242,144,870 B: the lever
    saves 70,063,503 B (66.8 MiB; the old 0.02 share offered ~10.3 GiB)."""
    old = _est("torchtitan@2024-09")
    new = _est("torchtitan@2024-09", ["expandable-segments"])
    assert old.components["allocator_slack"] == 12_312_208_373
    ctx = context(old.scenario, get_gpu(H100), old)
    rec = evaluate(ctx, BY_ID["expandable-segments"])
    assert rec.saves_bytes == old.device_used_bytes - new.device_used_bytes == 70_063_503
    assert rec.saves_bytes == old.components["allocator_slack"] - 12_242_144_870
    assert any("CUDACachingAllocator.cpp" in s for s in rec.cost.sources)


def test_no_advice_where_the_stack_already_expands():
    """torchtitan@2024-10 runs with expandable segments: the option changes no byte, so the
    advisor does not offer it."""
    est = _est("torchtitan@2024-10")
    assert evaluate(context(est.scenario, get_gpu(H100), est), BY_ID["expandable-segments"]) \
        is None


@given(st.integers(1, 2**36), st.integers(0, 2**36), st.integers(0, 2**34))
def test_expandable_slack_is_the_last_page_plus_the_shared_share(persistent, transient,
                                                                 largest):
    """Both models keep the same fragmentation share (FRAG) of the transient bytes; expandable
    segments add the last 20 MiB page's unfilled part beside it (less than one page) and no
    per-tensor grain; the default allocator adds its rounding and the persistent grain."""
    alloc = persistent + transient
    page = overhead.page_waste(alloc)
    assert 0 <= page < 20 * MiB and (alloc + page) % (20 * MiB) == 0
    assert overhead.expandable_slack(alloc, transient) == int(page + overhead.FRAG * transient)
    assert overhead.segment_slack(largest, transient, persistent) == int(
        overhead.rounding_waste(largest) + overhead.FRAG * transient
        + overhead.PERSIST_GRAIN * persistent)
