"""Training activations of Gated DeltaNet and Mamba2 layers (workloads/transformer/
mixer_activations.py): what fla's / mamba_ssm's kernels save, by hand, and how a hybrid's
mean block follows its layer kinds."""
import json

import pytest

from vramplan.catalog import get_model
from vramplan.catalog.hf_config import arch_from_config
from vramplan.estimate import estimate
from vramplan.workloads.transformer import mixer_activations as ma
from vramplan.workloads.transformer.activations import Kernels, layer_coeffs

BF16 = Kernels(p=2, mixed=False, attention="sdpa", dropout=False, compile=False)
MIXED = Kernels(p=2, mixed=True, attention="sdpa", dropout=False, compile=False)


def _arch(model, layers=None, **extra):
    cfg = json.loads(json.dumps(get_model(model).config))
    if layers is not None:
        n = cfg["num_hidden_layers"]
        for k, v in list(cfg.items()):
            if (isinstance(v, list) and len(v) == n) or k == "hybrid_override_pattern":
                cfg[k] = v[:layers]
        cfg["num_hidden_layers"] = layers
    cfg.update(extra)
    return arch_from_config(cfg)


def test_mamba2_kernel_saves_zxbcdt_out_x_and_rstd():
    """Granite-4.0-H-Tiny: hidden 1536, 48 heads x 64 (inner 3072), 1 group, d_state 128.
    zxbcdt = 2 x 3072 + 2 x 1 x 128 + 48 = 6448 wide; bf16-mixed: in_proj's 16-bit input (2 B),
    zxbcdt (2 B each), out_x (3072 x 2 B), rstd (1 group x 4 B fp32)."""
    a = _arch("ibm-granite/granite-4.0-h-tiny")
    by_hand = (2 + 2 * 6448 + 2 * 3072 + 4 * 1) / 1536
    assert ma.mamba_core(a, MIXED, {"qkv": True, "o": True}) == pytest.approx(by_hand)
    assert by_hand == 19_046 / 1536


def test_gated_deltanet_kernel_saves_by_hand():
    """Qwen3-Next: 16 key heads x 128 (key_dim 2048), 32 value heads x 128 (value_dim 4096),
    conv_dim 2 x 2048 + 4096 = 8192, hidden 2048; pure bf16 (p = 2, bf16 norm weight):
    in_proj input 2; conv input 2 x 8192; fla: q, k (2 x 2 x 2048), v (2 x 4096), q / k rstd
    (2 x 4 x 16), g cumsum (4 x 32), beta (2 x 32), A (2 x 64 x 32); gate softplus in / out
    (8 x 32); gated RMSNorm (4 + 2 + 2 + 4 + 4) x 4096; out_proj input 2 x 4096."""
    a = _arch("Qwen/Qwen3-Next-80B-A3B-Instruct")
    fla = 2 * 2 * 2048 + 2 * 4096 + 2 * 4 * 16 + 4 * 32 + 2 * 32 + 2 * 64 * 32
    by_hand = 2 + 2 * 8192 + fla + 8 * 32 + 16 * 4096 + 2 * 4096
    assert by_hand == 111_170
    assert ma.deltanet_core(a, BF16, {"qkv": True, "o": True}) * 2048 == pytest.approx(by_hand)


def test_uniform_models_without_qk_norm_are_unchanged():
    a = _arch("meta-llama/Llama-3.2-1B")
    c, _ = layer_coeffs(a, MIXED)
    assert ma.layer_adjust(a, MIXED, c) == (0.0, 1.0)
    assert ma.hybrid_adjust(_arch("Qwen/Qwen3-0.6B"), MIXED, c) == (0.0, 1.0)


def test_qwen3_next_mean_block_swaps_attention_for_deltanet():
    """Layers linear, linear, linear, full: three of four layers swap the attention terms for
    the DeltaNet ones; a quarter of the layers keep attention scores."""
    a = _arch("Qwen/Qwen3-Next-80B-A3B-Instruct", layers=4)
    assert a.layer_kinds == ("linear", "linear", "linear", "full")
    keep = {"qkv": True, "o": True}
    c, _ = layer_coeffs(a, BF16)
    dc, share = ma.hybrid_adjust(a, BF16, c)
    assert share == 0.25
    assert dc == pytest.approx(3 / 4 * (ma.deltanet_core(a, BF16, keep)
                                        - ma.attention_core(a, BF16, keep)))


def test_nemotron_h_blocks_hold_a_mixer_or_an_mlp():
    """Nemotron-H's first two blocks: mamba, mlp. A mamba block = norm + Mamba2 mixer; an mlp
    block = norm + MLP; the uniform coefficient c counts norm + attention + norm + MLP in both:
    mean = ((norm + mamba) + (c - norm - attention)) / 2."""
    a = _arch("nvidia/Nemotron-H-8B-Base-8K", layers=2)
    assert a.layer_kinds == ("mamba", "mlp")
    keep = {"qkv": True, "o": True}
    c, _ = layer_coeffs(a, MIXED)
    norm = 4 + 4                 # HF RMSNorm under autocast: x.float() and the fp32 normed x
    att, mam = ma.attention_core(a, MIXED, keep), ma.mamba_core(a, MIXED, keep)
    mean = ((norm + mam) + (c - norm - att)) / 2
    dc, share = ma.hybrid_adjust(a, MIXED, c)
    assert share == 0.0
    assert c + dc == pytest.approx(mean)


