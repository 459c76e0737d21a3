"""The 2025 video / image diffusion pipelines (catalog/data/diffusion_2025.json: Wan 2.1 / 2.2,
FLUX.1 Kontext, Qwen-Image) and vision backbones (catalog/data/vision_2025.json).

Parameter counts come from the published config.json through the package's counters
(catalog/pipeline_video.py, the vision graph walk); each is compared with the figure its
publisher gives. Published figures are names rounded to two digits ("14B", "20B"); where the
count is further than 2% from the name, the test says so and checks the count by hand instead.
"""
import copy

import pytest

from vramplan.catalog import get_model, spec_from_architecture
from vramplan.catalog.pipeline import _Cfg, pipeline_config
from vramplan.catalog import pipeline_video as V
from vramplan.errors import ScenarioError
from vramplan.estimate import estimate
from vramplan.workloads.diffusion.footprint import image_tokens
from vramplan.workloads.diffusion.parts import dit_step

H100 = "nvidia-h100-sxm5-80gb"

# (component, published parameters, where published, tolerance)
DIFFUSION_PUBLISHED = {
    "black-forest-labs/FLUX.1-Kontext-dev": (
        "transformer", 12e9, "model card: a 12 billion parameter rectified flow transformer", 0.02),
    # the Wan-VAE is published exactly enough: 127M (Wan paper, arXiv:2503.20314)
    "Wan-AI/Wan2.1-T2V-14B-Diffusers": ("vae", 127e6, "Wan paper: Wan-VAE 127M parameters", 0.02),
    # names rounded to two digits: 14.29B is 2.06% above "14B", 20.43B 2.15% above "20B";
    # both within the names' own rounding (half a unit of the last digit: 3.6% and 2.5%)
    "Wan-AI/Wan2.2-T2V-A14B-Diffusers": (
        "transformer", 14e9, "model card: A14B, 14B active per step (one expert)", 0.5 / 14),
    "Qwen/Qwen-Image": ("transformer", 20e9, "model card: a 20B MMDiT", 0.5 / 20),
    "hunyuanvideo-community/HunyuanVideo": (
        "transformer", 13e9, "model card: a 13B-parameter video generation model", 0.02),
    # the card names it 2B; the diffusers layout counts 1.923B (3.8% below the name)
    "Lightricks/LTX-Video": ("transformer", 2e9, "model card: ltxv-2b", 0.04),
    "Wan-AI/Wan2.2-TI2V-5B-Diffusers": ("transformer", 5e9, "model card: TI2V-5B", 0.02),
}


