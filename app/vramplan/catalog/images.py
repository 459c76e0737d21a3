"""What one image costs a vision-language model: its tokens in the text decoder, the tokens its
vision tower runs over, and the tower's block shape (for the tower's activations).

Per tower (transformers 4.5x processors and modelling code):

* Qwen2-VL / Qwen2.5-VL / Qwen3-VL (catalog/qwen_resize.py smart_resize, transformers 5.23
  models/qwen2_vl/image_processing_qwen2_vl.py, the image processor of all three
  (models/auto/image_processing_auto.py maps qwen2_5_vl and qwen3_vl to Qwen2VLImageProcessor):
  each side rounded to a multiple of factor = patch x merge = 28 (Qwen3-VL 16 x 2 = 32), then
  the area clamped to [min_pixels, max_pixels] keeping the aspect ratio (qwen_resize.py); the
  tower's Conv3d cuts patch x patch patches (an image is repeated to temporal_patch_size
  frames, one temporal patch), the PatchMerger joins merge x merge of them into one decoder
  token): decoder tokens (h' / factor) x (w' / factor), tower tokens 4 x that. Dynamic
  resolution: `image_size`.
* Gemma 3 (`Gemma3ImageProcessor` resizes to the SigLIP image_size 896; `Gemma3MultiModalProjector`
  pools the 64 x 64 patches to mm_tokens_per_image 256): 256 decoder tokens, 4096 tower tokens.
* Mistral 3 / Pixtral (`PixtralImageProcessor`: the image scaled down so its longest edge is at
  most longest_edge (the vision_config image_size, 1540 for Mistral Small 3.1), each side
  rounded up to a multiple of patch x merge; Mistral3PatchMerger joins 2 x 2; one [IMG_BREAK]
  per row; catalog/pixtral_resize.py): rows x cols + rows decoder tokens, (rows x 2) x
  (cols x 2) tower tokens. Dynamic resolution: `image_size`.
* LLaVA-style CLIP / SigLIP towers: (image_size / patch)^2 (+1 CLIP class token in the tower).
* Llama 3.2 Vision (mllama; `MllamaImageProcessor` tiles of image_size 560 on a canvas of up
  to max_num_tiles 4; pixel_values always hold max_num_tiles tiles, the padded ones masked):
  no image token enters the text sequence; the tower runs 4 tiles x (40^2 + 1 class) patches,
  padded to a multiple of 8 (MllamaVisionModel: 1608 a tile); its output, 4 x 1601 tokens an
  image, is the cross-attention memory of the text model's `cross_attention_layers` (their K
  and V over those tokens are what they cache; MllamaCrossAttentionDecoderLayer).
"""
from __future__ import annotations

from dataclasses import dataclass

from . import pixtral_resize
from .nested import _Sub, image_tokens
from .qwen_resize import grid

QWEN_TOWERS = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
DYNAMIC_TOWERS = QWEN_TOWERS + ("pixtral",)   # the processor keeps the image's own size


@dataclass(frozen=True)
class Tower:
    """One vision tower's block shape: hidden width, heads, MLP width and kind, norm, blocks."""
    hidden: int
    heads: int
    ffn: int
    gated: bool
    norm: str          # "layernorm" | "rmsnorm"
    layers: int


@dataclass(frozen=True)
class ImageCost:
    """Per image: decoder tokens (in the text sequence), tower tokens, cross-attention memory
    tokens (mllama), and the tower's shape."""
    decoder_tokens: int
    tower_tokens: int
    cross_tokens: int
    tower: Tower


def vision_config(config: dict) -> dict | None:
    v = config.get("vision_config") if isinstance(config, dict) else None
    return v if isinstance(v, dict) else None


def is_dynamic(config: dict) -> bool:
    """Does the model's processor keep the image's own resolution (so `image_size` applies)?"""
    v = vision_config(config) or {}
    return v.get("model_type") in DYNAMIC_TOWERS


def qwen_grid(config: dict, height: int, width: int) -> tuple[int, int]:
    """(decoder tokens, tower patches) of one height x width image for a Qwen-VL model
    (qwen_resize.grid with the vision_config's patch_size and spatial_merge_size)."""
    v = _Sub("vision_config", vision_config(config))
    return grid(v.cfg.get("model_type"), v.int("patch_size", "spatial_patch_size"),
                v.int("spatial_merge_size", default=2), height, width)


def tower_shape(config: dict) -> Tower:
    """The vision tower's block shape from its sub-config (modules as counted in nested.py)."""
    v = _Sub("vision_config", vision_config(config))
    kind = v.cfg.get("model_type")
    if kind == "qwen2_vl":    # Qwen2VLVisionBlock: LayerNorms, fc1 / fc2 (QuickGELU)
        h = v.int("embed_dim", "hidden_size")
        return Tower(h, v.int("num_heads"), int(h * v.cfg.get("mlp_ratio", 4)), False,
                     "layernorm", v.int("depth"))
    if kind in ("qwen2_5_vl", "qwen3_vl"):   # 2.5: RMSNorm + gated MLP; 3: LayerNorm + fc1/fc2
        return Tower(v.int("hidden_size"), v.int("num_heads"), v.int("intermediate_size"),
                     kind == "qwen2_5_vl", "rmsnorm" if kind == "qwen2_5_vl" else "layernorm",
                     v.int("depth"))
    layers = v.int("num_hidden_layers") + (v.int("num_global_layers", default=0)
                                           if kind == "mllama_vision_model" else 0)
    heads = v.int("num_attention_heads", "attention_heads")
    return Tower(v.int("hidden_size"), heads, v.int("intermediate_size"), kind == "pixtral",
                 "rmsnorm" if kind == "pixtral" else "layernorm", layers)


def image_cost(config: dict, height: int | None, width: int | None) -> ImageCost:
    """What one image of height x width pixels costs (`height` / `width` only for the dynamic
    processors). Raises ScenarioError('architecture.vision_config', ...) for a tower whose
    image rule is not known."""
    v = _Sub("vision_config", vision_config(config))
    kind, parent = v.cfg.get("model_type"), config.get("model_type")
    tower = tower_shape(config)
    if kind == "mllama_vision_model":
        side = v.int("image_size") // v.int("patch_size")
        tiles, per_tile = v.int("max_num_tiles", default=4), side * side + 1
        return ImageCost(0, tiles * (per_tile + (-per_tile) % 8), tiles * per_tile, tower)
    if parent == "gemma3":
        side = v.int("image_size") // v.int("patch_size")
        return ImageCost(image_tokens(config, 0, 0), side * side, 0, tower)
    if kind in QWEN_TOWERS:
        return ImageCost(*qwen_grid(config, height, width), 0, tower)
    if kind == "pixtral":   # resized to the longest edge, sides up to a merged patch
        merge = _Sub("", config).int("spatial_merge_size", default=2)
        patches = pixtral_resize.grid(height, width, v.int("patch_size"), merge,
                                      v.int("image_size", default=1024))[2]
        return ImageCost(image_tokens(config, height, width), patches, 0, tower)
    tokens = image_tokens(config, 0, 0)   # CLIP / SigLIP at their image_size (or refused)
    return ImageCost(tokens, tokens + (1 if kind == "clip_vision_model" else 0), 0, tower)


def cross_attention_layers(config: dict) -> int:
    """Llama 3.2 Vision: the text model's cross-attention layers (text_config
    cross_attention_layers); 0 for other models."""
    text = config.get("text_config") if isinstance(config, dict) else None
    layers = text.get("cross_attention_layers") if isinstance(text, dict) else None
    return len(layers) if isinstance(layers, list) else 0
