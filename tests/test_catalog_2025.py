"""The 2025 catalog (catalog/data/*_2025.json) and nested multimodal config.json.

Every new model's parameter count, as the package computes it from its config.json
(`ModelSpec.param_count()`, the count the catalog test checks), must equal the figure its
publisher gives within 2%; each loads and estimates on an H100 for its default task.
"""
import copy
import json
from pathlib import Path

import pytest

from vramplan.catalog import DATA_DIR, get_model, list_models, spec_from_architecture
from vramplan.catalog.nested import MultimodalArch, image_tokens, nested_arch
from vramplan.errors import ScenarioError

# model -> (published total parameters, published active parameters or None, where published)
PUBLISHED = {
    "Qwen/Qwen3-0.6B": (0.6e9, None, "model card: Number of Parameters 0.6B"),
    "Qwen/Qwen3-1.7B": (1.7e9, None, "model card: Number of Parameters 1.7B"),
    "Qwen/Qwen3-4B": (4.0e9, None, "model card: Number of Parameters 4.0B"),
    "Qwen/Qwen3-8B": (8.2e9, None, "model card: Number of Parameters 8.2B"),
    "Qwen/Qwen3-14B": (14.8e9, None, "model card: Number of Parameters 14.8B"),
    "Qwen/Qwen3-32B": (32.8e9, None, "model card: Number of Parameters 32.8B"),
    "Qwen/Qwen3-30B-A3B": (30.5e9, 3.3e9, "model card: 30.5B in total and 3.3B activated"),
    "Qwen/Qwen3-235B-A22B": (235e9, 22e9, "model card: 235B in total and 22B activated"),
    "deepseek-ai/DeepSeek-V3.1": (671e9, 37e9, "model card: 671B total, 37B activated"),
    "moonshotai/Kimi-K2-Instruct": (1.04e12, 32e9, "Kimi K2 technical report (arXiv:2507.20534):"
                                    " 1.04T total, 32B activated (model card: 1T / 32B)"),
    "microsoft/Phi-4-mini-instruct": (3.8e9, None, "model card: 3.8B parameters"),
    "allenai/OLMo-2-1124-7B": (7.3e9, None, "Hub metadata: 7.3B params (model card: 7B)"),
    "HuggingFaceTB/SmolLM3-3B": (3.08e9, None, "Hub metadata: 3.08B params (model card: 3B)"),
    "Qwen/Qwen2.5-VL-7B-Instruct": (8.29e9, None, "Hub model page: 8.29B params (safetensors)"),
    "Qwen/Qwen3-VL-8B-Instruct": (8.8e9, None, "Hub metadata: 8.8B params (safetensors)"),
    "mistralai/Mistral-Small-3.2-24B-Instruct-2506": (24e9, None, "model card: 24B parameters"),
    "meta-llama/Llama-3.2-11B-Vision": (10.6e9, None, "model card: Llama 3.2-Vision 11B, "
                                        "10.6B params"),
}


# diffusion pipelines: (component, published parameters, where published)
DIFFUSION_PUBLISHED = {
    "stabilityai/stable-diffusion-3.5-large": ("transformer", 8.1e9,
                                               "model card: an 8.1 billion parameter MMDiT"),
}


# checked against their published figures in tests/test_catalog_2025_vision_video.py
CHECKED_ELSEWHERE = ("Wan-AI/Wan2.1-T2V-1.3B-Diffusers", "Wan-AI/Wan2.1-T2V-14B-Diffusers",
                     "Wan-AI/Wan2.2-T2V-A14B-Diffusers", "black-forest-labs/FLUX.1-Kontext-dev",
                     "Qwen/Qwen-Image", "hunyuanvideo-community/HunyuanVideo",
                     "Lightricks/LTX-Video", "Wan-AI/Wan2.2-TI2V-5B-Diffusers")