def test_wan22_ti2v_tokens_with_the_16x_vae():
    """The Wan2.2-VAE compresses 16 x 16 x 4 (its 2 x 2 patches x 8): 81 frames at 480 x 832
    -> latent 21 x 30 x 52, transformer patches 1 x 2 x 2 -> 21 x 15 x 26 = 8,190 tokens."""
    cfg = get_model("wan2.2-ti2v-5b").config
    assert cfg["components"]["vae"]["downsample"] == 16
    assert image_tokens(cfg, cfg["components"]["transformer"], 480 // 16, 832 // 16, 21) == 8_190


def test_ltx_vae_against_its_published_file():
    """A public loader pins Lightricks/LTX-Video's vae/diffusion_pytorch_model.safetensors at
    1,676,798,532 bytes (fp32): the 419,193,649 weights
    counted here, the 2 x 128 latents_mean / std buffers and a 22,912-byte JSON header (the
    tensor names, shapes and offsets)."""
    vae = get_model("ltx-video").config["components"]["vae"]
    assert vae["params"] == 419_193_649
    assert 1_676_798_532 - 4 * (vae["params"] + 256) == 22_912


def test_ltx_token_count_by_hand():
    """161 frames at 512 x 704: latent (161 - 1) / 8 + 1 = 21 frames of 16 x 22 (spatial 32),
    patch 1 -> 7,392 tokens."""
    cfg = get_model("ltx-video").config
    assert image_tokens(cfg, cfg["components"]["transformer"], 16, 22, 21) == 7_392


@pytest.mark.parametrize("mid", sorted(DIFFUSION_PUBLISHED))
def test_component_against_the_published_figure(mid):
    comp, published, _where, tol = DIFFUSION_PUBLISHED[mid]
    spec = get_model(mid)
    assert spec.source.startswith("https://huggingface.co/" + mid)
    assert abs(spec.config["components"][comp]["params"] / published - 1) <= tol


def test_wan_1_3b_transformer_by_hand():
    """D = 12 x 128 = 1536, ffn 8960, 30 blocks. The model card calls it 1.3B; the diffusers
    layout counts 1.419B (9% above the name), the figure the weights take."""
    d, f, L = 1536, 8960, 30
    lin = lambda i, o: i * o + o  # noqa: E731
    embed = 16 * 4 * d + d + lin(256, d) + lin(d, d) + lin(d, 6 * d) + lin(4096, d) + lin(d, d)
    block = 2 * (4 * lin(d, d) + 2 * d) + 2 * d + lin(d, f) + lin(f, d) + 6 * d
    total = embed + L * block + lin(d, 16 * 4) + 2 * d
    assert total == 1_418_996_800
    tr = get_model("wan2.1-t2v-1.3b").config["components"]["transformer"]
    assert tr["params"] == total
    assert V.wan_transformer(_Cfg("t", tr["diffusers_config"]))["params"] == total


def test_wan_vae_by_hand_level_sums():
    """AutoencoderKLWan defaults: the encoder 53,595,872, the decoder 73,295,331, the quant
    convs 32 x 32 + 32 + 16 x 16 + 16 = 1,328; 126,892,531 in all (Wan paper: 127M)."""
    vae = get_model("Qwen/Qwen-Image").config["components"]["vae"]
    assert vae["params"] == 53_595_872 + 73_295_331 + 1_328 == 126_892_531


def test_umt5_xxl_encoder_by_hand():
    """vocab 256384 x 4096 + 24 x (4 x 4096^2 + 3 x 4096 x 10240 + 2 x 4096 + 32 x 64) + 4096."""
    te = get_model("wan2.1-t2v-14b").config["components"]["text_encoder"]
    assert te["params"] == 256384 * 4096 + 24 * (4 * 4096 ** 2 + 3 * 4096 * 10240 + 2 * 4096
                                                 + 32 * 64) + 4096 == 5_680_910_336


def test_wan_token_count_by_hand():
    """81 frames at 480 x 832: latent (81 - 1) / 4 + 1 = 21 frames of 60 x 104, patches
    1 x 2 x 2 -> 21 x 30 x 52 = 32,760 tokens."""
    cfg = get_model("wan2.1-t2v-14b").config
    assert image_tokens(cfg, cfg["components"]["transformer"], 60, 104, 21) == 32_760


def test_kontext_adds_the_reference_image_tokens():
    """1024 x 1024: 64 x 64 packed latents = 4,096 tokens, twice with the reference image."""
    kontext = get_model("flux.1-kontext-dev").config
    dev = get_model("black-forest-labs/FLUX.1-dev").config
    assert image_tokens(dev, dev["components"]["transformer"], 128, 128, 1) == 4096
    assert image_tokens(kontext, kontext["components"]["transformer"], 128, 128, 1) == 8192
    a = estimate({"model": "flux.1-kontext-dev", "task": "forward"}, H100)
    b = estimate({"model": "black-forest-labs/FLUX.1-dev", "task": "forward"}, H100)
    den = dev["components"]["transformer"]       # the same step walk over 4,096 more tokens
    more = dit_step(den, 1, 8192, 512, 2, False)[0] - dit_step(den, 1, 4096, 512, 2, False)[0]
    assert a.components["activations"] - b.components["activations"] == more


def test_wan_cfg_runs_two_calls_not_a_doubled_batch():
    """WanPipeline calls the transformer for the prompt, then for the negative prompt: the
    step's activations are one call's, its FLOPs two calls'."""
    on = estimate({"model": "wan2.1-t2v-1.3b", "task": "forward", "guidance": True}, H100)
    off = estimate({"model": "wan2.1-t2v-1.3b", "task": "forward", "guidance": False}, H100)
    assert on.components["activations"] == off.components["activations"]
    assert on.bandwidth["flops_per_step"] == 2 * off.bandwidth["flops_per_step"]


def test_wan_22_holds_both_experts_and_the_vae_loads_in_fp32():
    """bf16 umT5 and transformer(s), the VAE in fp32 (diffusers' WanPipeline example)."""
    a14 = estimate({"model": "wan2.2-t2v-a14b", "task": "load"}, H100).components["weights"]
    w14 = estimate({"model": "wan2.1-t2v-14b", "task": "load"}, H100).components["weights"]
    assert a14 - w14 == 2 * 14_288_491_584
    assert w14 == 2 * (5_680_910_336 + 14_288_491_584) + 4 * 126_892_531
    nf4 = estimate({"model": "wan2.1-t2v-14b", "task": "load", "precision": "nf4"}, H100)
    assert "vae=bf16" in " ".join(nf4.notes)      # a quantised global keeps the VAE in bf16


@pytest.mark.parametrize("mid", ["Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
                                 "Wan-AI/Wan2.1-T2V-14B-Diffusers",
                                 "Wan-AI/Wan2.2-T2V-A14B-Diffusers",
                                 "black-forest-labs/FLUX.1-Kontext-dev", "Qwen/Qwen-Image",
                                 "hunyuanvideo-community/HunyuanVideo", "Lightricks/LTX-Video",
                                 "Wan-AI/Wan2.2-TI2V-5B-Diffusers"])
def test_estimates_on_an_h100_for_the_default_task(mid):
    e = estimate({"model": mid}, H100)
    assert e.peak_allocated_bytes > e.components["weights"] > 0


def test_hunyuan_video_tokens_and_the_vae_attention_mask():
    """129 frames at 720 x 1280: latent 33 x 90 x 160, patches 1 x 2 x 2 -> 33 x 45 x 80 =
    118,800 tokens. Framewise decoding runs 5 latent frames at a time; without spatial tiling
    the mid block's causal mask spans S = 5 x 90 x 160 = 72,000 tokens and its construction
    holds 14 bytes per S^2 (two int32 meshgrids, a float32 where, its bf16 cast): 72.6 GB,
    more than an H100 holds; with vae-tiling (256 px tiles: S = 5 x 32 x 32) the plan fits."""
    cfg = get_model("hunyuanvideo").config
    assert image_tokens(cfg, cfg["components"]["transformer"], 90, 160, 33) == 118_800
    plain = estimate({"model": "hunyuanvideo", "task": "denoise"}, H100)
    mask = 14 * 72_000 ** 2
    act = plain.footprint.phases["vae-decode"]["activations"]
    assert mask < act < mask + 8 * 2 ** 30 and not plain.fits
    tiled = estimate({"model": "hunyuanvideo", "task": "denoise", "options": ["vae-tiling"]}, H100)
    assert tiled.fits and tiled.footprint.peak_phase == "denoise"


def test_wan_geometry_is_checked():
    with pytest.raises(ScenarioError) as err:
        estimate({"model": "wan2.1-t2v-1.3b", "task": "denoise", "frames": 80}, H100)
    assert err.value.key == "frames" and "77 or 81" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        estimate({"model": "wan2.1-t2v-1.3b", "task": "denoise", "resolution": [480, 830]}, H100)
    assert err.value.key == "resolution"


def _wan_index():
    cfg = get_model("wan2.1-t2v-1.3b").config["components"]
    return {"_class_name": "WanPipeline", "_diffusers_version": "0.33.0",
            "text_encoder": ["transformers", "UMT5EncoderModel"],
            "tokenizer": ["transformers", "T5TokenizerFast"],
            "transformer": ["diffusers", "WanTransformer3DModel"],
            "vae": ["diffusers", "AutoencoderKLWan"],
            "scheduler": ["diffusers", "UniPCMultistepScheduler"],
            "configs": {n: copy.deepcopy(c["diffusers_config"]) for n, c in cfg.items()}}


def test_inline_wan_pipeline_equals_the_catalog_entry():
    inline = pipeline_config(_wan_index())
    catalog = get_model("wan2.1-t2v-1.3b").config
    for name, comp in inline["components"].items():
        assert comp["params"] == catalog["components"][name]["params"], name
    spec = spec_from_architecture(_wan_index())
    e = estimate({"architecture": _wan_index(), "task": "denoise"}, H100)
    assert spec.config["video"] and e.peak_allocated_bytes > 0


def test_inline_wan_i2v_is_refused_naming_the_component():
    index = _wan_index()
    index["configs"]["transformer"]["image_dim"] = 1280
    with pytest.raises(ScenarioError) as err:
        pipeline_config(index)
    assert err.value.key == "architecture.configs.transformer"
    assert "image_dim" in str(err.value)


# ---- vision backbones (catalog/data/vision_2025.json) -------------------------------------------

from vramplan.workloads.vision.footprint import build, param_count  # noqa: E402
from vramplan.workloads.vision.nets import mlp_width  # noqa: E402

VISION_PUBLISHED = {   # model -> (published parameters, where, tolerance)
    "facebook/dinov2-base": (86e6, "DINOv2 paper (arXiv:2304.07193): ViT-B/14 86M", 0.02),
    "facebook/dinov2-large": (300e6, "DINOv2 paper: ViT-L/14 300M", 0.02),
    # 1,136,480,768 is 3.3% above the paper's rounded "1.1B" (within its half-unit, 4.5%)
    "facebook/dinov2-giant": (1.1e9, "DINOv2 paper: ViT-g/14 1.1B", 0.05 / 1.1),
    "facebook/dinov3-vitb16-pretrain-lvd1689m": (86e6, "DINOv3 model card: ViT-B/16 86M", 0.02),
    "facebook/dinov3-vitl16-pretrain-lvd1689m": (300e6, "DINOv3 model card: ViT-L/16 300M", 0.02),
    "google/siglip2-so400m-patch14-384": (428.2e6, "timm vit_so400m_patch14_siglip_384 card: "
                                                   "428.2M (the So400m/14 vision tower)", 0.02),
}


@pytest.mark.parametrize("mid", sorted(VISION_PUBLISHED))
def test_vision_backbone_against_the_published_figure(mid):
    published, _where, tol = VISION_PUBLISHED[mid]
    assert get_model(mid).source.startswith("https://huggingface.co/" + mid)
    assert abs(param_count(mid) / published - 1) <= tol


def test_dinov2_base_by_hand():
    """patch conv 3 x 14^2 x 768 + 768, cls + mask tokens 2 x 768, position table 1370 x 768;
    per layer 2 LayerNorms (4 x 768), q/k/v/out 4 x (768^2 + 768), 2 LayerScales (2 x 768),
    MLP 768 -> 3072 -> 768 with bias; a final LayerNorm; no classifier."""
    d = 768
    layer = 4 * d + 4 * (d * d + d) + 2 * d + (d * 4 * d + 4 * d) + (4 * d * d + d)
    total = 3 * 14 * 14 * d + d + 2 * d + 1370 * d + 12 * layer + 2 * d
    assert param_count("facebook/dinov2-base") == total == 86_580_480


def test_dinov3_vitb16_by_hand():
    """patch conv 3 x 16^2 x 768 + 768; cls, mask and 4 register tokens 6 x 768; RoPE, no
    position table; per layer 2 LayerNorms (4 x 768), q/k/v/o 4 x 768^2 with q, v and o
    biases (3 x 768; k has none), 2 LayerScales, MLP 768 -> 3072 -> 768 with bias; final
    LayerNorm."""
    d = 768
    layer = 4 * d + 4 * d * d + 3 * d + 2 * d + (d * 3072 + 3072) + (3072 * d + d)
    total = 3 * 16 * 16 * d + d + 6 * d + 12 * layer + 2 * d
    assert param_count("dinov3-vitb16") == total == 85_660_416


def test_dinov2_giant_swiglu_width():
    """Dinov2SwiGLUFFN: int(2/3 x 1536 x 4) = 4096, already a multiple of 8; weights_in
    1536 -> 8192, weights_out 4096 -> 1536."""
    cfg = get_model("dinov2-giant").config
    assert mlp_width(cfg, 1536) == 4096
    plain = dict(cfg, mlp="gelu")
    g_swi, _ = build(cfg, (518, 518), "f32", None, True, "sdpa", False)
    g_mlp, _ = build(plain, (518, 518), "f32", None, True, "sdpa", False)
    per_layer = (1536 * 8192 + 8192 + 4096 * 1536 + 1536) - (1536 * 6144 + 6144 + 6144 * 1536
                                                              + 1536)
    assert g_swi.params - g_mlp.params == 40 * per_layer


def test_siglip_attention_pooling_head_by_hand():
    """probe 1152, in_proj 3 x 1152^2 + 3 x 1152, out_proj 1152^2 + 1152, LayerNorm 2 x 1152,
    MLP 1152 -> 4304 -> 1152 with bias = 15,238,352 on a 412,987,248-parameter tower."""
    h, i = 1152, 4304
    head = h + 3 * h * h + 3 * h + h * h + h + 2 * h + h * i + i + i * h + h
    cfg = get_model("siglip2-so400m").config
    g_map, _ = build(cfg, (384, 384), "f32", None, True, "sdpa", False)
    g_cls, _ = build(dict(cfg, pool="cls"), (384, 384), "f32", None, True, "sdpa", False)
    assert g_map.params - g_cls.params == head == 15_238_352
    assert g_cls.params == 412_987_248


def test_register_tokens_and_a_classifier_head():
    """DINOv2 with 4 registers: 4 x 768 more parameters (no position rows) and 4 more tokens
    in every layer; a 1000-class head adds 768 x 1000 + 1000."""
    cfg = get_model("dinov2-base").config
    base, _ = build(cfg, (224, 224), "f32", None, True, "sdpa", False)
    reg, _ = build(dict(cfg, register_tokens=4), (224, 224), "f32", None, True, "sdpa", False)
    head, _ = build(dict(cfg, num_classes=1000), (224, 224), "f32", None, True, "sdpa", False)
    assert reg.params - base.params == 4 * 768
    assert head.params - base.params == 768 * 1000 + 1000
    tokens = lambda g: next(op.output.shape for op in g.ops if op.name == "cat_cls")  # noqa: E731
    assert tokens(base) == (16 * 16 + 1, 768)          # 224 / 14 = 16 patches a side + CLS
    assert tokens(reg) == (16 * 16 + 1 + 4, 768)


@pytest.mark.parametrize("mid", sorted(VISION_PUBLISHED))
def test_vision_estimates_on_an_h100_for_the_default_task(mid):
    e = estimate({"model": mid}, H100)
    assert e.peak_allocated_bytes > e.components["weights"] > 0


def test_siglip_takes_384_with_stride_14():
    """384 / 14 = 27.4: the patch conv keeps 27 x 27 = 729 patches (the position table's
    rows), so 384 is accepted; DINOv2 (torch-style check) still asks for multiples of 14."""
    estimate({"model": "siglip2-so400m", "task": "forward", "resolution": [384, 384]}, H100)
    with pytest.raises(ScenarioError) as err:
        estimate({"model": "dinov2-base", "task": "forward", "resolution": [224, 230]}, H100)
    assert err.value.key == "resolution"


# ---- SAM 2.1 (arch "sam2": workloads/vision/hiera.py) -----------------------------------------

SAM2_PUBLISHED = {   # SAM 2 README (facebookresearch/sam2): model size (M)
    "facebook/sam2.1-hiera-large": 224.4e6, "facebook/sam2.1-hiera-base-plus": 80.8e6,
    "facebook/sam2.1-hiera-small": 46e6, "facebook/sam2.1-hiera-tiny": 38.9e6,
}


@pytest.mark.parametrize("mid", sorted(SAM2_PUBLISHED))
def test_sam2_against_the_readme(mid):
    assert get_model(mid).source.startswith("https://huggingface.co/" + mid)
    assert abs(param_count(mid) / SAM2_PUBLISHED[mid] - 1) <= 0.02


def test_sam2_large_by_parts():
    """Hiera-L: patch conv 3 x 7^2 x 144 + 144 = 21,312; position embeddings 144 x (7^2 + 8^2)
    = 16,272; FPN neck 1x1 convs (1152 + 576 + 288 + 144) x 256 + 4 x 256 = 553,984; the
    heads 11,743,362; the 48 blocks take the rest: 212,111,712 (the sam2 code's module count
    of Hiera-L's blocks). In all 224,446,642 (README: 224.4M)."""
    neck = (1152 + 576 + 288 + 144) * 256 + 4 * 256
    assert neck == 553_984
    total = 21_312 + 16_272 + 212_111_712 + neck + 11_743_362
    assert param_count("sam2.1-hiera-large") == total == 224_446_642


def test_sam2_stages_pool_the_token_grid():
    """1024 px: the stride-4 patch conv gives 256 x 256 tokens; three 2x2 query pools give
    128^2, 64^2 and 32^2; the image embedding is the 64 x 64 level (scalp drops 32 x 32)."""
    cfg = get_model("sam2.1-hiera-tiny").config
    g, _ = build(cfg, (1024, 1024), "f32", None, False, "sdpa", False)
    pools = [op.output.shape for op in g.ops if op.name == "q_pool"]
    assert pools == [(128 * 128, 192), (64 * 64, 384), (32 * 32, 768)]
    assert next(op.output.shape for op in g.ops if op.name == "image_tokens") == (64 * 64, 256)
    e = estimate({"model": "sam2.1-hiera-large", "task": "forward"}, H100)
    assert e.fits and e.components["weights"] == 2 * 224_446_642


# ---- inline pipelines of the 2025 classes (catalog/pipeline.py + pipeline_video.py) -----------

CLIP_L = {"architectures": ["CLIPTextModel"], "hidden_size": 768, "intermediate_size": 3072,
          "max_position_embeddings": 77, "model_type": "clip_text_model",
          "num_attention_heads": 12, "num_hidden_layers": 12, "vocab_size": 49408}


def _index(mid, pipe, classes, given=None):
    """model_index.json of a catalog pipeline with the configs its entry records."""
    comps = get_model(mid).config["components"]
    given = given or {}
    return {"_class_name": pipe, "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
            **{n: ["diffusers", cls] for n, cls in classes.items()},
            "configs": {n: copy.deepcopy(given.get(n) or comps[n]["diffusers_config"])
                        for n in classes}}


@pytest.mark.parametrize("mid, pipe, classes, given", [
    ("Qwen/Qwen-Image", "QwenImagePipeline",
     {"text_encoder": "Qwen2_5_VLForConditionalGeneration",
      "transformer": "QwenImageTransformer2DModel", "vae": "AutoencoderKLQwenImage"},
     {"text_encoder": "Qwen/Qwen2.5-VL-7B-Instruct"}),
    ("hunyuanvideo", "HunyuanVideoPipeline",
     {"text_encoder": "LlamaModel", "text_encoder_2": "CLIPTextModel",
      "transformer": "HunyuanVideoTransformer3DModel", "vae": "AutoencoderKLHunyuanVideo"},
     {"text_encoder_2": CLIP_L}),
    ("ltx-video", "LTXPipeline",
     {"text_encoder": "T5EncoderModel", "transformer": "LTXVideoTransformer3DModel",
      "vae": "AutoencoderKLLTXVideo"},
     {"text_encoder": "black-forest-labs/FLUX.1-dev"}),
])
def test_inline_pipelines_equal_the_catalog_entries(mid, pipe, classes, given):
    """The Qwen-Image text encoder is Qwen2.5-VL-7B's nested config (8,292,166,656 with its
    vision tower and lm_head); HunyuanVideo's LlamaModel is the causal LM without its untied
    128320 x 4096 head (7,505,186,816)."""
    given = dict(given)
    if given.get("text_encoder") == "Qwen/Qwen2.5-VL-7B-Instruct":
        given["text_encoder"] = get_model("Qwen/Qwen2.5-VL-7B-Instruct").config
    if given.get("text_encoder") == "black-forest-labs/FLUX.1-dev":
        given["text_encoder"] = {"d_ff": 10240, "d_kv": 64, "d_model": 4096,
                                 "feed_forward_proj": "gated-gelu", "num_heads": 64,
                                 "num_layers": 24, "vocab_size": 32128}
    inline = pipeline_config(_index(mid, pipe, classes, given))
    catalog = get_model(mid).config
    for name, comp in inline["components"].items():
        assert comp["params"] == catalog["components"][name]["params"], name
    assert inline["guidance"] == catalog["guidance"]
    e = estimate({"architecture": _index(mid, pipe, classes, given), "task": "load"}, H100)
    assert e.components["weights"] == 2 * sum(c["params"] for c in inline["components"].values())


# ---- the counters against the diffusers / transformers modules themselves --------------------

@pytest.mark.parametrize("mid, comp, cls", [
    ("wan2.1-t2v-1.3b", "transformer", "WanTransformer3DModel"),
    ("wan2.2-ti2v-5b", "transformer", "WanTransformer3DModel"),
    ("wan2.1-t2v-14b", "vae", "AutoencoderKLWan"),
    ("wan2.2-ti2v-5b", "vae", "AutoencoderKLWan"),
    ("Qwen/Qwen-Image", "transformer", "QwenImageTransformer2DModel"),
    ("Qwen/Qwen-Image", "vae", "AutoencoderKLQwenImage"),
    ("hunyuanvideo", "transformer", "HunyuanVideoTransformer3DModel"),
    ("hunyuanvideo", "vae", "AutoencoderKLHunyuanVideo"),
    ("ltx-video", "transformer", "LTXVideoTransformer3DModel"),
    ("ltx-video", "vae", "AutoencoderKLLTXVideo"),
])
def test_counter_equals_the_diffusers_module(mid, comp, cls):
    """Built on the meta device from the config the catalog records (diffusers as installed)."""
    torch = pytest.importorskip("torch")
    from vramplan.measure.tracing.libs import ensure_torchvision
    ensure_torchvision()       # transformers (imported by diffusers) needs torchvision's ops
    diffusers = pytest.importorskip("diffusers")
    c = get_model(mid).config["components"][comp]
    with torch.device("meta"):
        module = getattr(diffusers, cls)(**c["diffusers_config"])
    assert sum(p.numel() for p in module.parameters()) == c["params"]


@pytest.mark.parametrize("mid, cls, kwargs", [
    ("facebook/dinov2-base", "Dinov2", dict(hidden_size=768, num_hidden_layers=12,
                                            num_attention_heads=12, patch_size=14,
                                            image_size=518)),
    ("facebook/dinov2-giant", "Dinov2", dict(hidden_size=1536, num_hidden_layers=40,
                                             num_attention_heads=24, patch_size=14,
                                             image_size=518, use_swiglu_ffn=True)),
    ("google/siglip2-so400m-patch14-384", "SiglipVision",
     dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27,
          num_attention_heads=16, patch_size=14, image_size=384)),
    ("facebook/dinov3-vitl16-pretrain-lvd1689m", "DINOv3ViT",
     dict(patch_size=16, hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
          num_attention_heads=16, num_register_tokens=4)),
])
def test_vision_walk_equals_the_transformers_module(mid, cls, kwargs):
    """The layer walk's count against transformers' own module (meta device), built from the
    config keys the catalog entry's source cites (DINOv2's config.json says image_size 518: its
    1370-row position table; transformers' default would be 224)."""
    torch = pytest.importorskip("torch")
    from vramplan.measure.tracing.libs import ensure_torchvision
    ensure_torchvision()
    tf = pytest.importorskip("transformers")
    config = getattr(tf, cls + "Config")(**kwargs)
    with torch.device("meta"):
        module = getattr(tf, cls + "Model")(config)
    assert sum(p.numel() for p in module.parameters()) == param_count(mid)
