"""Tensor / sequence / pipeline parallel layouts against hand-checkable values.

Sources: Korthikanti et al. 2022 (Megatron-LM) Table 2, per-layer activations with TP
sbh(10 + 24/t + 5as/(ht)), with TP + SP sbh(34/t + 5as/(ht)); full recomputation keeps the
block input, 2sbh per layer (2sbh/t with SP). 1F1B: stage i holds min(pp - i, micro-batches).
"""
from dataclasses import replace

import pytest

from vramplan import parallel
from vramplan.catalog import get_model
from vramplan.estimate import estimate
from vramplan.workloads.transformer import sharding
from vramplan.workloads.transformer.activations import Kernels, layer_coeffs

# Korthikanti's layer: 16-bit activations, dropout, eager attention, LayerNorm, Megatron's fused
# GELU (which keeps its input only): GPT-2's shape with `gelu`, not transformers' `gelu_new`, whose
# Python arithmetic keeps three more f-wide tensors (activations.composite_gelu_bytes)
KORTH = Kernels(p=2, mixed=False, attention="eager", dropout=True, compile=False)


def korth_arch():
    return replace(get_model("gpt2").arch, activation="gelu")


def test_korthikanti_layer_is_34_and_5():
    a = korth_arch()
    assert layer_coeffs(a, KORTH) == (34.0, 5)
    assert sharding.replicated_coeff(a, KORTH) == 10   # 2 x 2 norm + 2 x 2 linear in + 2 x 1 mask


@pytest.mark.parametrize("t", [2, 4, 8])
def test_tp_layer_matches_table_2(t):
    a = korth_arch()
    c, s = layer_coeffs(a, KORTH)
    rep = sharding.replicated_coeff(a, KORTH)
    assert sharding.tp_layer(c, s, rep, t, sp=False) == pytest.approx((10 + 24 / t, 5 / t))
    assert sharding.tp_layer(c, s, rep, t, sp=True) == pytest.approx((34 / t, 5 / t))


# issue 11: Llama-3.1-70B, bf16-mixed, 4 x 4096, full checkpointing, flash, FSDP 8 x TP 8
S70 = {"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 4, "seq_len": 4096,
       "precision": "bf16-mixed", "checkpointing": "full", "attention": "flash",
       "gpu": "nvidia-h100-sxm5-80gb", "parallel": {"gpus": 64, "tensor": 8, "zero": 3}}


def test_sequence_parallel_splits_the_checkpointed_block_inputs_by_t():
    sbh = 4 * 4096 * 8192                       # 134,217,728 elements per block input
    kept = 80 * 2 * sbh                         # 80 block inputs at 2 B (FSDP mixed: 16-bit)
    assert kept == 21_474_836_480               # 20 GiB without SP; 2.5 GiB with SP (/8)
    base = estimate(S70, with_max_batch=False)
    spx = estimate(dict(S70, options=["sequence-parallel"]), with_max_batch=False)
    f0 = base.footprint.phases["forward"]["activations"]
    f1 = spx.footprint.phases["forward"]["activations"]
    # what SP splits 8 ways: the kept block inputs (80 x 2 sbh), the recomputed block's
    # replicated tensors (HF RMSNorm: fp32 x + 16-bit normed, 2 x (4 + 2), plus the q/k/v and
    # gate/up inputs, 2 x 2: 16 sbh) and the final norm's saved fp32 copy and 16-bit normed
    # tensor (4 + 2 sbh, sharding.norm_saved; the embedding output is the first kept block
    # input, stage_activations._embed_is_block_input)
    a = get_model(S70["model"]).arch
    assert a.layers == 80 and a.hidden == 8192
    assert f0 - f1 == pytest.approx((160 + 16 + 6) * sbh * 7 / 8, abs=4)
    assert f0 - f1 > 0.85 * kept                # the issue: it removed 1.6 GiB before
    # at the peak (the loss's backward, before any block is recomputed) SP splits the kept
    # inputs and the final norm's saved tensors: (160 + 6) sbh x 7/8, 18.2 GiB
    assert base.components["activations"] - spx.components["activations"] == pytest.approx(
        (160 + 6) * sbh * 7 / 8, abs=4)


def test_loss_parallel_divides_logits_by_t():
    """In the loss's backward (the backward phase). With SP, so the logits decide that phase
    with loss parallelism too: TP alone keeps the residual stream's gradients whole on every
    rank, and the recomputed block's backward then outgrows 1/8 of the logits (12 x 128256 / 8
    = 192k B per token), so that phase would show the block, not the logits."""
    sp = ["sequence-parallel"]
    base = estimate(dict(S70, options=sp), with_max_batch=False).footprint
    lp = estimate(dict(S70, options=sp + ["loss-parallel"]), with_max_batch=False).footprint
    tokens, vocab = 4 * 4096, 128256
    logits = 3 * 4 * tokens * vocab             # fp32 log-softmax out, its grad, input grad
    drop = base.phases["backward"]["activations"] - lp.phases["backward"]["activations"]
    assert drop == pytest.approx(logits - 3 * 4 * tokens * (vocab // 8), abs=8)


@pytest.mark.parametrize("pp", [2, 4])
def test_pipeline_stage_weights(pp):
    sc = {"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": 1, "seq_len": 2048,
          "precision": "bf16-mixed", "checkpointing": "full", "attention": "flash",
          "gpu": "nvidia-h100-sxm5-80gb", "gradient_accumulation": 8,
          "parallel": {"gpus": pp, "pipeline": pp}}
    e = estimate(sc, with_max_batch=False)
    ranks = {r["rank"].split(" (")[0]: r for r in e.ranks}
    first, last = ranks["stage 0"], ranks[f"stage {pp - 1}"]
    vh = 128256 * 4096                          # embedding (stage 0) = untied head (last)
    emb_b = 4 * vh                              # AMP: fp32 master weights
    fpr = e.footprint.ranks
    w0 = fpr["stage 0"].phases["forward"]["weights"]
    wl = fpr[f"stage {pp - 1}"].phases["forward"]["weights"]
    assert w0 == wl                             # same size: embedding vs untied head
    if pp == 4:
        mid = fpr["stage 1 (stages 1-2)"].phases["forward"]["weights"]
        assert w0 - mid == emb_b                # 2,101,346,304 B
        assert wl - mid == emb_b
    # 1F1B: stage 0 holds pp micro-batches of kept block inputs, the last stage one (+ logits)
    a0 = fpr["stage 0"].phases["forward"]["activations"]
    al = fpr[f"stage {pp - 1}"].phases["forward"]["activations"]
    sbh = 2048 * 4096
    blocks = 32 // pp
    # stage 0's embedding output is its first kept block input; the last stage adds its final
    # norm's fp32 copy and fp32 normed tensor (AMP: 4 + 4 B, sharding.norm_saved) and the head
    # input (2 B)
    assert a0 - al == pytest.approx((pp - 1) * blocks * 4 * sbh - 10 * sbh, abs=4)
    assert fpr[f"stage {pp - 1}"].phases["backward"]["activations"] > al   # logits there only
    assert e.device_used_bytes == max(r["device_used_bytes"] for r in e.ranks)
    assert first["device_used_bytes"] and last["device_used_bytes"]
    assert e.to_dict()["ranks"] == e.ranks


def test_stage_inflight():
    assert [parallel.pipeline_inflight(4, 8, i) for i in range(4)] == [4, 3, 2, 1]
    assert parallel.pipeline_inflight(4, 2, 0) == 2
    assert sharding.stages(2) == [0, 1] and sharding.stages(8) == [0, 1, 7]
