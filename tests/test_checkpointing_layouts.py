"""Every checkpointing mode composes with every parallel dimension (issue 20.1).

The bug: Llama-3.1-70B, bf16-mixed, seq 8192, 64 GPUs, ZeRO-3 with `checkpointing: selective`
kept 88.5 GiB of activations at TP1 and still 88.3 GiB at TP8 + sequence parallel (`none` at
TP8 + SP: 45.7 GiB): the selective branch never divided by the tensor-parallel degree.

What selective keeps per rank (workloads/transformer/sharding.tp_selective, from torchtitan's
op-level SAC policy and DTensor's Colwise / RowwiseParallel), per block, in bytes per token per
hidden unit (sbh), p = 2 (ZeRO-3 bf16-mixed computes in 16 bit), Llama-3.1-70B (q width 1, k / v
width 1/8, gated MLP width 28672 / 8192 = 3.5, 64 heads over hidden 8192):
  block input                      2           (over t with SP)
  q, v, gate outputs + SDPA out    2 x (1 + 1/8 + 3.5) + 2 x 1 + 4 x 64 / 8192 = 11.28125
                                               (column-parallel: over t)
  down output (row-parallel mm)    2           (the local partial sum: whole on every rank)
  SP: o_proj / down reduce-scatter 2 x 2 / t
TP1: 15.28125; TP8 + SP: (2 + 11.28125 + 4) / 8 + 2 = 4.16015625 per layer.
The split part (everything but the row-parallel partial sum) is exactly 1/8 of TP1's:
(15.28125 - 2) / 8 = 1.66015625, against Korthikanti et al. 2022 s.4's 34sbh/t for Megatron's
selective (attention-core recomputation), where every saved tensor divides by t.
"""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vramplan.catalog import get_model
from vramplan.estimate import estimate
from vramplan.workloads.transformer import sharding
from vramplan.workloads.transformer.activations import Kernels, selective_coeff

GiB = 2**30
S, H, LAYERS = 8192, 8192, 80


def llama70b(ckpt, tensor=1, sp=False, pipeline=1, context=1, ga=1, **kw):
    gpus = 64
    d = {"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 1, "seq_len": S,
         "precision": "bf16-mixed", "gpu": "nvidia-h100-sxm5-80gb", "checkpointing": ckpt,
         "gradient_accumulation": ga,
         "parallel": {"gpus": gpus, "data": gpus // tensor // pipeline // context,
                      "tensor": tensor, "pipeline": pipeline, "context": context, "zero": 3},
         "options": ["sequence-parallel"] if sp else []}
    d.update(kw)
    return d


def fwd_acts(d):
    return estimate(d).to_dict()["phases"]["forward"]["activations"]


def test_bug_selective_is_split_by_tp_and_sp():
    """Before: 88.5 GiB (TP1), 88.3 GiB (TP8 + SP) against none's 45.7 GiB at TP8 + SP."""
    tp1 = estimate(llama70b("selective")).to_dict()["per_gpu"]["components"]["activations"]
    sel = estimate(llama70b("selective", 8, True)).to_dict()["per_gpu"]["components"]
    none = estimate(llama70b("none", 8, True)).to_dict()["per_gpu"]["components"]
    # 88.52 -> 88.65 GiB: the embedding output is the first block's checkpointed input, not
    # a tensor of its own (stage_activations._embed_is_block_input; -2 B x 8192 x 8192), and
    # the final norm saves its fp32 copy and cast-back output (sharding.norm_saved, 4 + 2 B),
    # not its 2 B input: +4 B x 8192 x 8192
    assert tp1 / GiB == pytest.approx(88.5234375 + 2 / 16, abs=1e-6)
    assert none["activations"] / GiB == pytest.approx(45.7, abs=0.1)
    assert sel["activations"] < none["activations"]
    # 80 layers x 4.16015625 x sbh (2 bytes... folded in) + the head / loss tensors (below)
    assert sel["activations"] / GiB < 35


def _per_layer(ckpt, tensor, sp):
    """Forward-end activations of one more block: 2 blocks minus 1 (a 2-layer Llama-3.1-70B
    shape), so the embedding / head tensors cancel."""
    arch = {"model_type": "llama", "hidden_size": H, "num_attention_heads": 64,
            "num_key_value_heads": 8, "intermediate_size": 28672, "vocab_size": 128256,
            "max_position_embeddings": 131072}

    def acts(n):
        d = llama70b(ckpt, tensor, sp, architecture=dict(arch, num_hidden_layers=n))
        del d["model"]
        return fwd_acts(d)
    return acts(2) - acts(1)


def test_selective_tp8_sp_per_layer_by_hand():
    sbh = S * H
    tp1 = _per_layer("selective", 1, False)
    tp8 = _per_layer("selective", 8, True)
    assert tp1 == pytest.approx(15.28125 * sbh, abs=8)
    assert tp8 == pytest.approx(4.16015625 * sbh, abs=8)
    # the split part is exactly 1/8 of TP1's; the row-parallel partial sum (2 sbh) stays whole
    partial = 2 * sbh
    assert (tp8 - partial) == pytest.approx((tp1 - partial) / 8 + 2 * 2 * sbh / 8, abs=8)
    # without SP the block input stays whole too: 2 + 11.28125 / 8 + 2 = 5.41015625
    assert _per_layer("selective", 8, False) == pytest.approx(5.41015625 * sbh, abs=8)