def _new_specs():
    ids = []
    for path in sorted(DATA_DIR.glob("*_2025.json")):
        if path.name == "vision_2025.json":      # tests/test_catalog_2025_vision_video.py
            continue
        ids += [m["id"] for m in json.loads(path.read_text())["models"]
                if m["id"] not in CHECKED_ELSEWHERE]
    return ids


NEW = _new_specs()


def test_every_new_model_has_a_published_figure_and_a_source():
    assert sorted(NEW) == sorted([*PUBLISHED, *DIFFUSION_PUBLISHED])
    for mid in PUBLISHED:
        spec = get_model(mid)
        assert spec.source.startswith("https://huggingface.co/" + mid), mid
        assert "vendored" in spec.source, mid   # says which public copy the config came from


@pytest.mark.parametrize("mid", sorted(PUBLISHED))
def test_param_count_equals_the_published_figure(mid):
    total, active, _where = PUBLISHED[mid]
    arch = get_model(mid).arch
    assert abs(get_model(mid).param_count() / total - 1) <= 0.02
    if active:  # activated counts are published to two digits (32B, 37B) and count the
        # input embedding or not (Kimi K2: 32.86e9 with it, 31.69e9 without): within 3%
        assert abs(arch.active_param_count() / active - 1) <= 0.03


@pytest.mark.parametrize("mid", sorted(DIFFUSION_PUBLISHED))
def test_diffusion_component_equals_the_published_figure(mid):
    comp, published, _where = DIFFUSION_PUBLISHED[mid]
    spec = get_model(mid)
    assert spec.source.startswith("https://huggingface.co/" + mid)
    assert abs(spec.config["components"][comp]["params"] / published - 1) <= 0.02


@pytest.mark.parametrize("mid", sorted([*PUBLISHED, *DIFFUSION_PUBLISHED]))
def test_estimates_on_an_h100_for_the_default_task(mid):
    from vramplan.estimate import estimate
    e = estimate({"model": mid, "gpu": "H100"}, with_max_batch=False)
    spec = get_model(mid)
    params = spec.param_count() or sum(c["params"] for c in spec.config["components"].values())
    assert e.components["weights"] > params   # >= 1 byte per parameter (bf16 / fp16 / fp32)
    assert e.device_used_bytes > e.components["weights"]


def test_sd35_large_transformer_by_hand():
    """D = 2432, head 64, 38 blocks (the last without context output / MLP): block 36 D^2 +
    30 D + 4 x 64, last 23 D^2 + 20 D + 4 x 64; patch conv 16 x 2 x 2 x D + D; time 256 D +
    D + D^2 + D; pooled text 2048 D + D + D^2 + D; context 4096 D + D; norm_out 2 D^2 + 2 D;
    proj_out 64 D + 64."""
    D = 2432
    total = (37 * (36 * D * D + 30 * D + 256) + (23 * D * D + 20 * D + 256) + (64 * D + D)
             + (256 * D + D + D * D + D) + (2048 * D + D + D * D + D) + (4096 * D + D)
             + (2 * D * D + 2 * D) + (64 * D + 64))
    comp = get_model("stabilityai/stable-diffusion-3.5-large").config["components"]
    assert comp["transformer"]["params"] == total == 8_056_627_520
    assert comp["transformer"]["text_tokens"] == 77 + 256


def test_qwen3_0_6b_by_hand():
    """Qwen3-0.6B (tied embeddings): embeddings 151936 x 1024; per layer q 1024x2048, k and v
    1024x1024, o 2048x1024, MLP 3 x 1024 x 3072, two RMSNorms (2 x 1024) and q/k norms
    (2 x 128); a final norm."""
    per_layer = (1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024 + 3 * 1024 * 3072
                 + 2 * 1024 + 2 * 128)
    assert get_model("Qwen/Qwen3-0.6B").param_count() == \
        151936 * 1024 + 28 * per_layer + 1024 == 596_049_920


def test_instruct_and_base_aliases_resolve():
    assert get_model("Qwen/Qwen3-8B-Base").id == "Qwen/Qwen3-8B"
    assert get_model("qwen3-30b-a3b-base").id == "Qwen/Qwen3-30B-A3B"
    assert get_model("moonshotai/Kimi-K2-Base").id == "moonshotai/Kimi-K2-Instruct"


