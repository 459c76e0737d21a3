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
