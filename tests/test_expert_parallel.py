"""Expert parallelism as a scenario key, `parallel.expert` (issue 20: EP was applied only
inside the cluster solver, as a private cut of the estimate's figure).

Hand figures. Mixtral-8x7B (config.json: 32 layers, 8 local experts, top-2, hidden 4096,
intermediate 14336, SwiGLU experts of 3 matrices): routed expert parameters
32 x 8 x 3 x 4096 x 14336 = 45,097,156,608. bf16-mixed keeps fp32 weights (4 bytes),
fp32 gradients (4) and AdamW's two fp32 moments (8): at EP e a rank holds 1/e of the experts,
so its expert bytes are total / e and every state drops by total x (1 - 1/e).
Qwen3-30B-A3B: 48 layers x 128 experts x 3 x 2048 x 768 = 28,991,029,248.
"""
import pytest

from vramplan.advisor import comm
from vramplan.advisor import costs as C
from vramplan.errors import ScenarioError
from vramplan.estimate import estimate
from vramplan.hardware import get_gpu
from vramplan.parallel import ParallelConfig, layout_of
from vramplan.scenario import Scenario
from vramplan.scenario import form, keys

MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
MIXTRAL_EXPERTS = 32 * 8 * 3 * 4096 * 14336
QWEN3 = "Qwen/Qwen3-30B-A3B"
QWEN3_EXPERTS = 48 * 128 * 3 * 2048 * 768
H100 = "nvidia-h100-sxm5-80gb"


def moe(model=MIXTRAL, expert=1, zero=0, gpus=8, **kw):
    d = {"model": model, "task": "train", "batch_size": 1, "seq_len": 4096,
         "precision": "bf16-mixed", "gpu": H100, "checkpointing": "full",
         "parallel": {"gpus": gpus, "expert": expert, "zero": zero}}
    d.update(kw)
    return d


def states(d):
    c = estimate(d, with_max_batch=False).footprint.components
    return {k: c[k] for k in ("weights", "gradients", "optimizer_states")}


@pytest.mark.parametrize("model,experts", [(MIXTRAL, MIXTRAL_EXPERTS), (QWEN3, QWEN3_EXPERTS)])
def test_expert_states_per_rank_are_total_over_ep(model, experts):
    base = states(moe(model))
    for e in (2, 4, 8):
        got = states(moe(model, e))
        cut = experts * (1 - 1 / e)          # the experts the other EP ranks hold
        assert base["weights"] - got["weights"] == pytest.approx(4 * cut, abs=8)
        assert base["gradients"] - got["gradients"] == pytest.approx(4 * cut, abs=8)
        assert base["optimizer_states"] - got["optimizer_states"] == pytest.approx(8 * cut,
                                                                                   abs=16)
        # the dense rest is the same: weights less the rank's own experts (total / e)
        assert got["weights"] - 4 * experts / e == pytest.approx(
            base["weights"] - 4 * experts, abs=8)


def test_mixtral_ep8_weights_by_hand():
    """EP 8: each rank holds one expert of each layer: 45,097,156,608 / 8 = 5,637,144,576
    expert parameters, 22,548,578,304 bytes in fp32."""
    w1 = states(moe())["weights"]
    w8 = states(moe(expert=8))["weights"]
    assert w8 == pytest.approx(w1 - 4 * MIXTRAL_EXPERTS + 4 * 5_637_144_576, abs=8)


def test_zero_shards_experts_over_the_expert_data_group():
    """Under ZeRO a sharded state is the same per rank with or without EP: the experts are
    sharded over data x context / ep (Megatron-Core's expert-data group), so experts /
    (ep x data / ep) = experts / data; an unsharded state still drops by EP."""
    z1, z1e = states(moe(zero=1)), states(moe(expert=4, zero=1))
    assert z1e["optimizer_states"] == pytest.approx(z1["optimizer_states"], abs=64)
    assert z1["weights"] - z1e["weights"] == pytest.approx(4 * MIXTRAL_EXPERTS * 3 / 4, abs=8)
    z3, z3e = states(moe(zero=3)), states(moe(expert=4, zero=3))
    for k in z3:
        assert z3e[k] == pytest.approx(z3[k], abs=64), k


def test_lora_frozen_base_experts_over_ep():
    """LoRA: the frozen base's experts per rank / EP (bf16-mixed base: 4-byte weights, as the
    estimate keeps it); under ZeRO-3 the base is sharded over the expert-data group, the same
    per rank as without EP (before: the EP share was divided by data again)."""
    z0, z0e = states(moe(task="lora")), states(moe(task="lora", expert=4))
    assert z0["weights"] - z0e["weights"] == pytest.approx(4 * MIXTRAL_EXPERTS * 3 / 4, abs=8)
    z3, z3e = states(moe(task="lora", zero=3)), states(moe(task="lora", expert=4, zero=3))
    assert z3e["weights"] == pytest.approx(z3["weights"], abs=64)