def test_tp_selective_formula_and_tp1_identity():
    from vramplan.catalog import get_model
    a = get_model("meta-llama/Llama-3.1-70B").arch
    k = Kernels(p=2, mixed=False, attention="sdpa", dropout=False, compile=False)
    assert sharding.tp_selective(a, k, 1, False) == pytest.approx(selective_coeff(a, k))
    assert sharding.tp_selective(a, k, 8, True) == pytest.approx(4.16015625)
    assert sharding.tp_selective(a, k, 8, False) == pytest.approx(5.41015625)


def test_full_keeps_block_inputs_split_only_with_sp():
    """Korthikanti s.4: full recomputation keeps 2sbh per layer, 2sbh/t with SP (here the
    residual stream is 16-bit: p = 2)."""
    sbh = S * H
    full1 = _per_layer("full", 1, False)
    assert full1 == pytest.approx(2 * sbh, abs=8)
    assert _per_layer("full", 8, False) == pytest.approx(2 * sbh, abs=8)
    assert _per_layer("full", 8, True) == pytest.approx(2 * sbh / 8, abs=8)


LAYOUTS = st.fixed_dictionaries({
    "tensor": st.sampled_from([1, 2, 4, 8]), "sp": st.booleans(),
    "pipeline": st.sampled_from([1, 2, 4]), "context": st.sampled_from([1, 2, 4]),
    "ga": st.sampled_from([1, 2, 4, 8]), "zero": st.sampled_from([0, 1, 2, 3]),
    "model": st.sampled_from(["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B",
                              "Qwen/Qwen2.5-7B", "mistralai/Mixtral-8x7B-v0.1"]),
    "expert": st.sampled_from([1, 2]), "virtual": st.sampled_from([1, 2, 4]),
    "seq": st.sampled_from([2048, 8192]), "precision": st.sampled_from(["bf16-mixed", "bf16"]),
    "attention": st.sampled_from(["sdpa", "flash", "eager"]),
})


def _peaks_per_rank(lay, ckpt):
    """{rank: activations with their transients (full: the recomputed block; selective: the
    block's recomputed rest) in the phase where the activations peak}. Not the whole peak:
    under selective the estimate follows torchtitan's DTensor TP, whose embedding gradient is
    whole-vocabulary on every TP rank without FSDP (training._replicated_embedding_grad), a
    gradient of the framework, not of the checkpointing (an 8B TP2 optimizer step: +1.05 GB)."""
    tp, pp, cp = lay["tensor"], lay["pipeline"], lay["context"]
    arch = get_model(lay["model"]).arch
    # EP on the MoE model only (it divides its 8 experts and data x context = 2 x cp);
    # interleaving where Megatron's rules allow it (parallel_keys.py), else plain 1F1B
    ep = lay["expert"] if arch.is_moe else 1
    v = lay["virtual"] if (pp > 1 and lay["ga"] % pp == 0 and
                           (arch.total_layers // pp) % lay["virtual"] == 0) else 1
    d = {"model": lay["model"], "task": "train", "batch_size": 1, "seq_len": lay["seq"],
         "precision": lay["precision"], "gpu": "nvidia-h100-sxm5-80gb", "checkpointing": ckpt,
         "attention": lay["attention"], "gradient_accumulation": lay["ga"],
         "parallel": {"gpus": 2 * tp * pp * cp, "data": 2, "tensor": tp, "pipeline": pp,
                      "context": cp, "zero": lay["zero"], "expert": ep,
                      "virtual_stages": v},
         "options": ["sequence-parallel"] if lay["sp"] and tp > 1 else []}
    fp = estimate(d, with_max_batch=False).footprint
    ranks = fp.ranks or {"all": fp}   # pipeline stages: each rank's own phases

    def at_activation_peak(r):
        top = max(r.phases.values(), key=lambda ph: ph.get("activations", 0))
        return top.get("activations", 0) + top.get("temporary", 0)
    return {name: at_activation_peak(r) for name, r in ranks.items()}


@settings(max_examples=60, deadline=None)
@given(LAYOUTS)
def test_full_le_selective_le_none_per_rank(lay):
    """Per rank, in the phase where activations peak: full <= selective <= none, over TP, SP,
    PP (1F1B and interleaved), CP, EP (Mixtral) and ZeRO 0-3. Each stage of these models holds
    >= 7 blocks (28+ layers over <= 4 stages), so full's one recomputed block is outweighed by
    the others' inputs."""
    none = _peaks_per_rank(lay, "none")
    sel = _peaks_per_rank(lay, "selective")
    full = _peaks_per_rank(lay, "full")
    assert none.keys() == sel.keys() == full.keys()
    for rank in none:
        assert full[rank] <= sel[rank] <= none[rank], (rank, full[rank], sel[rank], none[rank])
