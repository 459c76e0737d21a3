"""Issue 21's catalog gaps (catalog/data/decoders_2025c.json): GLM-4.5 (355B) and OLMo-2 13B.
Each parameter count, as the package computes it from the config.json, equals the publisher's
figure within 2% (the tolerance of tests/test_catalog_2025.py), and by hand exactly."""
import json

import pytest

from vramplan.catalog import DATA_DIR, get_model
from vramplan.estimate import estimate

# model -> (published total, published active or None, where published)
PUBLISHED = {
    "zai-org/GLM-4.5": (355e9, 32e9, "model card / transformers docs glm4_moe.md: 355 billion "
                        "total parameters with 32 billion active"),
    "allenai/OLMo-2-1124-13B": (13.7e9, None, "Hub metadata: 13.7B params (model card: 13B); "
                                "the checkpoint's index: 54,864,793,600 bytes of float32"),
}
ENTRIES = json.loads((DATA_DIR / "decoders_2025c.json").read_text())["models"]


def test_every_entry_has_a_published_figure_and_says_where_its_config_came_from():
    assert sorted(m["id"] for m in ENTRIES) == sorted(PUBLISHED)
    for m in ENTRIES:
        assert m["source"].startswith("https://huggingface.co/" + m["id"] + "/blob/main/"
                                      "config.json (read from"), m["id"]
        assert "github.com/" in m["source"] and "@" in m["source"], m["id"]   # repo @ commit


@pytest.mark.parametrize("mid", sorted(PUBLISHED))
def test_param_count_equals_the_published_figure(mid):
    total, active, _where = PUBLISHED[mid]
    spec = get_model(mid)
    assert abs(spec.param_count() / total - 1) <= 0.02
    if active:   # GLM counts its activated parameters without the embeddings and the head
        a = spec.arch
        assert abs((a.active_param_count() - a.embedding_param_count()) / active - 1) <= 0.03


def test_glm_4_5_by_hand():
    """h 5120, 96 heads x 128, 8 KV heads; q/k/v biased, o not; q_norm / k_norm over head_dim
    (use_qk_norm); layers 0-2 dense SwiGLU of 12288; layers 3-91: 160 experts + 1 shared expert
    of 1536 and a router 160 x 5120 with its e_score_correction_bias (160); two RMSNorms a
    layer; untied 151552-token embeddings and head; a final norm. 352.8B: the published 355B
    also counts the MTP layer, which transformers does not build."""
    h, V = 5120, 151552
    attn = h * 12288 + 12288 + 2 * (h * 1024 + 1024) + 12288 * h
    moe = 161 * 3 * h * 1536 + 160 * h + 160
    total = 2 * V * h + 92 * (attn + 2 * h + 2 * 128) + 3 * 3 * h * 12288 + 89 * moe + h
    assert get_model("zai-org/GLM-4.5").param_count() == total == 352_797_829_024


def test_olmo2_13b_by_hand_equals_the_checkpoint_size():
    """Untied embeddings and head 2 x 100352 x 5120; per layer q/k/v/o 4 x 5120^2, SwiGLU
    3 x 5120 x 13824, two post-norms and q_norm / k_norm over the full width (4 x 5120); a
    final norm. The checkpoint's index holds 54,864,793,600 bytes of float32: / 4 the same."""
    h = 5120
    total = 2 * 100352 * h + 40 * (4 * h * h + 3 * h * 13824 + 4 * h) + h
    assert get_model("allenai/OLMo-2-1124-13B").param_count() == total == 54_864_793_600 // 4
    assert get_model("allenai/OLMo-2-1124-13B-Instruct").id == "allenai/OLMo-2-1124-13B"


def test_glm_4_5_serves_in_bf16_on_eight_h200():
    """352.8B x 2 bytes over TP8 is 88.2 GB a GPU, inside an H200's 141 GB."""
    e = estimate({"model": "zai-org/GLM-4.5", "task": "serve", "gpu": "H200",
                  "parallel": {"gpus": 8, "tensor": 8}}, with_max_batch=False)
    assert e.fits
    assert 87e9 < e.components["weights"] < 90e9


