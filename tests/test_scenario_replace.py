"""`Scenario.replace(**changes)` is the one pass again: the given keys with the changes,
resolved (`scenario.resolve`), so every derived value is derived again from the new values and
no rule is restated for the replace (issue 19, Build 1: "the advisor and the sweep change given
keys and re-resolve"). Each test below failed on the old `build.replace_dict`, which started
from the whole resolved scenario and dropped some derived values by restating the rules.
"""
from __future__ import annotations

import pytest

from vramplan.errors import ScenarioError
from vramplan.scenario import Scenario, resolve
from vramplan.sweep.grid import BatchVariants

H100 = "nvidia-h100-sxm5-80gb"
T4 = "nvidia-t4"                      # Turing, compute capability 7.5: no bf16 tensor cores
LLAMA = "meta-llama/Llama-3.1-8B"


def test_serve_batch_change_re_derives_max_num_seqs():
    # serve with nothing given: vLLM's max_num_seqs 256, batch_size follows it (256). A batch
    # of 8 asked for: max_num_seqs is derived from the batch again (8); the old replace kept
    # the whole resolved serving object, so it stayed 256 under a batch of 8.
    sc = resolve({"model": LLAMA, "task": "serve"}, H100)
    assert (sc.batch_size, sc.serving.max_num_seqs) == (256, 256)
    sc8 = sc.replace(batch_size=8)
    assert (sc8.batch_size, sc8.serving.max_num_seqs) == (8, 8)
    # the same scenario as resolving the given keys with the batch
    assert sc8 == resolve({"model": LLAMA, "task": "serve", "batch_size": 8}, H100)


def test_serve_seq_len_change_re_derives_max_model_len_and_batched_tokens():
    # seq_len 1024 -> max_model_len 1024 -> max_num_batched_tokens max(2048, min(1024, 8192))
    # = 2048 (vLLM's chunked-prefill default); the old replace kept max_model_len 131072 and
    # 8192 batched tokens from the model's positions
    sc = resolve({"model": LLAMA, "task": "serve"}, H100)
    got = sc.replace(seq_len=1024).serving
    assert (got.max_model_len, got.max_num_batched_tokens) == (1024, 2048)


def test_a_given_serving_value_stays_through_a_batch_change():
    sc = resolve({"model": LLAMA, "task": "serve", "serving": {"max_num_seqs": 64}}, H100)
    sc2 = sc.replace(batch_size=16)
    assert (sc2.batch_size, sc2.serving.max_num_seqs) == (16, 64)


def test_gpu_change_keeps_a_given_precision_and_re_derives_a_derived_one():
    # derived: bf16-mixed on an H100, fp16-mixed on a T4 (no bf16 tensor cores)
    derived = resolve({"model": "gpt2"}, H100)
    assert derived.precision == "bf16-mixed"
    assert derived.replace(gpu=T4).precision == "fp16-mixed"
    # given bf16-mixed (equal to the H100's default): it stays what was given; the old replace
    # compared the value with the old GPU's default and dropped it (fp16-mixed)
    given = resolve({"model": "gpt2", "precision": "bf16-mixed"}, H100)
    assert given.replace(gpu=T4).precision == "bf16-mixed"


def test_stack_change_re_derives_the_optimizer_unless_given():
    # Unsloth's trainer defaults to adamw_8bit (catalog/data/stacks.toml), the others adamw
    sc = resolve({"model": LLAMA, "task": "lora", "stack": "hf"}, H100)
    assert sc.optimizer == "adamw"
    assert sc.replace(stack="unsloth").optimizer == "adamw-8bit"
    assert sc.replace(stack="unsloth").replace(stack="hf").optimizer == "adamw"
    named = resolve({"model": LLAMA, "task": "lora", "stack": "unsloth",
                     "optimizer": "adamw"}, H100)
    assert named.replace(stack="hf").replace(stack="unsloth").optimizer == "adamw"


def test_a_given_value_equal_to_the_old_task_default_survives_a_task_change():
    # batch_size 1 given on train (train's default is 1 too): serving it keeps the batch of 1
    # (max_num_seqs 1); the old replace took any value equal to the old task's default for
    # a derived one and served 256 sequences
    sc = resolve({"model": LLAMA, "batch_size": 1}, H100)
    srv = sc.replace(task="serve")
    assert (srv.batch_size, srv.serving.max_num_seqs) == (1, 1)
    # not given: the new task's default (vLLM's 256)
    assert resolve({"model": LLAMA}, H100).replace(task="serve").batch_size == 256


