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
}


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


def test_wan_22_holds_both_experts():
    a14 = estimate({"model": "wan2.2-t2v-a14b", "task": "load"}, H100).components["weights"]
    w14 = estimate({"model": "wan2.1-t2v-14b", "task": "load"}, H100).components["weights"]
    assert a14 - w14 == 2 * 14_288_491_584


@pytest.mark.parametrize("mid", ["Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
                                 "Wan-AI/Wan2.1-T2V-14B-Diffusers",
                                 "Wan-AI/Wan2.2-T2V-A14B-Diffusers",
                                 "black-forest-labs/FLUX.1-Kontext-dev", "Qwen/Qwen-Image"])
def test_estimates_on_an_h100_for_the_default_task(mid):
    e = estimate({"model": mid}, H100)
    assert e.peak_allocated_bytes > e.components["weights"] > 0


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
