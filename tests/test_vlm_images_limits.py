"""Images per sample, the limits (issue 21 Build 4, second part): Qwen-VL's smart_resize with the
checkpoints' min / max pixels (catalog/qwen_resize.py), the sequence with its image tokens against the
model's positions (scenario/multimodal_keys.py check_context), and Llama 3.2 Vision's
cross-attention layers caching no text token (catalog/nested.py MultimodalArch). Each figure is
computed by hand in the test."""
import pytest

from vramplan.catalog import get_model
from vramplan.catalog.images import image_cost
from vramplan.catalog.qwen_resize import smart_resize
from vramplan.errors import ScenarioError
from vramplan.estimate import estimate
from vramplan.scenario import Scenario, form

QWEN25 = "Qwen/Qwen2.5-VL-7B-Instruct"
QWEN3 = "Qwen/Qwen3-VL-8B-Instruct"
MLLAMA = "meta-llama/Llama-3.2-11B-Vision"


def _cost(model, h, w):
    return image_cost(get_model(model).config, h, w)


def test_qwen25_vl_a_24_megapixel_photo_is_clamped_to_max_pixels():
    """6000 x 4000 (w x h), factor 28, max_pixels 12,845,056 (the checkpoint's
    preprocessor_config.json): rounded 143 x 214 multiples = 4004 x 5992 = 23,991,968 px is
    over the limit, so beta = sqrt(24,000,000 / 12,845,056) = 1.3669; 4000 / 1.3669 / 28 =
    104.5 -> 104, 6000 / 1.3669 / 28 = 156.8 -> 156: 104 x 156 = 16,224 decoder tokens
    (before: 143 x 214 = 30,602), the tower 4 x that = 64,896 patches of 14."""
    cost = _cost(QWEN25, 4000, 6000)
    assert (cost.decoder_tokens, cost.tower_tokens) == (104 * 156, 4 * 104 * 156) == \
        (16_224, 64_896)


def test_qwen25_vl_a_12_megapixel_photo_fits_max_pixels_unchanged():
    """4000 x 3000: round(3000 / 28) = 107, round(4000 / 28) = 143; 2996 x 4004 = 11,995,984
    px <= 12,845,056, no clamp: 107 x 143 = 15,301 tokens."""
    assert _cost(QWEN25, 3000, 4000).decoder_tokens == 107 * 143 == 15_301


def test_small_images_are_scaled_up_to_min_pixels():
    """Qwen2.5-VL 40 x 40: rounded 28 x 28 = 784 px < min_pixels 3136; beta = sqrt(3136 /
    1600) = 1.4, ceil(56 / 28) = 2 a side: 4 tokens (before 1). Qwen3-VL (patch 16 x merge 2 =
    32, min_pixels 65,536) 100 x 100: rounded 96 x 96 = 9216 px, beta = sqrt(65,536 / 10,000) =
    2.56, ceil(256 / 32) = 8 a side: 64 tokens (before 3 x 3 = 9), 256 patches of 16."""
    assert _cost(QWEN25, 40, 40).decoder_tokens == 2 * 2
    cost = _cost(QWEN3, 100, 100)
    assert (cost.decoder_tokens, cost.tower_tokens) == (8 * 8, 16 * 16)


def test_qwen3_vl_clamps_at_its_own_max_pixels():
    """Qwen3-VL 6000 x 4000: 4000 x 6016 (125 x 188 multiples of 32) = 24,064,000 px >
    16,777,216; beta = sqrt(24,000,000 / 16,777,216) = 1.19604; 4000 / 1.19604 / 32 = 104.5 ->
    104, 6000 / 1.19604 / 32 = 156.8 -> 156: 16,224 tokens (before 125 x 188 = 23,500)."""
    assert _cost(QWEN3, 4000, 6000).decoder_tokens == 104 * 156


@pytest.mark.parametrize("h, w", [(4000, 6000), (3000, 4000), (40, 40), (100, 100),
                                  (1080, 1920), (27, 5000), (448, 448), (9000, 9000)])
def test_smart_resize_is_the_processors(h, w):
    """Ours against transformers' own smart_resize (the installed release's source, the one
    function read out of image_processing_qwen2_vl.py: importing the module pulls in
    torchvision), both checkpoints' limits."""
    ref = _transformers_smart_resize()
    for factor, lo, hi in ((28, 3136, 12_845_056), (32, 65_536, 16_777_216)):
        assert smart_resize(h, w, factor, lo, hi) == ref(h, w, factor, lo, hi)


def _transformers_smart_resize():
    import ast
    import importlib.util
    import math
    from pathlib import Path
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("transformers is not installed")
    path = Path(spec.submodule_search_locations[0], "models", "qwen2_vl",
                "image_processing_qwen2_vl.py")
    tree = ast.parse(path.read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "smart_resize")
    scope = {"math": math}
    exec(compile(ast.Module([fn], []), str(path), "exec"), scope)
    return scope["smart_resize"]


def test_an_image_past_the_aspect_ratio_200_is_refused_by_name():
    """smart_resize raises past max / min = 200: 10 x 2010 is 201."""
    s = {"model": QWEN25, "task": "generate", "images": 1, "image_size": [10, 2010]}
    with pytest.raises(ScenarioError) as exc:
        Scenario.from_dict(s)
    assert exc.value.key == "image_size" and "200" in str(exc.value)


