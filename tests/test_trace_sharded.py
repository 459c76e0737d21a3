"""trace of a sharded plan in one process: FSDP2 (ZeRO-3 / ZeRO-2) on a fake process group, rank 0.

A tiny Llama-style decoder (8 blocks, so the sharded state is not swamped by the gathered working
set) traced at world size 1 and 4: the model state shrinks ~4x, activations do not, fake mode
agrees with real CPU tensors to the byte, and the analytic estimate is within 15 %."""
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from vramplan.measure import trace as T  # noqa: E402
from vramplan.errors import ScenarioError  # noqa: E402

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="no torch.distributed")

ARCH = {"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 8, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 256, "vocab_size": 512}
# params: 8 blocks x 147,456 + 2 x 65,536 (embed, lm_head) + norms
BLOCK_BYTES = 147_456 * 4 + 2 * 128 * 4
ROOT_BYTES = 2 * 65_536 * 4 + 128 * 4


def scn(world, zero=3, **kw):
    d = {"architecture": ARCH, "task": "train", "batch_size": 2, "seq_len": 32, "precision": "fp32",
         "optimizer": "adamw", "attention": "sdpa", "gpu": "nvidia-a100-sxm4-80gb",
         "parallel": {"gpus": world, "data": world, "zero": zero}}
    d.update(kw)
    return d


@pytest.fixture(scope="module")
def pair():
    return T.trace(scn(1), timeline=False), T.trace(scn(4), timeline=False)


def test_zero3_shards_model_state_4x(pair):
    full, shard = pair
    assert dist.is_initialized() is False            # the fake group is destroyed afterwards
    assert any("rank 0 of 4" in n for n in shard.notes)
    w1 = full.phases["setup"]["components"]["weights"]
    w4 = shard.phases["setup"]["components"]["weights"]   # the sharded parameters at rest
    assert w1 / 4 <= w4 <= w1 / 4 * 1.02                # padding / 512 B rounding only
    fc, sc = full.components, shard.components
    # at the peak: the shards plus the gathered working set (root + at most two blocks)
    assert w4 <= sc["weights"] <= w4 + ROOT_BYTES + 2 * BLOCK_BYTES
    opt1 = full.phases["optimizer-step"]["components"]
    opt4 = shard.phases["optimizer-step"]["components"]
    assert 0.24 < opt4["optimizer_states"] / opt1["optimizer_states"] < 0.27
    assert 0.24 < opt4["gradients"] / opt1["gradients"] < 0.27
    a1 = full.phases["forward"]["components"]["activations"]
    a4 = shard.phases["forward"]["components"]["activations"]
    # activations are per-rank: the same up to where in forward each phase peak falls (the
    # sharded run peaks while a block is gathered, a little before the end of forward)
    assert abs(a4 - a1) / a1 < 0.10
    assert shard.peak_allocated_bytes < 0.6 * full.peak_allocated_bytes
    assert fc["optimizer_states"] > 0 and sc.get("optimizer_states", 0) < fc["optimizer_states"] / 3


def test_fake_matches_real_cpu_tensors_sharded():
    fake = T.trace(scn(4), mode="fake", kernels="cpu", timeline=False)
    real = T.trace(scn(4), mode="cpu", kernels="cpu", timeline=False)
    assert fake.peak_allocated_bytes == real.peak_allocated_bytes
    assert fake.components == real.components


def test_zero2_keeps_parameters_gathered(pair):
    z2 = T.trace(scn(4, zero=2), timeline=False)
    assert z2.peak_allocated_bytes > pair[1].peak_allocated_bytes
    assert min(v["bytes"] for v in z2.phases.values()) >= 0


def test_estimate_within_15pct(pair):
    est = pytest.importorskip("vramplan.estimate")
    for r, w in zip(pair, (1, 4)):
        e = est.estimate(scn(w)).to_dict()["per_gpu"]["peak_allocated_bytes"]
        t = r.peak_allocated_bytes
        assert abs(e - t) / t <= 0.15, (w, e, t)


@pytest.mark.parametrize("par", [{"gpus": 2, "context": 2},   # tensor / pipeline: test_trace_parallel.py
                                 {"gpus": 2, "data": 2, "zero": 1}])
def test_refuses_what_it_does_not_model(par):
    with pytest.raises(ScenarioError):
        T.trace(scn(1, parallel=par), timeline=False)