# ---- nested (multimodal) config.json ---------------------------------------------------------

def _qwen25_vl() -> dict:
    return copy.deepcopy(get_model("Qwen/Qwen2.5-VL-7B-Instruct").config)


def test_qwen25_vl_vision_tower_by_hand():
    """Qwen2.5-VL vision tower, h = 1280, ffn 3420, 32 blocks, out 3584: patch Conv3d 3x2x14x14
    x h; per block 2 RMSNorms, qkv + proj with bias (4h^2 + 4h), gated MLP with biases
    (3 h ffn + 2 ffn + h); merger RMSNorm h, Linear(4h, 4h) and Linear(4h, 3584) with bias."""
    h, f, out = 1280, 3420, 3584
    block = 2 * h + 4 * h * h + 4 * h + 3 * h * f + 2 * f + h
    merger = h + 16 * h * h + 4 * h + 4 * h * out + out
    vision = 3 * 2 * 14 * 14 * h + 32 * block + merger
    arch = get_model("Qwen/Qwen2.5-VL-7B-Instruct").arch
    assert isinstance(arch, MultimodalArch)
    assert arch.tower_params() == {"vision": vision} and vision == 676_550_144
    # the text decoder is Qwen2.5-7B's shape (q/k/v biases, untied head): 7,615,616,512
    assert arch.param_count() == 7_615_616_512 + vision
    assert arch.qkv_bias and not arch.tied_embeddings and arch.layers == 28


def test_nested_config_was_refused_before_and_estimates_now():
    """The issue's case: a nested config used to fail with "missing key 'hidden_size'"."""
    from vramplan.estimate import estimate
    cfg = _qwen25_vl()
    for k in [k for k in cfg if k not in ("model_type", "text_config", "vision_config",
                                          "tie_word_embeddings")]:
        del cfg[k]   # only the nested keys: hidden_size exists under text_config alone
    spec = spec_from_architecture(cfg)
    assert spec.family == "decoder" and spec.id == "custom/qwen2_5_vl"
    assert "vision 677M" in spec.note
    e = estimate({"architecture": cfg, "gpu": "H100", "task": "generate"},
                 with_max_batch=False)
    text_only = estimate({"model": "Qwen/Qwen2.5-7B", "gpu": "H100", "task": "generate"},
                         with_max_batch=False)
    # bf16: the tower's 676,550,144 parameters add 2 bytes each to the weights
    assert e.components["weights"] - text_only.components["weights"] == 2 * 676_550_144


def test_flat_layout_reads_the_text_keys_from_the_top_level():
    cfg = _qwen25_vl()
    del cfg["text_config"]
    assert nested_arch(cfg).param_count() == get_model("Qwen/Qwen2.5-VL-7B-Instruct").param_count()


def test_qwen3_vl_deepstack_mergers_by_hand():
    """h 1152, ffn 4304, 27 blocks, out 4096, 2304 positions, patch 16: patch Conv3d with bias,
    LayerNorms, biased linears; main merger (LayerNorm h) + 3 deepstack mergers (LayerNorm 4h)."""
    h, f, out = 1152, 4304, 4096
    linears = 16 * h * h + 4 * h + 4 * h * out + out
    vision = (3 * 2 * 16 * 16 * h + h + 2304 * h + 27 * (4 * h + 4 * h * h + 4 * h + 2 * h * f + f
                                                            + h)
              + linears + 2 * h + 3 * (linears + 8 * h))
    assert get_model("Qwen/Qwen3-VL-8B-Instruct").arch.tower_params() == {"vision": vision}


@pytest.mark.parametrize("h, w, tokens", [(448, 448, 196), (1024, 768, 32 * 24)])
def test_qwen3_vl_image_tokens(h, w, tokens):
    """One token per 32 x 32 pixels (patch 16, 2 x 2 merge): 448 x 448 -> 14 x 14 = 196."""
    assert image_tokens(get_model("Qwen/Qwen3-VL-8B-Instruct").config, h, w) == tokens