def test_images_past_the_positions_are_refused_with_the_numbers():
    """Qwen2.5-VL has 128,000 positions. generate: seq_len 100,000 + new_tokens 256 + 2 photos
    of 6000 x 4000 x 16,224 = 132,704 > 128,000: refused naming `seq_len`, which fits up to
    128,000 - 256 - 32,448 = 95,296 with them; one photo, 116,480, fits. Training at seq_len
    120,000 + 16,224 = 136,224 is refused too. 8 photos, 8 x 16,224 = 129,792 tokens, leave no
    room for any seq_len (512 + 129,792 = 130,304): refused naming `images`. Before, none was
    refused."""
    base = {"model": QWEN25, "gpu": "H100", "image_size": [4000, 6000]}
    with pytest.raises(ScenarioError) as exc:
        Scenario.from_dict({**base, "task": "generate", "seq_len": 100_000,
                            "new_tokens": 256, "images": 2})
    assert exc.value.key == "seq_len"
    assert all(x in str(exc.value) for x in ("100,000", "256", "16,224", "132,704", "128,000",
                                             "95,296"))
    Scenario.from_dict({**base, "task": "generate", "seq_len": 95_296, "new_tokens": 256,
                        "images": 2})
    Scenario.from_dict({**base, "task": "generate", "seq_len": 100_000, "new_tokens": 256,
                        "images": 1})
    bad = {**base, "task": "train", "seq_len": 120_000, "images": 1}
    with pytest.raises(ScenarioError) as exc:
        Scenario.from_dict(bad)
    assert exc.value.key == "seq_len" and "136,224" in str(exc.value)
    assert "seq_len" in form.check(bad)
    with pytest.raises(ScenarioError) as exc:
        Scenario.from_dict({**base, "task": "train", "seq_len": 512, "images": 8})
    assert exc.value.key == "images" and "130,304" in str(exc.value)   # 512 + 129,792


def test_the_longest_context_keeps_the_images():
    """generate's longest context searches seq_len by Scenario.replace; the images stay in the
    scenario, so it is at most 95,296 with 2 photos (above)."""
    s = Scenario.from_dict({"model": QWEN25, "gpu": "H200", "task": "generate", "images": 2,
                            "image_size": [4000, 6000]})
    assert s.replace(seq_len=1000).images == 2
    with pytest.raises(ScenarioError):
        s.replace(seq_len=95_297)
    e = estimate(s.to_dict())
    assert 0 < e.max_context <= 95_296 and e.scenario.images == 2


def test_llama_vision_images_take_no_text_positions():
    """Llama 3.2 Vision's image tokens are cross-attention memory: seq_len 130,000 + 256 new
    tokens with 4 images still fits its 131,072 positions."""
    Scenario.from_dict({"model": MLLAMA, "task": "generate", "seq_len": 130_000,
                        "new_tokens": 256, "images": 4})


def test_llama_vision_cross_layers_cache_no_text_token():
    """Llama 3.2 11B Vision: 40 layers, 8 of them cross-attention (text_config
    cross_attention_layers [3, 8, ..., 38]), 8 KV heads x 128. MllamaCrossAttentionDecoderLayer
    has no self-attention, so a text token's K and V are in the 32 others: 32 x 2 x 8 x 128 x 2 B
    = 131,072 B in bf16 (before 40 x ... = 163,840). generate 512 + 256 new tokens, batch 1:
    prefill 512 x 131,072 = 67,108,864 B; decode 767 tokens = 100,532,224 B; one image adds the
    8 layers' K / V over its 4 x 1601 tiles' tokens: 6404 x 8 x 2 x 8 x 128 x 2 =
    209,846,272 B."""
    arch = get_model(MLLAMA).arch
    assert (arch.layers, arch.cross_layers, arch.kv_heads, arch.head_dim) == (40, 8, 8, 128)
    assert arch.kv_bytes_per_token(2) == 32 * 2 * 8 * 128 * 2 == 131_072
    e = estimate({"model": MLLAMA, "task": "generate", "gpu": "H100"}, with_max_batch=False)
    assert (e.scenario.seq_len, e.scenario.new_tokens, e.scenario.batch_size) == (512, 256, 1)
    phases = e.footprint.phases
    assert phases["prefill"]["kv_cache"] == 512 * 131_072 == 67_108_864
    assert phases["decode"]["kv_cache"] == 767 * 131_072 == 100_532_224
    with_image = estimate({"model": MLLAMA, "task": "generate", "gpu": "H100", "images": 1},
                          with_max_batch=False)
    assert with_image.footprint.phases["decode"]["kv_cache"] == \
        100_532_224 + 6404 * 8 * 2 * 8 * 128 * 2
    assert e.bandwidth["kv_bytes_per_step"] == 640 * 131_072   # the average context 512 + 128


def test_text_only_models_keep_every_layers_cache():
    """Qwen2.5-VL has no cross-attention layers: 28 x 2 x 4 x 128 x 2 = 57,344 B a token."""
    arch = get_model(QWEN25).arch
    assert arch.cross_layers == 0 and arch.kv_bytes_per_token(2) == 57_344
