"""Images per sample of a vision-language model (issue 21 Build 4): the scenario keys `images`
and `image_size` (scenario/multimodal_keys.py), the image rules (catalog/images.py) and their
memory (workloads/transformer/vision_inputs.py), each checked by hand."""
import pytest

from vramplan.catalog import get_model
from vramplan.catalog.images import image_cost
from vramplan.errors import ScenarioError
from vramplan.estimate import estimate
from vramplan.scenario import Scenario, form

QWEN = "Qwen/Qwen2.5-VL-7B-Instruct"
MLLAMA = "meta-llama/Llama-3.2-11B-Vision"
# Qwen2.5-7B's decoder: 28 layers x 2 (K, V) x 4 KV heads x 128 x 2 bytes (bf16) a token
QWEN_KV_PER_TOKEN = 28 * 2 * 4 * 128 * 2


def _est(**kw):
    return estimate({"gpu": "H100", **kw}, with_max_batch=False)


def test_qwen25_vl_one_448_image_is_256_decoder_tokens_by_hand():
    """smart_resize keeps 448 x 448 (a multiple of 28); 14-pixel patches: 32 x 32 = 1024 for
    the tower, the 2 x 2 PatchMerger: (32 x 32) / 4 = 256 decoder tokens."""
    cost = image_cost(get_model(QWEN).config, 448, 448)
    assert (cost.decoder_tokens, cost.tower_tokens, cost.cross_tokens) == (256, 1024, 0)
    assert image_cost(get_model(QWEN).config, 1024, 768).decoder_tokens == \
        round(1024 / 28) * round(768 / 28) == 37 * 27


def test_qwen25_vl_image_tokens_enter_the_kv_cache_and_the_sequence():
    """generate at 512 text tokens + 1 image: the KV cache grows by 256 tokens' K and V; a
    forward pass holds what it holds at seq_len 512 + 256 (the tower's one block over 1024
    patches, 20 bytes a patch per hidden unit, is narrower than the decoder's widest block)."""
    plain = _est(model=QWEN, task="generate")
    with_image = _est(model=QWEN, task="generate", images=1, image_size=[448, 448])
    assert with_image.components["kv_cache"] - plain.components["kv_cache"] == \
        256 * QWEN_KV_PER_TOKEN == 14_680_064
    fwd = _est(model=QWEN, task="forward", seq_len=512, images=1, image_size="448x448")
    longer = _est(model=QWEN, task="forward", seq_len=768)
    assert fwd.components["activations"] == longer.components["activations"]
    assert any("256 image tokens in each sequence" in n for n in fwd.notes)


def test_full_training_saves_the_towers_activations():
    """Two 448 x 448 images: 512 decoder tokens more, and the tower's 32 blocks saved over
    2 x 1024 patches: its activations are what the same block walk as the decoder's gives for
    a block of width 1280, MLP 3420 (gated), RMSNorm, per patch, times 32 blocks."""
    from vramplan.workloads.transformer.activations import Kernels, layer_coeffs
    from vramplan.workloads.transformer.vision_inputs import ImagePlan, _tower_arch
    e = _est(model=QWEN, task="train", images=2, image_size=[448, 448])
    ref = _est(model=QWEN, task="train", seq_len=2048 + 512)
    tower = _tower_arch(ImagePlan(2, image_cost(get_model(QWEN).config, 448, 448), 0))
    assert (tower.hidden, tower.ffn, tower.layers, tower.gated_mlp) == (1280, 3420, 32, True)
    per_patch = layer_coeffs(tower, Kernels(p=2, mixed=True, attention="sdpa", dropout=False,
                                            compile=False))[0]
    for phase in ("forward", "backward"):
        got = (e.footprint.phases[phase]["activations"]
               - ref.footprint.phases[phase]["activations"])
        assert got == int(per_patch * 2 * 1024 * 1280 * 32) > 4e9


def test_llama_32_vision_images_are_cross_attention_memory():
    """4 tiles of 560 x 560, 40 x 40 patches + a class token = 1601 a tile: 6404 tokens of
    memory an image, none in the text; 8 cross-attention layers cache their K and V:
    6404 x 8 x 2 x 8 KV heads x 128 x 2 bytes. The tower runs 4 x 1608 (padded to 8)."""
    cost = image_cost(get_model(MLLAMA).config, None, None)
    assert (cost.decoder_tokens, cost.cross_tokens, cost.tower_tokens) == (0, 6404, 6432)
    plain = _est(model=MLLAMA, task="generate")
    e = _est(model=MLLAMA, task="generate", images=1)
    assert e.components["kv_cache"] - plain.components["kv_cache"] == \
        6404 * 8 * 2 * 8 * 128 * 2 == 209_846_272
    assert e.scenario.seq_len == plain.scenario.seq_len


def test_mistral_small_and_gemma3_token_rules():
    """Pixtral at 448 x 448: patch 14, 2 x 2 merge: 16 x 16 tokens + 16 [IMG_BREAK];
    Gemma 3: 256 whatever the image, its SigLIP tower over 64 x 64 patches at 896."""
    mistral = get_model("mistralai/Mistral-Small-3.2-24B-Instruct-2506").config
    assert image_cost(mistral, 448, 448).decoder_tokens == 16 * 16 + 16
    gemma = {"model_type": "gemma3", "mm_tokens_per_image": 256,
             "text_config": {"model_type": "gemma3_text"},
             "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152,
                               "num_hidden_layers": 27, "num_attention_heads": 16,
                               "intermediate_size": 4304, "patch_size": 14, "image_size": 896}}
    cost = image_cost(gemma, None, None)
    assert (cost.decoder_tokens, cost.tower_tokens) == (256, 64 * 64)


@pytest.mark.parametrize("scenario, key, words", [
    ({"model": "Qwen/Qwen2.5-7B", "task": "generate", "images": 1}, "images", "no vision"),
    ({"model": QWEN, "task": "generate", "images": 1}, "image_size", "give image_size"),
    ({"model": MLLAMA, "task": "generate", "images": 1, "image_size": [560, 560]},
     "image_size", "resizes every image"),
    ({"model": QWEN, "task": "generate", "image_size": [448, 448]}, "image_size",
     "give images"),
    ({"model": QWEN, "task": "serve", "images": 1}, "images", "applies to"),
    ({"model": QWEN, "task": "generate", "images": 65, "image_size": [448, 448]}, "images",
     "64"),
    ({"model": QWEN, "task": "generate", "images": 1, "image_size": [448, 448, 3]},
     "image_size", "[height, width]"),
])
def test_bad_image_keys_are_refused_by_name(scenario, key, words):
    with pytest.raises(ScenarioError) as exc:
        Scenario.from_dict(scenario)
    assert exc.value.key == key or key in str(exc.value)
    assert words in str(exc.value)
    assert key in form.check(scenario)


def test_the_form_shows_the_image_fields_for_vlms_only():
    def keys(model):
        return [f.key for f in form.fields({"model": model, "task": "generate"})]
    assert {"images", "image_size"} <= set(keys(QWEN))
    assert not {"images", "image_size"} & set(keys("Qwen/Qwen2.5-7B"))


def test_image_keys_travel_in_a_link():
    s = Scenario.from_dict({"model": QWEN, "task": "generate", "images": 2,
                            "image_size": [448, 672], "gpu": "H100"})
    back = Scenario.from_query(s.to_query())
    assert (back.images, back.image_size) == (2, (448, 672))
    assert back.to_dict() == s.to_dict()
