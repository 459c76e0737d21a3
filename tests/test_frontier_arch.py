"""Frontier architectures (issue 21.1, 21.2): shipped weight formats from `quantization_config`,
per-layer attention kinds and their caches, the frontier catalog's parameter counts.

Hand computations are written beside each assertion."""
from __future__ import annotations

import json

import pytest

from vramplan.catalog import DATA_DIR, get_model, spec_from_architecture
from vramplan.catalog.weight_formats import weight_format
from vramplan.errors import ScenarioError
from vramplan.estimate import estimate
from vramplan.scenario import Scenario
from vramplan.workloads.transformer import layer_types

GiB = 2**30
FRONTIER = json.loads((DATA_DIR / "frontier.json").read_text(encoding="utf-8"))["models"]


# ---- the catalog --------------------------------------------------------------------------

@pytest.mark.parametrize("entry", FRONTIER, ids=lambda e: e["id"])
def test_param_count_matches_the_published_figure(entry):
    """Every frontier model within 2% of the count its authors publish (published_source)."""
    n = get_model(entry["id"]).arch.param_count()
    assert abs(n / entry["published_params"] - 1) <= 0.02, (n, entry["published_params"])


def test_gpt_oss_20b_counts_by_hand():
    """gpt-oss-20b (GptOssForCausalLM, 24 layers, hidden 2880, 64 q / 8 kv heads of 64):
    attention q 2880x4096 + k, v 2880x512 each + o 4096x2880, biases 4096 + 2x512 + 2880,
    sinks 64 -> 2 x 11,796,480 + 2 x 1,474,560 + 8,000 + 64 = 26,550,144 per layer;
    experts 32 x (2880 x 5760 + 5760 + 2880 x 2880 + 2880) = 796,538,880; router 32 x 2880 + 32;
    norms 2 x 2880; embeddings and lm_head 201088 x 2880 each; final norm 2880."""
    a = get_model("openai/gpt-oss-20b").arch
    per_layer = 26_550_144 + 796_538_880 + (32 * 2880 + 32) + 2 * 2880
    assert a.param_count() == 24 * per_layer + 2 * 201_088 * 2880 + 2880 == 20_914_757_184


# ---- weight formats -----------------------------------------------------------------------

def test_mxfp4_is_4_25_bits_and_keeps_gpt_oss_attention_in_bf16():
    wf = get_model("openai/gpt-oss-20b").arch.weight_format
    assert wf.precision == "mxfp4" and wf.bytes_per_param() == 0.5 + 1 / 32   # 4.25 bits
    assert {"attention", "router", "embeddings", "lm_head"} <= wf.kept
    assert "experts" not in wf.kept


@pytest.mark.parametrize("qc, precision, bpp", [
    # NVFP4: 4 bits + one fp8 scale per 16 -> 0.5 + 1/16
    ({"quant_method": "modelopt", "quantization": {"quant_algo": "NVFP4", "group_size": 16}},
     "nvfp4", 0.5625),
    # FP8 block-scaled 128 x 128 with fp32 scales: 1 + 4 / 16384
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8", 1 + 4 / 16384),
    # FP8 per tensor: 1 B
    ({"quant_method": "fp8"}, "fp8", 1.0),
    # GPTQ int4, group 128: 0.5 + (2 B fp16 scale + 0.5 B packed zero) / 128
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "int4", 0.5 + 2.5 / 128),
    # AWQ int4, group 64
    ({"quant_method": "awq", "bits": 4, "group_size": 64}, "int4", 0.5 + 2.5 / 64),
    # bitsandbytes nf4 without double quant: fp32 absmax per 64
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
     "nf4", 0.5 + 4 / 64),
    # with double quant: int8 absmax per 64 + fp32 per 256 absmax
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
      "bnb_4bit_use_double_quant": True}, "nf4", 0.5 + 1 / 64 + 4 / (64 * 256)),
    # LLM.int8: one fp32 row scale per 4096 inputs
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "int8", 1 + 4 / 4096),
])
def test_quantization_config_formats(qc, precision, bpp):
    wf = weight_format(qc)
    assert wf.precision == precision
    assert wf.bytes_per_param(4096) == pytest.approx(bpp)