def test_gemma3_style_siglip_tower_and_projector():
    """A Gemma 3-style config (SigLIP so400m without head, Gemma3MultiModalProjector): tower
    = patch Conv2d with bias + 4096-row position table + 27 layers + post LayerNorm; the
    projector a 1152 x 2560 matrix and an RMSNorm of 1152. 256 tokens per image."""
    h, f = 1152, 4304
    cfg = {"model_type": "gemma3", "mm_tokens_per_image": 256,
           "text_config": {"model_type": "llama", "hidden_size": 2560, "num_hidden_layers": 2,
                           "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                           "intermediate_size": 10240, "vocab_size": 1000},
           "vision_config": {"model_type": "siglip_vision_model", "hidden_size": h,
                             "num_hidden_layers": 27, "intermediate_size": f, "patch_size": 14,
                             "image_size": 896, "vision_use_head": False}}
    tower = (3 * 14 * 14 * h + h + 64 * 64 * h + 27 * (4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h)
             + 2 * h)
    arch = nested_arch(cfg)
    assert arch.tower_params() == {"vision": tower + h * 2560 + h}
    assert arch.approximate == ()
    assert image_tokens(cfg, 896, 896) == 256


def test_unknown_tower_is_counted_generically_and_said():
    cfg = {"model_type": "somevlm", "text_config": {"hidden_size": 64, "num_hidden_layers": 2,
                                                    "num_attention_heads": 4, "vocab_size": 100,
                                                    "intermediate_size": 128},
           "vision_config": {"model_type": "newvit", "hidden_size": 32, "num_hidden_layers": 2,
                             "intermediate_size": 64}}
    arch = nested_arch(cfg)
    # 2 layers x (4 x 32^2 + 4 x 32 + 2 x 32 x 64 + 64 + 32 + 4 x 32) + final LayerNorm 2 x 32
    assert arch.tower_params() == {"vision": 2 * (4096 + 128 + 4096 + 64 + 32 + 128) + 64}
    assert arch.approximate == ("vision",)
    assert "generic encoder layout" in spec_from_architecture(cfg).note


@pytest.mark.parametrize("mutate, where, key", [
    (lambda c: c["text_config"].pop("hidden_size"), "architecture.text_config", "hidden_size"),
    (lambda c: c["vision_config"].pop("depth"), "architecture.vision_config", "depth"),
    (lambda c: c["vision_config"].update(depth="32"), "architecture.vision_config", "depth"),
    (lambda c: c.update(vision_config=[1]), "architecture.vision_config", "sub-config"),
    (lambda c: c.update(text_config="x"), "architecture.text_config", "sub-config"),
    (lambda c: [c.pop(k) for k in list(c) if k not in ("model_type", "vision_config")],
     "architecture", "under 'text_config' or at the top level"),
])
def test_malformed_nested_config_names_the_sub_config_and_the_key(mutate, where, key):
    cfg = _qwen25_vl()
    mutate(cfg)
    with pytest.raises(ScenarioError) as exc:
        spec_from_architecture(cfg).arch
    assert exc.value.key == where and key in str(exc.value)


def test_catalog_files_parse_and_ids_are_unique():
    ids = [s.id.lower() for s in list_models()]
    assert len(ids) == len(set(ids))
    for path in Path(DATA_DIR).glob("*_2025.json"):
        assert json.loads(path.read_text())["models"]


# ---- an inline diffusers pipeline ------------------------------------------------------------

# black-forest-labs/FLUX.1-dev: model_index.json and the component config.json files
# (transformer/, vae/, text_encoder/ = CLIP ViT-L/14 text, text_encoder_2/ = T5-v1.1-XXL
# encoder); the keys that decide the shapes, as published in that repository
FLUX_DEV_PIPELINE = {
    "_class_name": "FluxPipeline", "_diffusers_version": "0.30.0.dev0",
    "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
    "text_encoder": ["transformers", "CLIPTextModel"],
    "text_encoder_2": ["transformers", "T5EncoderModel"],
    "tokenizer": ["transformers", "CLIPTokenizer"],
    "tokenizer_2": ["transformers", "T5TokenizerFast"],
    "transformer": ["diffusers", "FluxTransformer2DModel"], "vae": ["diffusers", "AutoencoderKL"],
    "configs": {
        "transformer": {"_class_name": "FluxTransformer2DModel", "attention_head_dim": 128,
                        "axes_dims_rope": [16, 56, 56], "guidance_embeds": True,
                        "in_channels": 64, "joint_attention_dim": 4096,
                        "num_attention_heads": 24, "num_layers": 19, "num_single_layers": 38,
                        "patch_size": 1, "pooled_projection_dim": 768},
        "vae": {"_class_name": "AutoencoderKL", "act_fn": "silu",
                "block_out_channels": [128, 256, 512, 512], "in_channels": 3,
                "latent_channels": 16, "layers_per_block": 2, "norm_num_groups": 32,
                "out_channels": 3, "sample_size": 1024, "scaling_factor": 0.3611,
                "shift_factor": 0.1159, "use_post_quant_conv": False, "use_quant_conv": False},
        "text_encoder": {"architectures": ["CLIPTextModel"], "hidden_size": 768,
                         "intermediate_size": 3072, "max_position_embeddings": 77,
                         "model_type": "clip_text_model", "num_attention_heads": 12,
                         "num_hidden_layers": 12, "projection_dim": 768, "vocab_size": 49408},
        "text_encoder_2": {"architectures": ["T5EncoderModel"], "d_ff": 10240, "d_kv": 64,
                           "d_model": 4096, "feed_forward_proj": "gated-gelu",
                           "model_type": "t5", "num_heads": 64, "num_layers": 24,
                           "relative_attention_num_buckets": 32, "vocab_size": 32128}}}


def test_inline_flux_pipeline_equals_the_catalog_entry():
    """Each component counted from its config equals the FLUX.1-dev catalog entry (whose counts
    come from tests/data/models.json: transformer 11,901,408,320, VAE 83,819,683, CLIP-L text
    123,060,480, T5-XXL encoder 4,762,310,656), and so does every other family key."""
    spec = spec_from_architecture(copy.deepcopy(FLUX_DEV_PIPELINE))
    ref = get_model("black-forest-labs/FLUX.1-dev").config
    assert spec.family == "diffusion"
    for name, comp in spec.config["components"].items():
        want = {k: v for k, v in ref["components"][name].items() if k != "source"}
        assert comp == want, name
    assert {k: v for k, v in spec.config.items() if k != "components"} == \
        {k: v for k, v in ref.items() if k != "components"}


def test_flux_transformer_by_hand():
    """D = 3072, head 128: double block 36 D^2 + 30 D + 4 x 128, single 15 D^2 + 11 D + 2 x 128;
    time + guidance embedders 2 x (256 D + D + D^2 + D), pooled text 768 D + D + D^2 + D,
    context 4096 D + D, x 64 D + D, norm_out 2 D^2 + 2 D, proj_out 64 D + 64."""
    D = 3072
    total = (19 * (36 * D * D + 30 * D + 512) + 38 * (15 * D * D + 11 * D + 256)
             + 2 * (256 * D + D + D * D + D) + (768 * D + D + D * D + D) + (4096 * D + D)
             + (64 * D + D) + (2 * D * D + 2 * D) + (64 * D + 64))
    spec = spec_from_architecture(copy.deepcopy(FLUX_DEV_PIPELINE))
    assert spec.config["components"]["transformer"]["params"] == total == 11_901_408_320


def test_inline_pipeline_estimates_like_the_catalog_model():
    from vramplan.estimate import estimate
    inline = estimate({"architecture": copy.deepcopy(FLUX_DEV_PIPELINE), "gpu": "H100"},
                      with_max_batch=False)
    named = estimate({"model": "black-forest-labs/FLUX.1-dev", "gpu": "H100"},
                     with_max_batch=False)
    assert inline.scenario.task == named.scenario.task == "denoise"
    assert inline.device_used_bytes == named.device_used_bytes


@pytest.mark.parametrize("mutate, key, words", [
    (lambda p: p.update(_class_name="CogVideoXPipeline"), "architecture._class_name",
     "CogVideoXPipeline"),   # (Wan / HunyuanVideo / LTX are read since pipeline_video.py)
    (lambda p: p.pop("configs"), "architecture.configs", "missing"),
    (lambda p: p["configs"].pop("vae"), "architecture.configs.vae", "AutoencoderKL"),
    (lambda p: p["configs"]["transformer"].pop("num_single_layers"),
     "architecture.configs.transformer", "num_single_layers"),
    (lambda p: p.update(transformer=["diffusers", "CogVideoXTransformer3DModel"]),
     "architecture.configs.transformer", "CogVideoXTransformer3DModel"),
    (lambda p: p["configs"]["vae"].update(block_out_channels=[128, "x"]),
     "architecture.configs.vae", "block_out_channels"),
])
def test_malformed_pipeline_names_the_component_and_the_key(mutate, key, words):
    p = copy.deepcopy(FLUX_DEV_PIPELINE)
    mutate(p)
    with pytest.raises(ScenarioError) as exc:
        spec_from_architecture(p)
    assert exc.value.key == key and words in str(exc.value)


def test_whisper_style_audio_tower_and_projector_by_hand():
    """A Qwen2-Audio-style config: Whisper encoder (d 64, 2 layers, ffn 256, 80 mel bins, 1500
    positions): conv1 80 x 64 x 3 + 64, conv2 64 x 64 x 3 + 64; per layer q / v / out with
    bias and k without (4 x 64^2 + 3 x 64), fc1 / fc2 (2 x 64 x 256 + 256 + 64), two
    LayerNorms (4 x 64); a final LayerNorm; the projector Linear(64 -> 128) with bias."""
    d, f = 64, 256
    cfg = {"model_type": "qwen2_audio",
           "text_config": {"model_type": "qwen2", "hidden_size": 128, "num_hidden_layers": 2,
                           "num_attention_heads": 4, "intermediate_size": 256,
                           "vocab_size": 100},
           "audio_config": {"model_type": "qwen2_audio_encoder", "d_model": d,
                            "encoder_layers": 2, "encoder_ffn_dim": f, "num_mel_bins": 80,
                            "max_source_positions": 1500}}
    layer = 4 * d * d + 3 * d + 2 * d * f + f + d + 4 * d
    tower = (80 * d * 3 + d) + (d * d * 3 + d) + 1500 * d + 2 * layer + 2 * d
    arch = nested_arch(cfg)
    assert arch.tower_params() == {"audio": tower + d * 128 + 128}
    assert arch.approximate == ()


def test_pixtral_tower_mistral3_projector_and_image_tokens():
    """Pixtral (h 64, 2 layers, ffn 128, patch 16): patch conv 3 x 16 x 16 x h, per layer
    q/k/v/o 4 h^2 + gated MLP 3 h ffn + two RMSNorms, ln_pre; Mistral 3 projector: RMSNorm h,
    patch merger Linear(4h, h), linear_1 h -> 256 and linear_2 256 -> 256 without bias
    (multimodal_projector_bias false). An image of 512 x 320: 16 x 10 merged patches + one
    [IMG_BREAK] per row = 176 tokens."""
    h, f, t = 64, 128, 256
    cfg = {"model_type": "mistral3", "spatial_merge_size": 2, "multimodal_projector_bias": False,
           "text_config": {"model_type": "mistral", "hidden_size": t, "num_hidden_layers": 2,
                           "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 100},
           "vision_config": {"model_type": "pixtral", "hidden_size": h, "num_hidden_layers": 2,
                             "intermediate_size": f, "patch_size": 16, "image_size": 1024}}
    tower = 3 * 16 * 16 * h + 2 * (4 * h * h + 3 * h * f + 2 * h) + h
    proj = h + 4 * h * h + h * t + t * t
    assert nested_arch(cfg).tower_params() == {"vision": tower + proj}
    assert image_tokens(cfg, 512, 320) == 16 * 10 + 16


def test_mllama_tiled_vision_tower_by_hand():
    """Llama 3.2 Vision, h 1280, ffn 5120, 32 local + 8 global layers, patch 14 at 560 (1601
    positions), 4 tiles, 8 aspect ratios (9 table rows): per layer 4 h^2 + 2 h ffn + ffn + h +
    4 h; patch conv 3 x 14 x 14 x h; class embedding h; position table 1601 h + a gate; tile
    table 9 x 4 x 1601 x h; pre / post tile tables 2 x (9 x 4 x h + a gate); LayerNorms pre and
    post 4 h; two gates per global layer; projector Linear(7680 -> 4096) with bias."""
    h, f = 1280, 5120
    layer = 4 * h * h + 2 * h * f + f + h + 4 * h
    tower = (40 * layer + 3 * 14 * 14 * h + h + 1601 * h + 1 + 9 * 4 * 1601 * h
             + 2 * (9 * 4 * h + 1) + 4 * h + 2 * 8)
    arch = get_model("meta-llama/Llama-3.2-11B-Vision").arch
    assert arch.tower_params() == {"vision": tower + 7680 * 4096 + 4096}
    assert tower == 863_567_379 and not arch.tied_embeddings and arch.layers == 40


# google/gemma-3-4b-it's config.json as published (its text_config names few keys; the rest
# are Gemma3TextConfig defaults): the example of a refused nested config
GEMMA3_4B_IT = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
    "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144,
    "initializer_range": 0.02, "mm_tokens_per_image": 256, "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16,
                      "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False}}


def test_gemma3_4b_it_config_json_estimates_with_its_vision_tower():
    """Gemma3TextConfig defaults fill heads 8, KV heads 4, head_dim 256, vocab 262,208: the text
    decoder is the catalog's google/gemma-3-4b-pt; SigLIP so400m at 896 (64 x 64 patches) by
    hand as above = 416,866,032 (Gemma 3 report: 417M vision encoder) + projector 1152 x 2560 +
    1152; the total 4.30e9 is the Hub's figure."""
    from vramplan.estimate import estimate
    h, f = 1152, 4304
    tower = (3 * 14 * 14 * h + h + 64 * 64 * h
             + 27 * (4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h) + 2 * h)
    spec = spec_from_architecture(copy.deepcopy(GEMMA3_4B_IT))
    text = get_model("google/gemma-3-4b-pt").arch
    assert tower == 416_866_032
    assert spec.arch.param_count() == text.param_count() + tower + h * 2560 + h
    assert abs(spec.arch.param_count() / 4.30e9 - 1) < 0.01
    assert spec.arch.kv_bytes_per_token(2) == text.kv_bytes_per_token(2)  # the decoder's cache
    e = estimate({"architecture": copy.deepcopy(GEMMA3_4B_IT), "gpu": "H100",
                  "task": "generate"}, with_max_batch=False)
    assert e.fits and image_tokens(GEMMA3_4B_IT, 896, 896) == 256


def test_outer_quantization_config_reaches_the_text_decoder():
    """A composite checkpoint saved quantised (Qwen3-VL-8B-Instruct-FP8 style) keeps
    quantization_config at the top level, beside text_config: the decoder is read with it."""
    cfg = copy.deepcopy(get_model("Qwen/Qwen3-VL-8B-Instruct").config)
    assert nested_arch(cfg).weight_format is None
    cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme":
                                  "dynamic", "weight_block_size": [128, 128]}
    assert nested_arch(cfg).weight_format.precision == "fp8"