def test_hybrid_training_activations_follow_the_layer_kinds():
    """The estimate's forward activations of Granite-4.0-H-Tiny (6 layers: 5 mamba, 1 full):
    changing the Mamba2 mixer's width changes them; a uniform model's do not move."""
    def acts(model, layers, **extra):
        cfg = json.loads(json.dumps(get_model(model).config))
        n = cfg["num_hidden_layers"]
        for k, v in list(cfg.items()):
            if isinstance(v, list) and len(v) == n:
                cfg[k] = v[:layers]
        cfg.update(num_hidden_layers=layers, **extra)
        e = estimate({"architecture": cfg, "task": "train", "batch_size": 1, "seq_len": 1024,
                      "precision": "bf16", "optimizer": "adamw", "attention": "sdpa",
                      "gpu": "nvidia-h100-sxm5-80gb"}, with_max_batch=False)
        return e.footprint.phases["forward"]["activations"]
    base = acts("ibm-granite/granite-4.0-h-tiny", 6)
    wider = acts("ibm-granite/granite-4.0-h-tiny", 6, mamba_d_head=128)
    # 5 mamba layers x 1024 tokens x (2 B zxbcdt x 2 x 48 x 64 more + 2 B out_x x 48 x 64 more)
    assert wider - base == pytest.approx(5 * 1024 * (2 * 2 * 3072 + 2 * 3072), rel=1e-6)


def test_mamba2_prefill_moment_by_hand():
    """Granite-4.0-H-Tiny's prefill (bf16, p = 2): zxbcdt 2 x 3072 + 2 x 128 + 48 = 6448 wide,
    the conv output 3072 + 256 = 3328, the scan output 3072, all 16-bit, and the gated norm's
    three fp32 tensors of 3072 (12 B each element): 2 x (6448 + 3328 + 3072) + 12 x 3072 =
    62,560 B per token, / hidden 1536, + 2p for the block input and residual (the model
    without its routed experts). With its 64 experts, top-6 of width 512, the MoE block's
    routed copies are wider (moe_buffers.py, grouped_mm_experts_forward): 6 selections per
    token, 4 x 1536 wide at the reorder (wider than h + 4 x 512), 2 B each; router logits
    64 x 2 B, top-k ids and weights 6 x 10 B, sort ids / perms / histc input / sorted
    weights 6 x 30 B: 73,728 + 128 + 60 + 180 = 74,096 B per token."""
    a = _arch("ibm-granite/granite-4.0-h-tiny", num_local_experts=0, num_experts_per_tok=0)
    assert 2 * (6448 + 3328 + 3072) + 12 * 3072 == 62_560
    assert ma.prefill_coeff(a, 2, 1.0) == pytest.approx(62_560 / 1536 + 4)
    assert ma.prefill_coeff(a, 2, 100.0) == 100.0               # a wider MLP moment wins
    assert ma.prefill_coeff(_arch("Qwen/Qwen3-0.6B"), 2, 7.5) == 7.5   # uniform: unchanged
    moe = _arch("ibm-granite/granite-4.0-h-tiny")
    assert 6 * 2 * 4 * 1536 + 64 * 2 + 6 * 10 + 6 * 30 == 74_096
    assert ma.prefill_coeff(moe, 2, 1.0) == pytest.approx(74_096 / 1536 + 4)


def test_qk_norm_keeps_its_input_and_normed_tensor():
    """Qwen3-0.6B: q_norm / k_norm over 16 + 8 heads of 128 = 3072 elements per token, hidden
    1024; Qwen3RMSNorm keeps x.float() (4 B) and the normed tensor cast back to q's dtype (p = 2
    under bf16 autocast): 6 x 3072 / 1024 = 18. Gemma 3 1B (Gemma3RMSNorm: x.float() and the
    fp32 normed tensor, 8 B): 4 + 1 heads of 256 over hidden 1152: 8 x 1280 / 1152. A model
    without q / k norms: 0; every layer of a uniform model gets it, its scores unchanged."""
    qwen3 = _arch("Qwen/Qwen3-0.6B")
    assert ma.qk_norm_coeff(qwen3, MIXED) == pytest.approx(18.0)
    gemma = _arch("google/gemma-3-1b-pt")
    assert (gemma.heads, gemma.kv_heads, gemma.head_dim, gemma.hidden) == (4, 1, 256, 1152)
    assert ma.qk_norm_coeff(gemma, MIXED) == pytest.approx(8 * 1280 / 1152)
    assert ma.qk_norm_coeff(_arch("meta-llama/Llama-3.2-1B"), MIXED) == 0.0
    c, _ = layer_coeffs(qwen3, MIXED)
    assert ma.layer_adjust(qwen3, MIXED, c) == (pytest.approx(18.0), 1.0)


def test_olmoe_qk_norm_over_the_whole_projection():
    """OLMoE-1B-7B (hidden 2048, 16 heads and 16 key heads of 128): OlmoeRMSNorm over all of q
    (2048) and all of k (2048), Llama-style (4 + p = 6 B under bf16 autocast): 6 x 4096 / 2048
    = 12; its parameters count 2 x 2048 norm weights per layer more than per-head norms."""
    cfg = {"model_type": "olmoe", "hidden_size": 2048, "intermediate_size": 1024,
           "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 16,
           "num_experts": 64, "num_experts_per_tok": 8, "vocab_size": 50304}
    a = arch_from_config(cfg)
    assert ma.qk_norm_coeff(a, MIXED) == pytest.approx(12.0)
    per_head = arch_from_config(dict(cfg, model_type="qwen3_moe", moe_intermediate_size=1024))
    assert a.param_breakdown()["norms"] - per_head.param_breakdown()["norms"] == \
        16 * (4096 - 2 * 128)
