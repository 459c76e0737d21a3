"""Issue 22's later stack mechanisms (catalog/data/stacks.toml, workloads/stack_mechanisms.py),
each with a value checkable by hand: Unsloth's 8-bit AdamW default, LLM.int8's saved input and
copies, T5's fp32 `wo` under fp16 / int8 / nf4, expandable segments in torchtitan's runs."""
from __future__ import annotations

from hypothesis import given, strategies as st

from vramplan import overhead
from vramplan.estimate import estimate
from vramplan.scenario import Scenario
from vramplan.workloads import stack_mechanisms as mech

A100 = "nvidia-a100-sxm4-80gb"
MiB = 2**20


def _est(d: dict, stack: str | None):
    return estimate({**d, "stack": stack} if stack else d, with_max_batch=False)


LORA_7B = {"model": "meta-llama/Llama-2-7b-hf", "task": "lora", "batch_size": 1,
           "seq_len": 512, "gpu": A100}


def test_unsloth_defaults_to_8bit_adamw_from_2025_02():
    """PR #1701 (95fb1d69, 2025-02): Unsloth's patched TRL configs default optim='adamw_8bit'.
    Llama-2-7b LoRA r 8 on q_proj, v_proj: 32 x 2 x 8 x (4096 + 4096) = 4,194,304 bf16
    adapter parameters. torch AdamW: 2 states x 2 B = 16,777,216 B; bitsandbytes (>= 0.44)
    AdamW8bit: 2 x (1 + 4 / 256) B = 8,519,680 B."""
    old, new = _est(LORA_7B, "unsloth@2025-01"), _est(LORA_7B, "unsloth@2025-02")
    assert old.components["optimizer_states"] == 4_194_304 * 2 * 2 == 16_777_216
    assert new.components["optimizer_states"] == 8_519_680
    assert any("adamw-8bit-default" in n and "#1701" in n for n in new.notes)
    assert {m["name"]: m["applied"] for m in new.to_dict()["stack"]["mechanisms"]}[
        "adamw-8bit-default"]
    # an optimizer the scenario names wins, and says nothing about the default
    named = _est({**LORA_7B, "optimizer": "adamw"}, "unsloth@2025-02")
    assert named.components["optimizer_states"] == 16_777_216
    assert not any("adamw-8bit-default" in n for n in named.notes)


def test_bitsandbytes_0_44_keeps_an_absmax_per_256_states():
    """bitsandbytes 0.44.0 (PR #1365, aa57bd89, 2024-09): 8-bit optimizer blocks of 256, not
    2048. The 4,194,304 adapter parameters above with adamw-8bit: 2 x (1 + 4 / 2048) B =
    8,404,992 B before, 2 x (1 + 4 / 256) B = 8,519,680 B from hf@2024-09; the default stack
    keeps the 2048 it always counted."""
    d = {**LORA_7B, "optimizer": "adamw-8bit"}
    assert _est(d, "hf@2024-08").components["optimizer_states"] == 8_404_992
    assert _est(d, "hf@2024-09").components["optimizer_states"] == 8_519_680
    assert _est(d, None).components["optimizer_states"] == 8_404_992
    plain = _est({**LORA_7B, "optimizer": "adamw"}, "hf@2024-09")
    assert not any("bnb-optim-block-256" in n for n in plain.notes)


def test_the_stack_default_is_the_scenarios():
    sc = Scenario.from_dict({**LORA_7B, "stack": "unsloth"})
    assert sc.optimizer == "adamw-8bit"
    assert Scenario.from_dict({**LORA_7B, "stack": "unsloth@2025-01"}).optimizer == "adamw"
    assert Scenario.from_dict({**LORA_7B, "stack": "hf"}).optimizer == "adamw"
    assert Scenario.from_dict({**LORA_7B, "task": "generate", "stack": "unsloth"}).optimizer \
        == "none"
    # a stack change re-defaults an optimizer that was not given, never a given one
    assert sc.replace(stack="hf").optimizer == "adamw"
    hf = Scenario.from_dict({**LORA_7B, "stack": "hf"})
    assert hf.replace(stack="unsloth").optimizer == "adamw-8bit"
    named = Scenario.from_dict({**LORA_7B, "stack": "unsloth", "optimizer": "adamw"})
    assert named.replace(stack="hf").optimizer == "adamw"
    assert Scenario.from_query(named.to_query()).optimizer == "adamw"


def test_llm_int8_lora_keeps_every_frozen_input():
    """MatMul8bitLt.forward saves A whenever an input needs a gradient (bitsandbytes c771b3a7,
    2022-07; transformers load_in_8bit from 2022-08). Llama-2-7b int8 LoRA on q, v, 1 x 512:
    the frozen o_proj (T x h), gate / up (one shared T x h) and down_proj (T x f) inputs,
    2 B each, in 32 layers: 32 x (2 x 512 x 4096 x 2 + 512 x 11008 x 2) = 629,145,600 B."""
    d = {**LORA_7B, "precision": "int8"}

    def fwd(stack):
        return _est(d, stack).footprint.phases["forward"]["activations"]
    assert fwd("hf@2022-08") - fwd("hf@2022-07") == 629_145_600
    assert fwd(None) == fwd("hf@2022-07")


