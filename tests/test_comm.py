"""Honest multi-GPU costs (issue 20 item 5): the bytes each layout moves per step, on which
link, in how long; every figure below is computed by hand in its comment."""
import pytest

from vramplan.advisor import comm
from vramplan.advisor.costs import Sizes
from vramplan.advisor.recommend import context, cost_of, evaluate
from vramplan.advisor.levers import BY_ID
from vramplan.advisor.solver import SCALE_OUT, _layout_cost
from vramplan.catalog import get_model
from vramplan.hardware import get_gpu
from vramplan.scenario import Scenario

LORA = {"model": "meta-llama/Llama-3.1-8B", "task": "lora", "batch_size": 1, "seq_len": 2048,
        "precision": "bf16-mixed", "gpu": "nvidia-rtx-4090"}


def _sc(**kw):
    return Scenario.from_dict({**LORA, **kw})


def test_zero3_gathers_the_frozen_base_forward_and_backward():
    # Llama-3.1-8B: 8.03e9 parameters x 2 bytes (bf16 compute) = 16.06 GB, all frozen.
    # ZeRO-3 over 4 GPUs: all-gather 3/4 of it in forward and again in backward
    # >= 2 x 16 GB x 3/4 = 24 GB per GPU per step; the adapters' gradients are the rest.
    sc = _sc(parallel={"gpus": 4, "data": 4, "zero": 3})
    spec = get_model(sc.model)
    ts = comm.transfers(sc, spec, get_gpu("nvidia-rtx-4090"), Sizes())
    gather = [t for t in ts if t.collective == "all-gather"][0]
    assert gather.nbytes >= 2 * 16e9 * 3 / 4
    assert spec.arch.param_count() * 2 * 2 * 3 / 4 == pytest.approx(gather.nbytes, rel=1e-6)
    grads = [t for t in ts if t.collective == "reduce-scatter"][0]
    assert 0 < grads.nbytes < 1e9                     # adapters only (fp32 gradients)


def test_geforce_is_not_peer_to_peer():
    # RTX 4090: PCIe Gen4 x16 = 16 x 1.969 = 31.5 GB/s; no P2P on GeForce: through host
    # memory at half that (costs.toml host_staged_share 0.5) = 15.75 GB/s.
    lk = comm.intra_link(get_gpu("nvidia-rtx-4090"), 4)
    assert "peer to peer" not in lk.name and "through host memory" in lk.name
    assert lk.gbs == pytest.approx(16 * 1.969 * 0.5)
    assert "NVLink" in comm.intra_link(get_gpu("nvidia-h100-sxm5-80gb"), 8).name


def test_lora_zero3_plan_on_4090s_is_priced_at_the_gathers():
    # the old price was 10-15 MB (adapter gradients only); now >= 24 GB, and at 15.75 GB/s
    # through host memory that is >= 1.5 s of communication per step
    sc = _sc()
    dev = get_gpu("nvidia-rtx-4090")
    ctx = context(sc, dev)
    sc4 = sc.replace(parallel={"gpus": 4, "data": 4, "zero": 3})
    cost = _layout_cost(ctx, sc4, None, 4)
    assert cost.communication_bytes_per_step >= 24e9
    assert "peer to peer" not in cost.link
    assert sum(t["time_s"] for t in cost.transfers) >= 24e9 / (15.75e9) - 1e-6
    assert SCALE_OUT.id == "scale-out"


def test_offloaded_frozen_base_crosses_the_host_link_every_step():
    # parameters offloaded: the 16 GB base is read in for forward and again for backward
    ctx = context(_sc(), get_gpu("nvidia-rtx-4090"))
    rec = evaluate(ctx, BY_ID["offload-params"])
    assert rec is not None and rec.cost.host_bytes_per_step >= 2 * 16e9
    assert rec.cost.host_time_s > 0 and rec.cost.host_link.startswith("PCIe Gen4")
    again = cost_of(ctx, BY_ID["offload-params"], rec.scenario, rec.estimate)
    assert again.transfers and again.transfers[0]["bytes"] >= 2 * 16e9


def test_groups_past_a_node_run_at_the_network_rate():
    # DGX H100 (systems.toml): 8 GPUs in one NVLink domain, 8 x 400 Gb/s ports = 50 GB/s
    # per GPU; tensor 8 stays on NVLink 4 (450 GB/s), a 16-way data group leaves the node
    dev = get_gpu("nvidia-h100-sxm5-80gb")
    net = comm.network(dev)
    assert net.domain == 8 and net.scaleout_gbs == pytest.approx(50.0)
    assert comm.group_link(dev, net, 8, 8).gbs == pytest.approx(450)
    far = comm.group_link(dev, net, 16, 16)
    assert far.gbs == pytest.approx(50.0) and "between nodes" in far.name


def test_tensor_parallel_bytes_by_hand():
    # Llama-3.1-8B train, b 1, s 2048, TP 2 (no ckpt): 4 all-reduces per layer of
    # 2048 x 4096 x 2 B = 16.8 MB, ring 2 (t-1)/t = 1 -> 32 layers x 4 x 16.8 MB = 2.15 GB
    sc = _sc(task="train", parallel={"gpus": 2, "tensor": 2})
    ts = comm.transfers(sc, get_model(sc.model), get_gpu("nvidia-h100-sxm5-80gb"), Sizes())
    tp = [t for t in ts if t.dim == "tensor"][0]
    assert tp.nbytes == 32 * 4 * 2048 * 4096 * 2


try:
    from hypothesis import given, settings, strategies as st
except ImportError:  # pragma: no cover
    given = None

if given is not None:
    @settings(max_examples=40, deadline=None)
    @given(dp=st.sampled_from([2, 4, 8, 16]), tp=st.sampled_from([1, 2, 4, 8]),
           ga=st.integers(1, 8), task=st.sampled_from(["train", "lora"]))
    def test_more_sharding_never_sends_less(dp, tp, ga, task):
        # ZeRO-3 gathers every parameter per micro-batch on top of ZeRO-2's per-micro-batch
        # gradient reduce-scatter, which is ZeRO-1's once-per-step one repeated: bytes grow
        # with the stage; every transfer's time is its bytes over its link's rate
        dev = get_gpu("nvidia-h100-sxm5-80gb")
        spec = get_model("meta-llama/Llama-3.1-8B")
        data = []
        for z in (1, 2, 3):
            sc = _sc(task=task, gradient_accumulation=ga,
                     parallel={"gpus": dp * tp, "data": dp, "tensor": tp, "zero": z})
            ts = [t for t in comm.transfers(sc, spec, dev, Sizes()) if t.dim == "data"]
            for t in ts:
                assert t.time_s == pytest.approx(t.nbytes / (t.link.gbs * 1e9))
            data.append(sum(t.nbytes for t in ts))
        assert data[0] <= data[1] <= data[2]