def test_bad_quantization_config_names_the_key():
    with pytest.raises(ScenarioError, match="quantization_config.quant_method"):
        weight_format({"quant_method": "hqq-ultra"})
    with pytest.raises(ScenarioError, match="quantization_config.weight_block_size"):
        weight_format({"quant_method": "fp8", "weight_block_size": [128]})


def _est(model, gpu, **kw):
    sc = Scenario.from_dict({"model": model, "gpu": gpu, **kw})
    return sc, estimate(sc).to_dict()


def test_gpt_oss_20b_as_shipped_fits_16_gb_at_4k():
    """Issue 21 done-when: 12-14 GiB of weights (the card: runs within 16 GB)."""
    sc, e = _est("openai/gpt-oss-20b", "nvidia-rtx-5060-ti-16gb", task="generate", seq_len=4096)
    assert sc.precision == "mxfp4"                       # shipped format is the default
    w = e["per_gpu"]["components"]["weights"] / GiB
    assert 12 <= w <= 14, w
    assert e["fits"] is True
    assert any("weights as shipped: MXFP4" in n for n in e["notes"])


def test_gpt_oss_20b_bf16_is_a_stated_conversion():
    sc, e = _est("openai/gpt-oss-20b", "nvidia-rtx-5060-ti-16gb", task="generate",
                 precision="bf16")
    assert e["per_gpu"]["components"]["weights"] / GiB > 38     # 20.9e9 x 2 B
    assert any("is a conversion" in n for n in e["notes"])


def test_gpt_oss_120b_fits_one_h100():
    _, e = _est("openai/gpt-oss-120b", "nvidia-h100-sxm5-80gb", task="generate", seq_len=4096)
    assert e["fits"] is True


# ---- per-layer caches ---------------------------------------------------------------------

def _growth(model, kv_b=2):
    """Cache bytes one more token adds once past every window."""
    a = get_model(model).arch
    fn = layer_types.cache_fn(a, kv_b)
    big = 10 * max(a.window, 1)
    return fn(big + 1) - fn(big), fn


def test_gpt_oss_kv_grows_on_the_12_full_layers_only():
    """12 full layers x 2 (K, V) x 8 kv heads x 64 x 2 B = 24,576 B/token; the 12 sliding
    layers hold 128 tokens each: 12 x 128 x 2,048 B = 3,145,728 B."""
    g, fn = _growth("openai/gpt-oss-20b")
    assert g == 12 * 2 * 8 * 64 * 2 == 24_576
    assert fn(4096) == 4096 * 24_576 + 12 * 128 * 2048


def test_gemma3_27b_kv_grows_on_one_layer_in_six():
    """62 layers, full where (i + 1) % 6 == 0: 10 full, 52 sliding (window 1024);
    per layer 2 x 16 kv heads x 128 x 2 B = 8,192 B/token -> 81,920 B/token growth."""
    g, fn = _growth("google/gemma-3-27b-pt")
    assert g == 10 * 8192 == 81_920
    t = 131_072
    assert fn(t) == 10 * 8192 * t + 52 * 8192 * 1024
    # about 6x less than counting every layer at every token (the figure)
    assert 62 * 8192 * t / fn(t) > 5.5


