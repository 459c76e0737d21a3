"""Issue 21's catalog leftovers (catalog/data/decoders_2025b.json): DeepSeek-R1 as its own entry,
GLM-4.5-Air (the glm4_moe reader), an embedding model. Each parameter count, as the package
computes it from the config.json, equals the publisher's figure within 2%."""
import copy
import json

import pytest

from vramplan.catalog import DATA_DIR, get_model
from vramplan.catalog.hf_config import arch_from_config
from vramplan.estimate import estimate

# model -> (published total, published active or None, where published)
PUBLISHED = {
    "deepseek-ai/DeepSeek-R1": (671e9, 37e9, "model card: #Total Params 671B, #Activated "
                                "Params 37B"),
    "zai-org/GLM-4.5-Air": (106e9, 12e9, "model card / transformers docs glm4_moe.md: 106 "
                            "billion total parameters and 12 billion active"),
    "Qwen/Qwen3-Embedding-0.6B": (0.6e9, None, "model card: Number of Parameters 0.6B"),
}
ENTRIES = json.loads((DATA_DIR / "decoders_2025b.json").read_text())["models"]


def test_every_entry_has_a_published_figure_and_says_where_its_config_came_from():
    assert sorted(m["id"] for m in ENTRIES) == sorted(PUBLISHED)
    for m in ENTRIES:
        assert m["source"].startswith("https://huggingface.co/" + m["id"] + "/blob/main/"
                                      "config.json (read from"), m["id"]
        assert "github.com" in m["source"] or "GitHub" in m["source"], m["id"]


@pytest.mark.parametrize("mid", sorted(PUBLISHED))
def test_param_count_equals_the_published_figure(mid):
    total, active, _where = PUBLISHED[mid]
    spec = get_model(mid)
    assert abs(spec.param_count() / total - 1) <= 0.02
    if active:   # activated counts leave out the embeddings and the head (GLM-4.5-Air:
        # 13.42B with them, 12.18B without); DeepSeek counts its 0.93B input embedding in
        a = spec.arch
        n = a.active_param_count() - (a.embedding_param_count() if mid.startswith("zai")
                                      else 0)
        assert abs(n / active - 1) <= 0.03


def test_glm_4_5_air_by_hand():
    """h 4096, 96 heads x 128, 8 KV heads; q/k/v biased, o not (Glm4MoeAttention); layer 0 a
    dense SwiGLU of 10944; layers 1-45: 128 experts + 1 shared expert of 1408, a router 128 x
    4096 with its e_score_correction_bias (128); two RMSNorms a layer; untied 151552-token
    embeddings and head; a final norm."""
    h, V = 4096, 151552
    attn = h * 12288 + 12288 + 2 * (h * 1024 + 1024) + 12288 * h
    moe = 129 * 3 * h * 1408 + 128 * h + 128
    total = 2 * V * h + 46 * (attn + 2 * h) + 3 * h * 10944 + 45 * moe + h
    assert get_model("zai-org/GLM-4.5-Air").param_count() == total == 106_852_251_264


def test_glm4_moe_qk_norm_adds_two_head_norms_a_layer():
    cfg = copy.deepcopy(get_model("zai-org/GLM-4.5-Air").config)
    base = arch_from_config(cfg).param_count()
    cfg["use_qk_norm"] = True   # GLM-4.5 (355B) has it: q_norm and k_norm over head_dim 128
    assert arch_from_config(cfg).param_count() - base == 46 * 2 * 128


def test_deepseek_r1_is_its_own_entry_and_ships_fp8():
    """R1 is no longer an alias of V3: its config.json carries quantization_config (FP8 e4m3,
    128 x 128 fp32 scales), its default precision. On 8 x H200 (TP8) it serves: 671B at one
    byte plus scales and the 16-bit embeddings and head is about 673 GB, 84 GB a GPU."""
    spec = get_model("deepseek-ai/DeepSeek-R1")
    assert spec.id == "deepseek-ai/DeepSeek-R1" != get_model("deepseek-ai/DeepSeek-V3").id
    assert spec.arch.weight_format.precision == "fp8"
    e = estimate({"model": spec.id, "task": "serve", "gpu": "H200",
                  "parallel": {"gpus": 8, "tensor": 8}}, with_max_batch=False)
    assert e.scenario.precision == "fp8" and e.fits
    assert 660e9 < e.components["weights"] * 8 < 690e9


def test_qwen3_embedding_by_hand_and_a_forward_pass_fits_a_small_gpu():
    """Qwen3-0.6B's shapes with a 151669-token vocabulary, tied: embeddings 151669 x 1024, per
    layer q 1024x2048, k and v 1024x1024, o 2048x1024, MLP 3 x 1024 x 3072, two norms and the
    q/k norms (2 x 128); a final norm."""
    per_layer = (1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024 + 3 * 1024 * 3072 + 2 * 1024
                 + 2 * 128)
    assert get_model("Qwen/Qwen3-Embedding-0.6B").param_count() == \
        151669 * 1024 + 28 * per_layer + 1024 == 595_776_512
    e = estimate({"model": "Qwen/Qwen3-Embedding-0.6B", "task": "forward", "batch_size": 32,
                  "seq_len": 512, "gpu": "RTX 4090"}, with_max_batch=False)
    assert e.fits


def test_deepseek_r1_mtp_speculation_counts_the_mtp_layer():
    """serve with speculative mtp: k defaults to num_nextn_predict_layers (1); the MTP layer's
    weights come in FP8 like the model's (about 11.7B parameters at ~1 byte over 8 GPUs)."""
    e = estimate({"model": "deepseek-ai/DeepSeek-R1", "task": "serve", "gpu": "H200",
                  "parallel": {"gpus": 8, "tensor": 8}, "speculative": {"method": "mtp"}},
                 with_max_batch=False)
    assert e.bandwidth["speculative_tokens"] == 1
    assert 11.5e9 < e.bandwidth["draft_weight_bytes"] * 8 < 12.0e9