def test_llm_int8_backward_dequantises_the_weight():
    """MatMul8bitLt.backward: CB = state.CB.to(bf16, copy=True).mul_(SCB / 127): a 16-bit copy
    of the widest linear plus its fp32 row scales. Llama-2-70b (h 8192, f 28672) int8 LoRA,
    1 x 512: 2 x 8192 x 28672 + 4 x 28672 = 469,876,736 B. A block's backward held
    (2 x 2 x 28672 / 8192 + 2 x 2) x 512 x 8192 = 75,497,472 B, less the head side freed before
    any block's backward (the final norm's fp32 copy and cast-back output, 6 B, and the head's
    16-bit input, 2 B: 8 x 512 x 8192 = 33,554,432 B; training._train_phases head_side):
    41,943,040 B, below the loss's 3 x 4 x 512 x 32000 = 196,608,000 B; now
    41,943,040 + 469,876,736 = 511,819,776 B: backward activations grow by
    511,819,776 - 196,608,000 = 315,211,776 B."""
    d = {**LORA_7B, "model": "meta-llama/Llama-2-70b-hf", "precision": "int8"}
    old, new = _est(d, "hf@2024-11"), _est(d, "hf@2024-12")
    assert new.footprint.phases["backward"]["activations"] - \
        old.footprint.phases["backward"]["activations"] == 315_211_776
    assert new.footprint.phases["forward"] == old.footprint.phases["forward"]


def test_llm_int8_call_copies_in_prefill():
    """bitsandbytes 0.45.0 (#1401): a call holds the int8 input (T x in), an fp32 scale per row
    and the int32 accumulator (4 T x out). Llama-2-7b int8 generate, prefill 1 x 512, widest
    linear gate / up (4096 -> 11008): 512 x (4096 + 4 x 11008) + 4 x 512 = 24,643,584 B."""
    g = {"model": "meta-llama/Llama-2-7b-hf", "task": "generate", "batch_size": 1,
         "seq_len": 512, "new_tokens": 16, "precision": "int8", "gpu": A100}
    assert mech.int8_call_bytes(4096, 11008, 512) == 24_643_584
    old, new = _est(g, "hf@2024-11"), _est(g, "hf@2024-12")
    assert new.footprint.phases["prefill"]["activations"] - \
        old.footprint.phases["prefill"]["activations"] == 24_643_584
    assert _est({**g, "precision": "bf16"}, "hf").footprint.phases["prefill"] == \
        _est({**g, "precision": "bf16"}, None).footprint.phases["prefill"]


def test_t5_keeps_wo_in_fp32():
    """transformers _keep_in_fp32_modules = ['wo'] (PR #20683, v4.26.0, 2023-01). t5-3b:
    24 + 24 layers, d_ff 16384, d_model 1024: 805,306,368 wo weights. fp16: 2 B more each,
    1,610,612,736 B; int8 (1 + 4 / 4096 B per weight): 805,306,368 x 2.9990234375 =
    2,415,132,672 B. bf16 keeps bf16 (the flag is for float16 only); before 2023-01 nothing."""
    def w(prec, stack):
        return _est({"model": "t5-3b", "task": "forward", "precision": prec, "gpu": A100},
                    stack).components["weights"]
    assert w("fp16", "hf") - w("fp16", None) == 48 * 16384 * 1024 * 2 == 1_610_612_736
    assert w("int8", "hf") - w("int8", None) == 2_415_132_672
    assert w("bf16", "hf") == w("bf16", None)
    assert w("fp16", "hf@2022-12") == w("fp16", None)
    # not a T5: unchanged
    llama = {"model": "meta-llama/Llama-2-7b-hf", "task": "forward", "precision": "fp16",
             "gpu": A100}
    assert _est(llama, "hf").components["weights"] == _est(llama, None).components["weights"]


def test_expandable_segments_in_torchtitan_from_2024_10():
    """torchtitan a5e57e4a (2024-10-22): run_llama_train.sh sets expandable_segments:True.
    Llama-3.1 8B FSDP8, 2 x 8192, selective (case F01's plan): allocated is unchanged; the
    slack is the unfilled part of the large pool's last 20 MiB page plus the fragmentation
    share: 73,252,870,144 B allocated -> 3493 pages = 73,253,519,360 B, 649,216 B unfilled;
    0.2 x 61,207,478,272 transient B = 12,241,495,654.4 B; slack 12,242,144,870 B (it was
    rounding_waste + 0.2 x transient + 0.005 x persistent = 10,485,760 + 12,241,495,654.4 +
    60,226,959.36 = 12,312,208,373 B). Allocated and transient are 2 x 8192 x 4096 x 2 B =
    134,217,728 B above the figures before 5e75e68 / 063e74b (73,118,652,416 B): under selective
    checkpointing the embedding output is the first block's checkpointed input (-2 B per
    token x hidden), and the final norm saves its fp32 copy and cast-back output, not its
    16-bit input (+6 - 2 = +4 B)."""
    d = {"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": 2,
         "seq_len": 8192, "precision": "bf16-mixed", "checkpointing": "selective",
         "parallel": {"gpus": 8, "zero": 3}, "gpu": "nvidia-h100-sxm5-96gb"}
    old, new = _est(d, "torchtitan@2024-09"), _est(d, "torchtitan@2024-10")
    assert old.peak_allocated_bytes == new.peak_allocated_bytes == 73_252_870_144
    assert overhead.page_waste(73_252_870_144) == 3493 * 20 * MiB - 73_252_870_144 == 649_216
    assert new.components["allocator_slack"] == 12_242_144_870
    assert old.components["allocator_slack"] == 12_312_208_373
    assert {m["name"]: m["applied"] for m in new.to_dict()["stack"]["mechanisms"]}[
        "expandable-segments"]
    assert _est(d, None).components["allocator_slack"] == old.components["allocator_slack"]


@given(st.integers(min_value=1, max_value=2**40))
def test_page_waste_fills_the_last_page(allocated):
    w = overhead.page_waste(allocated)
    assert 0 <= w < 20 * MiB and (allocated + w) % (20 * MiB) == 0