# ---- Whisper large-v3 (catalog/data/audio_2025c.json, catalog/whisper.py) ----------------------

WHISPER = "openai/whisper-large-v3"


def test_whisper_entry_says_where_its_config_came_from():
    (m,) = json.loads((DATA_DIR / "audio_2025c.json").read_text())["models"]
    assert m["id"] == WHISPER and m["family"] == "encoder-decoder"
    assert m["source"].startswith("https://huggingface.co/" + WHISPER + "/blob/main/config.json "
                                  "(read from") and "github.com/" in m["source"]


def test_whisper_large_v3_by_hand_equals_the_published_figure():
    """d 1280, ffn 5120, 32 + 32 layers, 128 mel bins, 1500 / 448 positions, vocab 51866:
    conv1 128 x 1280 x 3 + 1280, conv2 1280 x 1280 x 3 + 1280; attention q / v / out with bias
    and k without (4 d^2 + 3 d), once per encoder layer, twice (self + cross) per decoder layer;
    fc1 / fc2 with bias; LayerNorms 2 per encoder layer, 3 per decoder layer, one final each;
    position tables 1500 d + 448 d; token embeddings 51866 d, proj_out tied. Model card: 1.55B."""
    d, f = 1280, 5120
    attn, mlp, ln = 4 * d * d + 3 * d, 2 * d * f + f + d, 2 * d
    total = (51866 * d + (1500 + 448) * d + 96 * attn + 64 * mlp
             + (128 * d * 3 + d) + (d * d * 3 + d) + (32 * 2 + 1 + 32 * 3 + 1) * ln)
    spec = get_model(WHISPER)
    assert spec.param_count() == total == 1_543_490_560
    assert abs(total / 1.55e9 - 1) <= 0.02
    a = spec.arch
    assert (a.kind, a.layers, a.decoder_layers, a.activation) == ("encoder-decoder", 32, 32, "gelu")
    assert a.cross_kv_bytes_per_token(2) == 2 * 32 * 1280 * 2


def test_whisper_reads_one_30_second_window():
    """WhisperFeatureExtractor: 480000 samples = 3000 mel frames, conv2's stride 2 -> 1500
    encoder positions, whatever the task; training labels up to 448 decoder tokens. A
    generate's new tokens are the decoder's: 1500 + 256 is not refused, seq_len 3000 is."""
    from vramplan.errors import ScenarioError
    gen = estimate({"model": WHISPER, "task": "generate", "gpu": "RTX 4090"},
                   with_max_batch=False)
    assert gen.scenario.seq_len == 1500 and gen.scenario.new_tokens == 256 and gen.fits
    # the cross-attention K/V of 1500 encoder positions over 32 layers, bf16
    assert gen.components["kv_cache"] >= 1500 * 2 * 32 * 1280 * 2
    train = estimate({"model": WHISPER, "task": "lora", "gpu": "RTX 4090"},
                     with_max_batch=False)
    assert (train.scenario.seq_len, train.scenario.target_len) == (1500, 448)
    with pytest.raises(ScenarioError) as exc:
        estimate({"model": WHISPER, "task": "generate", "seq_len": 3000, "gpu": "H100"})
    assert exc.value.key == "seq_len" and "1,500 positions" in str(exc.value)


def test_whisper_configs_with_unequal_stacks_are_refused_by_name():
    from vramplan.catalog import spec_from_architecture
    from vramplan.errors import ScenarioError
    cfg = dict(get_model(WHISPER).config, decoder_ffn_dim=4096)
    with pytest.raises(ScenarioError) as exc:
        spec_from_architecture(cfg)
    assert exc.value.key == "architecture" and "decoder_ffn_dim" in str(exc.value)