def test_refused_given_keys_are_dropped_never_the_ones_asked_for():
    sc = resolve({"model": LLAMA, "task": "lora", "optimizer": "adamw-8bit", "seq_len": 8192,
                  "lora": {"rank": 8, "targets": ["q_proj", "gate_proj"]}}, H100)
    gen = sc.replace(task="generate")      # generate does not train: the optimizer goes
    assert gen.optimizer == "none" and gen.seq_len == 8192 and gen.lora.rank == 8
    # gpt2 has 1024 positions: the given 8192 goes (derived again: lora's 2048 capped at
    # the 1024 positions); gpt2's MLP has no gate_proj (c_fc / c_proj), so the given targets
    # go (the default targets again: workloads.registry.unknown_lora_targets), the rank stays
    g2 = sc.replace(model="gpt2")
    assert (g2.seq_len, g2.lora.rank, g2.optimizer) == (1024, 8, "adamw-8bit")
    assert g2.lora.targets == resolve({"model": "gpt2", "task": "lora"}).lora.targets
    with pytest.raises(ScenarioError, match="seq_len"):
        sc.replace(model="gpt2", seq_len=8192)      # asked for: refused, naming the key
    with pytest.raises(ScenarioError, match="bogus"):
        sc.replace(bogus=1)


def test_replace_remembers_the_given_keys():
    sc = resolve({"model": LLAMA, "task": "serve", "seq_len": 2048}, H100)
    sc2 = sc.replace(batch_size=4, seq_len=None)          # None: derived again
    assert sc2.given_dict() == {"model": LLAMA, "task": "serve", "batch_size": 4, "gpu": H100}
    assert sc2.seq_len == 131072 == sc2.serving.max_model_len


def test_a_scenario_built_directly_counts_every_value_as_given():
    sc = Scenario(model="gpt2", batch_size=4, seq_len=256)
    assert sc.replace(batch_size=8) == Scenario.from_dict(
        {**sc.to_dict(), "batch_size": 8})


def test_sweep_batch_variants_of_a_serve_plan_move_max_num_seqs():
    # the sweep's fast path changes the batch field alone where that equals `replace`; for a
    # serve plan whose max_num_seqs follows the batch it does not, so each batch re-resolves
    sc = resolve({"model": LLAMA, "task": "serve", "batch_size": 8}, H100)
    bv = BatchVariants(sc, [1, 2, 4, 16])
    assert not bv.fast
    assert [bv.get(b).serving.max_num_seqs for b in (1, 3, 16)] == [1, 3, 16]
    train = BatchVariants(resolve({"model": LLAMA}, H100), [1, 64])
    assert train.fast and train.get(7).batch_size == 7


def test_sweep_of_a_scenario_varies_its_given_keys(monkeypatch):
    # serving.max_model_len 1024 on a served Llama-3.1-8B whose engine was all derived: the
    # point changes the given serving keys, so the batched tokens are derived again,
    # max(2048, min(1024, 8192)) = 2048; the sweep used to merge the point into the whole
    # resolved serving object, keeping the 8192 derived from the 131072 positions
    from vramplan.sweep import rows, sweep
    seen = []

    def spy(given, base, point):
        ch = changes_for(given, base, point)
        seen.append(base.replace(**ch))
        return ch

    changes_for = rows.changes_for
    monkeypatch.setattr(rows, "changes_for", spy)
    sc = resolve({"model": LLAMA, "task": "serve"}, H100)
    sweep(sc, {"serving.max_model_len": [1024]}, gpus=[H100], workers=1)
    assert {(s.seq_len, s.serving.max_model_len, s.serving.max_num_batched_tokens)
            for s in seen} == {(1024, 1024, 2048)}


def test_the_page_s_model_switch_drops_every_refused_entry():
    # Llama -> gpt2 (same family): the given seq_len 8192 (gpt2: 1024 positions) and the LoRA
    # target gate_proj (gpt2 has none) both go; the page used to drop what one check named
    # (the pass stops at seq_len), leaving gate_proj as an error on the new plan
    from vramplan.ui.state.state import PlanState
    st = PlanState(gpu=H100)
    st.apply({"model": LLAMA, "task": "lora", "seq_len": 8192, "batch_size": 4,
              "lora": {"rank": 16, "targets": ["q_proj", "gate_proj"]}})
    st.set_model("gpt2")
    assert st.draft == {"model": "gpt2", "task": "lora", "batch_size": 4, "lora": {"rank": 16}}
    assert st.scenario is not None and st.scenario.lora.rank == 16