def test_all_to_all_bytes_by_hand():
    """4 all-to-alls per MoE layer (dispatch and combine, forward and backward; GShard s.2),
    each T x k x h x 2 bytes, (e - 1) / e of it leaving the rank: Mixtral, 4096 tokens,
    top-2, EP 4: 4 x 32 x 4096 x 2 x 4096 x 2 x 3/4 = 6,442,450,944 bytes per step."""
    sc = Scenario.from_dict(moe(expert=4))
    ts = comm.transfers(sc, sc.spec, get_gpu(H100), C.Sizes())
    a2a = [t for t in ts if t.dim == "expert"]
    assert len(a2a) == 1 and a2a[0].collective == "all-to-all"
    assert a2a[0].nbytes == 4 * 32 * 4096 * 2 * 4096 * 2 * 3 // 4
    sc1 = Scenario.from_dict(moe())
    assert not [t for t in comm.transfers(sc1, sc1.spec, get_gpu(H100), C.Sizes())
                if t.dim == "expert"]


def test_dispatch_buffers_in_backward(monkeypatch):
    """One MoE layer's all-to-all receive buffers, 2 x T x k x h x p (T 4096, k 2, h 4096,
    p 2 bytes) = 134,217,728 bytes in the backward phase at EP 2 (against the same plan
    with the buffers taken out; the compiled chunked loss, so that a block's backward, not the
    loss's, is the phase's peak)."""
    from vramplan.workloads.transformer.stage_activations import StageActivations
    d = moe(expert=2, checkpointing="none", options=["chunked-loss", "compile"])
    with_buffers = estimate(d, with_max_batch=False).footprint.phases["backward"]
    monkeypatch.setattr(StageActivations, "expert_a2a_bytes", lambda self, blk: 0)
    without = estimate(d, with_max_batch=False).footprint.phases["backward"]
    assert sum(with_buffers.values()) - sum(without.values()) == 2 * 4096 * 2 * 4096 * 2


@pytest.mark.parametrize("d,msg", [
    (moe("meta-llama/Llama-3.1-8B", 2), "needs an MoE model"),
    (moe(expert=3, gpus=6), "does not divide the 8 routed experts"),
    (moe(expert=8, gpus=4), "does not divide data x context = 4 x 1 = 4"),
    (dict(moe(expert=2), task="forward", checkpointing=None), "applies to"),
])
def test_refusals_name_the_key(d, msg):
    d = {k: v for k, v in d.items() if v is not None}
    with pytest.raises(ScenarioError) as err:
        Scenario.from_dict(d)
    assert "parallel.expert" in str(err.value) and msg in str(err.value)


def test_flag_url_and_form():
    flags = {f.flag: f for f in keys.cli_flags()}
    assert "--expert" in flags and flags["--expert"].type is int
    assert keys.scenario_from_flags({"expert": 4, "gpus": 8}) == {
        "parallel": {"expert": 4, "gpus": 8}}
    sc = Scenario.from_dict(moe(expert=4))
    q = sc.to_query()
    assert "parallel.expert=4" in q
    assert Scenario.from_query(q).parallel.expert == 4
    assert "expert" not in Scenario.from_dict(moe()).to_dict()["parallel"]   # default: as before
    shown = lambda m: [f.key for f in form.fields({"model": m, "task": "train"})]  # noqa: E731
    assert "parallel.expert" in shown(MIXTRAL)
    assert "parallel.expert" not in shown("meta-llama/Llama-3.1-8B")


def test_layout_reads_expert():
    assert layout_of({"gpus": 8, "data": 8, "expert": 4}).expert == 4
    assert ParallelConfig(gpus=8, data=8, expert=4).expert_shard_group == 2
    assert ParallelConfig().to_dict() == {"gpus": 1, "data": 1, "tensor": 1, "pipeline": 1,
                                          "context": 1, "zero": 0}


def test_cluster_solver_sets_the_key():
    """An EP layout of the solver is the estimate of its scenario with parallel.expert set (no
    private cut of the figure)."""
    from vramplan.advisor.cluster import Job, Layout, Solver
    s = Solver(Job(MIXTRAL, 4096, 64, H100, max_gpus=64))
    lay = Layout(8, 1, 1, 1, 4, 1, "full", 1, 8)
    opt = s.evaluate(lay)
    sc = s.scenario(lay)
    assert sc.parallel.expert == 4
    assert opt.device_used_bytes == estimate(sc, with_max_batch=False).device_used_bytes
    assert not any("estimate has no expert key" in n for n in opt.notes)


def test_gpus_needed_view_keeps_ep_layouts():
    """The page's GPUs-needed view left EP layouts out (their estimate had no expert key);
    now each is its scenario with parallel.expert: Mixtral, 256 x 4096 tokens, up to 32 H100s,
    the 32-GPU point of the front is EP 2."""
    from vramplan.advisor.cluster import Job
    from vramplan.ui.widgets.cluster_view import solve_for
    front = solve_for(Job(MIXTRAL, 4096, 256, H100, max_gpus=32))
    ep = [o for o in front if o.layout.expert > 1]
    assert ep and all(o.estimate.scenario.parallel.expert == o.layout.expert for o in ep)