def test_qwen3_next_kv_grows_on_12_full_layers_and_keeps_a_constant_state():
    """12 full layers x 2 x 2 kv heads x 256 x 2 B = 24,576 B/token. 36 Gated DeltaNet layers:
    conv (2 x 16 x 128 + 32 x 128) x 4 = 32,768 values in bf16, recurrent 32 x 128 x 128 =
    524,288 values in fp32 -> 36 x (65,536 + 2,097,152) = 77,856,768 B per sequence."""
    g, fn = _growth("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert g == 24_576
    assert fn(1000) == 1000 * 24_576 + 77_856_768


def test_granite_h_mamba_state_is_constant():
    """4 attention layers x 2 x 4 kv x 128 x 2 B = 8,192 B/token; 36 Mamba2 layers: conv
    (3072 + 2 x 128) x 4 = 13,312 values in bf16 and SSM 48 x 64 x 128 = 393,216 values in
    fp32 (transformers 5.23 keeps mamba_ssm's float32 final state: layer_types.py); vLLM keeps
    both in bf16."""
    g, fn = _growth("ibm-granite/granite-4.0-h-tiny")
    assert g == 8192
    assert fn(0) == 36 * (13_312 * 2 + 393_216 * 4)
    a = get_model("ibm-granite/granite-4.0-h-tiny").arch
    assert layer_types.state_bytes(a, 2, "vllm") == 36 * (13_312 + 393_216) * 2


def test_llama4_chunked_layers_keep_8192_tokens():
    """48 layers, every 4th NoPE/full: 12 full, 36 chunked (8192)."""
    a = get_model("meta-llama/Llama-4-Scout-17B-16E").arch
    assert a.layer_kinds.count("full") == 12 and a.window == 8192
    per = 2 * 8 * 128 * 2
    assert layer_types.cache_fn(a, 2)(100_000) == 12 * per * 100_000 + 36 * per * 8192


def test_uniform_models_keep_the_old_formula():
    a = get_model("meta-llama/Llama-2-7b-hf").arch
    assert layer_types.cache_fn(a, 2)(1234) == 1234 * a.kv_bytes_per_token(2)


def test_generate_estimate_uses_the_per_layer_cache():
    """gpt-oss-20b, batch 1, 4096-token prompt: prefill KV = cache(4096)."""
    _, e = _est("openai/gpt-oss-20b", "nvidia-h100-sxm5-80gb", task="generate", seq_len=4096,
                new_tokens=1)
    assert e["per_gpu"]["components"]["kv_cache"] == 4096 * 24_576 + 12 * 128 * 2048


def test_layer_types_are_validated():
    cfg = {"model_type": "gpt_oss", "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64,
           "vocab_size": 100, "sliding_window": 8, "layer_types": ["sliding_attention"]}
    with pytest.raises(ScenarioError, match="layer_types"):
        spec_from_architecture(cfg).arch
    cfg["layer_types"] = ["sliding_attention", "ring_attention"]
    with pytest.raises(ScenarioError, match="ring_attention"):
        spec_from_architecture(cfg).arch


def test_nemotron_h_blocks_by_hand():
    """Nemotron-H-8B: 24 Mamba2 blocks (in_proj 4096 x (8192 + 10240 + 128), conv 10240 x 4
    + bias 10240, dt_bias / A_log / D 3 x 128, gated norm 8192, out_proj 8192 x 4096),
    4 attention blocks (4096 x (4096 + 2 x 1024) + 4096 x 4096), 24 MLP-only blocks
    (relu2: 2 x 4096 x 21504), one norm per block + the final one, untied 131072 x 4096
    embeddings and head. Cache: 4 x 2 x 8 x 128 x 2 B = 16,384 B/token; state 24 x
    ((8192 + 2 x 8 x 128) x 4 x 2 B + 128 x 64 x 128 x 4 B) = 102,629,376 B (the SSM state in
    fp32 under transformers 5.23; vLLM: both in bf16, 52,297,728 B)."""
    a = get_model("nvidia/Nemotron-H-8B-Base-8K").arch
    mamba = 4096 * 18560 + 10240 * 4 + 10240 + 3 * 128 + 8192 + 8192 * 4096
    attn = 4096 * 6144 + 4096 * 4096
    mlp = 2 * 4096 * 21504
    assert a.param_count() == (24 * mamba + 4 * attn + 24 * mlp + 53 * 4096
                               + 2 * 131072 * 4096) == 8_100_852_736
    g, fn = _growth("nvidia/Nemotron-H-8B-Base-8K")
    assert g == 16_384 and fn(0) == 102_629_376
    assert layer_types.state_bytes(a, 2, "vllm") == 52_297_728


def test_decode_copies_one_full_layer_of_a_hybrid():
    """DynamicCache's torch.cat copies one layer at a time: for gpt-oss-20b that is a full
    layer, 2 x 8 x 64 x 2 B = 2,048 B per token; 1 sequence at 4096 + 16 - 1 tokens."""
    _, e = _est("openai/gpt-oss-20b", "nvidia-h100-sxm5-80gb", task="generate", seq_len=4096,
                new_tokens=16)
    assert e["phases"]["decode"]["temporary"] == (4096 + 15) * 2048
