"""Selective checkpointing with tensor parallelism by stack (mechanism megatron-selective-tp,
catalog/data/stacks.toml): the default `pytorch` stack and torchtitan follow torchtitan's op
SAC over DTensor TP, which adds two terms (sharding.sac_gathered_inputs, training.
_replicated_embedding_grad); Megatron-LM (and DeepSpeed, whose TP is Megatron-DeepSpeed's)
recomputes the core attention only and keeps VocabParallelEmbedding's gradient shard, so
neither term applies and the Megatron coefficient holds (Korthikanti et al. 2022 s.4)."""
from __future__ import annotations

from vramplan.catalog import stacks
from vramplan.estimate import estimate

S, B, H, V, T = 4096, 1, 4096, 128_256, 4     # Llama-3.1-8B: hidden 4096, vocabulary 128,256

PLAN = {"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": B, "seq_len": S,
        "precision": "bf16-mixed", "gpu": "nvidia-h100-sxm5-80gb",
        "checkpointing": "selective",
        "parallel": {"gpus": 4, "data": 1, "tensor": T, "pipeline": 1},
        "options": ["sequence-parallel"]}

# with SP, a selective block's replay keeps the re-gathered attention and MLP inputs whole:
# 2 inputs x p (bf16-mixed linears compute in 2 B) x S B H x (1 - 1/t); one block is replayed
# at a time, so one block's worth: 2 x 2 x 4096 x 1 x 4096 x 3/4
GATHERED = 2 * 2 * S * B * H * (T - 1) // T
assert GATHERED == 50_331_648
# the RowwiseParallel embedding's gradient is the whole V x h table: fp32 gradients
# (bf16-mixed) beyond the rank's V/t shard, 4 x 128,256 x 4096 x 3/4
EMBED_GRAD = 4 * V * H * (T - 1) // T
assert EMBED_GRAD == 1_576_009_728


def _est(stack: str | None, **kw):
    d = {**PLAN, **kw}
    return estimate({**d, "stack": stack} if stack else d, with_max_batch=False)


def _applied(e) -> bool:
    return {m["name"]: m["applied"] for m in e.to_dict()["stack"]["mechanisms"]}[
        "megatron-selective-tp"]


def test_torchtitan_and_megatron_differ_by_the_two_terms():
    tt, mg = _est("torchtitan"), _est("megatron")
    ph_tt, ph_mg = tt.to_dict()["phases"], mg.to_dict()["phases"]
    # the embedding gradient is held until the step
    assert ph_tt["optimizer-step"]["gradients"] - ph_mg["optimizer-step"]["gradients"] == \
        EMBED_GRAD
    assert tt.components["gradients"] - mg.components["gradients"] == EMBED_GRAD
    # a later block's backward holds the replay's gathered inputs (the embedding gradient is
    # made after it: both stacks' gradients there are the same)
    later_tt, later_mg = ph_tt["backward-later"], ph_mg["backward-later"]
    assert later_tt["activations"] - later_mg["activations"] == GATHERED
    assert later_tt["gradients"] == later_mg["gradients"]
    # the forward keeps the same saved tensors (the Megatron coefficient, tp_selective)
    assert ph_tt["forward"] == ph_mg["forward"]


def test_the_default_stack_follows_torchtitan_and_deepspeed_megatron():
    tt, mg = _est("torchtitan").to_dict()["phases"], _est("megatron").to_dict()["phases"]
    assert _est(None).to_dict()["phases"] == tt
    assert _est("deepspeed").to_dict()["phases"] == mg


def test_the_stack_section_and_notes_say_which_applied():
    mg, tt = _est("megatron"), _est("torchtitan")
    assert _applied(mg)
    assert any(n.startswith("stack mechanism 'megatron-selective-tp' (megatron)")
               and "Korthikanti" in n for n in mg.notes)
    assert not any("megatron-selective-tp" in n for n in tt.notes)
    assert "megatron-selective-tp" not in {m["name"] for m in
                                           tt.to_dict()["stack"]["mechanisms"]}
    # its own source, not the MoE router's `always_source` beside it
    src = stacks.resolve("megatron").mechanisms
    assert "VocabParallelEmbedding" in src["megatron-selective-tp"]
    assert "TopKRouter" in src["topk-moe-routing"]


def test_without_sp_only_the_embedding_gradient_differs():
    """sac_gathered_inputs is 0 without SP; the embedding gradient stays."""
    tt, mg = _est("torchtitan", options=[]), _est("megatron", options=[])
    assert tt.components["gradients"] - mg.components["gradients"] == EMBED_GRAD
    assert tt.to_dict()["phases"]["backward-later"]["activations"] == \
        mg.to_dict()["phases"]["backward-later"]["activations"]


def test_nothing_to_change_says_nothing():
    """Full checkpointing, or selective without TP: neither term exists, the mechanism is not
    applied and the figures are the same on both stacks."""
    for kw in ({"checkpointing": "full"},
               {"parallel": {"gpus": 4, "data": 4, "tensor": 1, "pipeline": 1}, "options": []}):
        tt, mg = _est("torchtitan", **kw), _est("megatron", **kw)
        assert not _applied(mg), kw
        assert not any("megatron-selective-tp" in n for n in mg.notes)
        assert tt.to_dict()["phases"] == mg.to_dict()["phases"], kw
