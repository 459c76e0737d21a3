"""Nested (multimodal) Hugging Face config.json: a text decoder plus vision / audio towers.

A multimodal `config.json` keeps the language model's keys under `text_config` (Gemma 3,
Qwen3-VL, Mistral 3, Llama 3.2 Vision) or at the top level (Qwen2-VL / Qwen2.5-VL as first
published), and each tower's keys under `vision_config` / `audio_config`. `nested_arch(config)`
reads the text decoder with `hf_config.arch_from_config` and counts each tower's parameters
from its sub-config, layer by layer as the transformers module builds it (cited per tower
below). The result is a `MultimodalArch`: the decoder's `TransformerArch` whose parameter
breakdown also holds the towers (their attention in `attention`, their MLPs, patch embeddings
and projectors in `mlp`, their norms in `norms`, their position tables in
`position_embeddings`), so weights, gradients and optimizer states include them. The KV cache
and the decoder's activations are the text decoder's; a tower's own activations are not
modelled here (each image adds `image_tokens(...)` tokens to the decoder's sequence).

Tower layouts counted exactly: `qwen2_vl` / `qwen2_5_vl` (Qwen2-VL / Qwen2.5-VL vision
transformer + patch merger), `qwen3_vl` (Qwen3-VL: learned position table, deepstack mergers),
`siglip_vision_model` / `clip_vision_model` (Gemma 3, LLaVA), `pixtral` (Mistral 3) and
Whisper-style audio encoders. Any other tower is counted as a plain ViT / encoder from the
common keys and the result says so (`MultimodalArch.approximate`).
"""
from __future__ import annotations

import dataclasses

from ..errors import ScenarioError
from . import pixtral_resize, qwen_resize
from .hf_config import arch_from_config
from .transformer_arch import TransformerArch

SUB_CONFIGS = ("text_config", "vision_config", "audio_config")

# The text decoder's model_type inside a multimodal config -> the model_type whose layout it
# has (transformers: Qwen2_5_VLTextModel / Qwen2VLTextModel use Qwen2 attention with q/k/v
# biases, modeling_qwen2_5_vl.py Qwen2_5_VLAttention; Qwen3VLTextModel is Qwen3 attention with
# q_norm / k_norm, modeling_qwen3_vl.py Qwen3VLTextAttention).
TEXT_MODEL_TYPES = {"qwen2_vl": "qwen2", "qwen2_vl_text": "qwen2", "qwen2_5_vl": "qwen2",
                    "qwen2_5_vl_text": "qwen2", "qwen3_vl": "qwen3", "qwen3_vl_text": "qwen3",
                    # MllamaTextModel: Llama layers (its 8 cross-attention layers add only q/k
                    # norms and two gates each); MllamaTextConfig ties no embeddings by default
                    "mllama": "llama", "mllama_text_model": "llama",
                    # Gemma3Config.sub_configs: text_config is a Gemma3TextConfig
                    "gemma3": "gemma3_text"}

# A text_config stores only what differs from its config class's defaults (google/gemma-3-4b-it
# gives hidden_size, intermediate_size, num_hidden_layers, rope_scaling and sliding_window):
# the defaults of transformers' Gemma3TextConfig.__init__ (models/gemma3/configuration_gemma3.py)
TEXT_DEFAULTS = {"gemma3_text": {
    "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131_072,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "rope_theta": 1_000_000.0,
    "query_pre_attn_scalar": 256, "sliding_window": 4096, "rope_local_base_freq": 10_000.0,
    "sliding_window_pattern": 6}}


def _bad(sub: str, msg: str) -> ScenarioError:
    return ScenarioError(f"architecture.{sub}" if sub else "architecture", msg)


def is_nested(config: object) -> bool:
    """Whether a config.json dict holds sub-configs (text / vision / audio)."""
    return isinstance(config, dict) and any(k in config for k in SUB_CONFIGS)


@dataclasses.dataclass(frozen=True)
class MultimodalArch(TransformerArch):
    """A text decoder with towers: `towers` is ((name, ((part, params), ...)), ...)."""

    towers: tuple = ()
    approximate: tuple = ()   # names of towers counted with the generic layout
    # Llama 3.2 Vision: the text model's `cross_attention_layers` (MllamaCrossAttentionDecoderLayer
    # has no self-attention: its cache holds K / V of the vision tokens, none per text token)
    cross_layers: int = 0

    def kv_bytes_per_token(self, dtype_bytes: float, *, mla_latent: bool = True) -> int:
        """Per text token: the self-attention layers' K and V only (the cross-attention
        layers' K / V over the image tokens are counted per image, vision_inputs.py)."""
        full = super().kv_bytes_per_token(dtype_bytes, mla_latent=mla_latent)
        return full * max(0, self.layers - self.cross_layers) // max(1, self.layers)

    def tower_params(self) -> dict[str, int]:
        return {name: sum(n for _, n in parts) for name, parts in self.towers}

    def param_breakdown(self) -> dict[str, int]:
        out = super().param_breakdown()
        for _, parts in self.towers:
            for part, n in parts:
                out[part] += n
        return out


class _Sub:
    """Typed access to one sub-config; errors name the sub-config and the key."""

    def __init__(self, name: str, cfg: object):
        if not isinstance(cfg, dict):
            raise _bad(name, f"must be an object (a sub-config), got {type(cfg).__name__}")
        self.name, self.cfg = name, cfg

    def int(self, *keys: str, default: int | None = None) -> int:
        for k in keys:
            v = self.cfg.get(k)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > 2**40:
                raise _bad(self.name, f"'{k}' must be a non-negative integer, got {v!r}")
            return v
        if default is None:
            alt = f" (or {', '.join(map(repr, keys[1:]))})" if len(keys) > 1 else ""
            raise _bad(self.name, f"missing key '{keys[0]}'{alt}")
        return default

    def list_len(self, key: str) -> int:
        v = self.cfg.get(key) or []
        if not isinstance(v, list):
            raise _bad(self.name, f"'{key}' must be a list, got {v!r}")
        return len(v)


# ---- towers: parameters by part -------------------------------------------------------------

def _qwen_vl(v: _Sub) -> dict[str, int]:
    """Qwen2-VL / Qwen2.5-VL vision transformer (modeling_qwen2_5_vl.py): Conv3d patch embed
    without bias; per block two RMSNorms (Qwen2-VL: LayerNorms), fused qkv and proj with bias,
    a gated MLP with biases (Qwen2-VL: fc1 / fc2); PatchMerger: norm over the hidden size,
    Linear(4h, 4h) + Linear(4h, out_hidden_size), both with bias."""
    qwen2 = v.cfg.get("model_type") == "qwen2_vl"
    h = v.int("embed_dim" if qwen2 and "embed_dim" in v.cfg else "hidden_size")
    depth, c = v.int("depth"), v.int("in_channels", "in_chans", default=3)
    p, t = v.int("patch_size", "spatial_patch_size"), v.int("temporal_patch_size", default=2)
    m = v.int("spatial_merge_size", default=2) ** 2
    out = v.int("out_hidden_size", "hidden_size")
    if qwen2:  # Qwen2-VL: mlp_ratio x embed_dim fc1 / fc2 with GELU, LayerNorms
        ffn = int(h * v.cfg.get("mlp_ratio", 4))
        mlp, norms = 2 * h * ffn + ffn + h, 4 * h
    else:
        ffn = v.int("intermediate_size")
        mlp, norms = 3 * h * ffn + 2 * ffn + h, 2 * h
    merger = (m * h) ** 2 + m * h + m * h * out + out
    return {"attention": depth * (4 * h * h + 4 * h), "norms": depth * norms + (2 if qwen2 else 1) * h,
            "mlp": depth * mlp + c * t * p * p * h + merger, "position_embeddings": 0}


def _qwen3_vl(v: _Sub) -> dict[str, int]:
    """Qwen3-VL vision model (modeling_qwen3_vl.py Qwen3VLVisionModel): Conv3d patch embed with
    bias, a learned position table of num_position_embeddings rows, LayerNorms, fused qkv / proj
    and fc1 / fc2 with biases; one PatchMerger (LayerNorm over h) and one per
    deepstack_visual_indexes entry (LayerNorm over 4h after the shuffle)."""
    h, depth, ffn = v.int("hidden_size"), v.int("depth"), v.int("intermediate_size")
    c, p = v.int("in_channels", default=3), v.int("patch_size")
    t, m = v.int("temporal_patch_size", default=2), v.int("spatial_merge_size", default=2) ** 2
    out, deep = v.int("out_hidden_size"), v.list_len("deepstack_visual_indexes")
    merger = (m * h) ** 2 + m * h + m * h * out + out
    return {"attention": depth * (4 * h * h + 4 * h),
            "norms": depth * 4 * h + 2 * h + deep * 2 * m * h,
            "mlp": depth * (2 * h * ffn + ffn + h) + c * t * p * p * h + h + (1 + deep) * merger,
            "position_embeddings": v.int("num_position_embeddings") * h}


def _vit(v: _Sub, *, cls_token: bool, patch_bias: bool, pre_norm: bool) -> dict[str, int]:
    """A CLIP / SigLIP vision transformer (modeling_clip.py, modeling_siglip.py): Conv2d patch
    embedding, a learned position table, LayerNorms, q / k / v / out and fc1 / fc2 with
    biases; CLIP adds a class embedding and pre_layrnorm, SigLIP a MAP pooling head when
    vision_use_head (SiglipVisionConfig default True)."""
    h, L, ffn = v.int("hidden_size"), v.int("num_hidden_layers"), v.int("intermediate_size")
    p, c = v.int("patch_size"), v.int("num_channels", default=3)
    grid = (v.int("image_size") // p) ** 2 + (1 if cls_token else 0)
    out = {"attention": L * (4 * h * h + 4 * h), "norms": L * 4 * h + 2 * h,
           "mlp": L * (2 * h * ffn + ffn + h) + c * p * p * h + (h if patch_bias else 0),
           "position_embeddings": grid * h + (h if cls_token else 0)}
    if pre_norm:
        out["norms"] += 2 * h
    if not cls_token and v.cfg.get("vision_use_head", True):  # SigLIP MAP head
        out["attention"] += 4 * h * h + 4 * h
        out["mlp"] += 2 * h * ffn + ffn + h
        out["norms"] += 2 * h
        out["position_embeddings"] += h   # the probe
    return out


def _pixtral(v: _Sub) -> dict[str, int]:
    """Pixtral vision encoder (modeling_pixtral.py): Conv2d patch conv without bias, ln_pre and
    two RMSNorms per layer, q / k / v / o and a gated MLP, all without bias (2-D RoPE: no
    position table)."""
    h, L, ffn = v.int("hidden_size"), v.int("num_hidden_layers"), v.int("intermediate_size")
    p, c = v.int("patch_size"), v.int("num_channels", default=3)
    return {"attention": L * 4 * h * h, "norms": L * 2 * h + h,
            "mlp": L * 3 * h * ffn + c * p * p * h, "position_embeddings": 0}


def _mllama_vision(v: _Sub) -> dict[str, int]:
    """Llama 3.2 Vision's tiled ViT (modeling_mllama.py MllamaVisionModel): Conv2d patch
    embedding without bias, a class embedding, a gated position table of num_patches + 1 rows
    plus a tile table (aspect-ratio ids x max_num_tiles x positions x h), gated pre / post tile
    tables (aspect-ratio ids x max_num_tiles x h), LayerNorms pre and post; num_hidden_layers
    local + num_global_layers gated layers of q/k/v/o without bias, fc1 / fc2 with bias and
    two LayerNorms (the global ones add two scalar gates)."""
    h, ffn = v.int("hidden_size"), v.int("intermediate_size")
    local, glob = v.int("num_hidden_layers"), v.int("num_global_layers")
    p, c, tiles = v.int("patch_size"), v.int("num_channels", default=3), v.int("max_num_tiles")
    ratios = v.list_len("supported_aspect_ratios") + 1   # max_aspect_ratio_id + 1 rows
    pos = (v.int("image_size") // p) ** 2 + 1
    layers = local + glob
    return {"attention": layers * 4 * h * h, "norms": layers * 4 * h + 4 * h,
            "mlp": layers * (2 * h * ffn + ffn + h) + c * p * p * h + 2 * glob,
            "position_embeddings": h + pos * h + 1 + ratios * tiles * pos * h
            + 2 * (ratios * tiles * h + 1)}


def _whisper_encoder(a: _Sub) -> dict[str, int]:
    """A Whisper-style audio encoder (modeling_whisper.py WhisperEncoder): two Conv1d (k=3, with
    bias) from the mel bins, a position table of max_source_positions, per layer q / v / out
    with bias and k without, fc1 / fc2 with bias, two LayerNorms; a final LayerNorm."""
    d, L = a.int("d_model", "hidden_size"), a.int("encoder_layers", "num_hidden_layers")
    ffn, mels = a.int("encoder_ffn_dim", "intermediate_size"), a.int("num_mel_bins", default=128)
    return {"attention": L * (4 * d * d + 3 * d), "norms": L * 4 * d + 2 * d,
            "mlp": L * (2 * d * ffn + ffn + d) + (mels * d * 3 + d) + (d * d * 3 + d),
            "position_embeddings": a.int("max_source_positions", default=1500) * d}


def _generic(s: _Sub) -> dict[str, int]:
    """Any other tower: a pre-norm encoder of `num_hidden_layers` (or depth) layers with biased
    q / k / v / o, fc1 / fc2 and LayerNorms, plus a patch embedding when patch_size is given."""
    h = s.int("hidden_size", "d_model", "embed_dim")
    L = s.int("num_hidden_layers", "depth", "encoder_layers", "num_layers")
    ffn = s.int("intermediate_size", "encoder_ffn_dim", default=4 * h)
    patch = s.int("num_channels", "in_channels", default=3) * s.int("patch_size", default=0) ** 2
    return {"attention": L * (4 * h * h + 4 * h), "norms": L * 4 * h + 2 * h,
            "mlp": L * (2 * h * ffn + ffn + h) + patch * h, "position_embeddings": 0}


TOWERS = {
    "qwen2_vl": _qwen_vl, "qwen2_5_vl": _qwen_vl, "qwen3_vl": _qwen3_vl, "pixtral": _pixtral,
    "siglip_vision_model": lambda v: _vit(v, cls_token=False, patch_bias=True, pre_norm=False),
    "clip_vision_model": lambda v: _vit(v, cls_token=True, patch_bias=False, pre_norm=True),
    "mllama_vision_model": _mllama_vision, "whisper": _whisper_encoder, "qwen2_audio_encoder": _whisper_encoder,
}


def _projector(parent: str, cfg: dict, vision_h: int, text_h: int) -> dict[str, int] | None:
    """The vision-to-text projector a parent model_type adds outside its vision tower; None
    for a parent whose projector is not known (the Qwen-VL mergers are inside the tower)."""
    if parent in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl"):
        return {}
    if parent == "gemma3":  # Gemma3MultiModalProjector: a (vision, text) matrix + RMSNorm
        return {"mlp": vision_h * text_h, "norms": vision_h}
    if parent == "mllama":  # MllamaForConditionalGeneration: Linear(vision_output_dim, text)
        out = _Sub("vision_config", cfg.get("vision_config")).int("vision_output_dim")
        return {"mlp": out * text_h + text_h}
    bias = cfg.get("multimodal_projector_bias", True) is not False
    two = text_h * text_h + (text_h if bias else 0) + (text_h if bias else 0)
    if parent == "llava":   # LlavaMultiModalProjector: linear_1 (vision -> text), linear_2
        return {"mlp": vision_h * text_h + two}
    if parent == "mistral3":  # RMSNorm, PatchMerger Linear(h*m^2, h), linear_1, linear_2
        m = _Sub("", cfg).int("spatial_merge_size", default=2) ** 2
        return {"mlp": m * vision_h * vision_h + vision_h * text_h + two, "norms": vision_h}
    return None


def _audio_projector(parent: str, audio_h: int, text_h: int) -> dict[str, int] | None:
    """Qwen2-Audio's multi_modal_projector: Linear(d_model -> text hidden) with bias
    (modeling_qwen2_audio.py Qwen2AudioMultiModalProjector); None for other parents."""
    if parent == "qwen2_audio":
        return {"mlp": audio_h * text_h + text_h}
    return None


def _tower(name: str, sub: _Sub) -> tuple[dict[str, int], bool]:
    """(params by part, exact?) of one tower sub-config."""
    kind = sub.cfg.get("model_type")
    count = TOWERS.get(kind) if isinstance(kind, str) else None
    return (count(sub), True) if count else (_generic(sub), False)


def _text_config(config: dict) -> dict:
    """The text decoder's keys: `text_config` (with the top level's tie_word_embeddings and
    quantization_config when it has none: the lm_head and the checkpoint's format belong to the
    outer model) or the top level less the sub-configs."""
    if "text_config" in config:
        text = config["text_config"]
        if not isinstance(text, dict):
            raise _bad("text_config", f"must be an object (a sub-config), got "
                                      f"{type(text).__name__}")
        text = dict(text)
        for key in ("tie_word_embeddings", "quantization_config"):  # the outer model's
            if key not in text and key in config:
                text[key] = config[key]
        text.setdefault("model_type", config.get("model_type", "generic"))
    else:
        text = {k: v for k, v in config.items() if k not in SUB_CONFIGS}
    mt = text.get("model_type")
    if isinstance(mt, str) and mt in TEXT_MODEL_TYPES:
        text["model_type"] = TEXT_MODEL_TYPES[mt]
    for key, value in TEXT_DEFAULTS.get(text.get("model_type"), {}).items():
        text.setdefault(key, value)
    return text


def nested_arch(config: dict) -> MultimodalArch:
    """The text decoder of a nested config.json with its towers' parameters. Raises
    ScenarioError('architecture.<sub-config>', ...) naming the sub-config and the key."""
    text_cfg = _text_config(config)
    try:
        text = arch_from_config(text_cfg)
    except ScenarioError as exc:
        where = "text_config" if "text_config" in config else ""
        msg = str(exc).split(": ", 1)[-1]
        if not where:
            msg += (" (a multimodal config.json keeps the text decoder's keys under "
                    "'text_config' or at the top level)")
        raise _bad(where, msg) from None
    towers, approx = [], []
    parent = config.get("model_type", "")
    for name in ("vision_config", "audio_config"):
        if name not in config:
            continue
        sub = _Sub(name, config[name])
        parts, exact = _tower(name, sub)
        width = sub.int("hidden_size", "embed_dim", "d_model")
        proj = _projector(parent, config, width, text.hidden) if name == "vision_config" \
            else _audio_projector(parent, width, text.hidden)
        exact = exact and proj is not None
        for part, n in (proj or {}).items():
            parts[part] = parts.get(part, 0) + n
        towers.append((name.removesuffix("_config"),
                       tuple((p, int(n)) for p, n in parts.items() if n)))
        if not exact:
            approx.append(name.removesuffix("_config"))
    fields = {f.name: getattr(text, f.name) for f in dataclasses.fields(text)}
    cross = text_cfg.get("cross_attention_layers") if parent == "mllama" else None
    return MultimodalArch(**fields, towers=tuple(towers), approximate=tuple(approx),
                          cross_layers=len(cross) if isinstance(cross, list) else 0)


def image_tokens(config: dict, height: int, width: int) -> int:
    """Decoder tokens one image of height x width pixels adds, by the model's patching rule:
    Qwen2/2.5-VL and Qwen3-VL one token per (patch x merge)^2 pixels after rounding each side
    to that multiple and clamping the area (qwen_resize.py); Gemma 3 mm_tokens_per_image (256);
    Pixtral (Mistral 3) one per (patch x merge)^2 plus an [IMG_BREAK] per row, after the
    processor's longest-edge clamp (pixtral_resize.py); CLIP / SigLIP
    towers (LLaVA) one per patch of image_size. Raises ScenarioError for other layouts."""
    v = _Sub("vision_config", config.get("vision_config"))
    parent, kind = config.get("model_type"), v.cfg.get("model_type")
    if kind in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl"):   # smart_resize with its pixel limits
        return qwen_resize.grid(kind, v.int("patch_size", "spatial_patch_size"),
                                v.int("spatial_merge_size", default=2), height, width)[0]
    if parent == "gemma3":
        return _Sub("", config).int("mm_tokens_per_image", default=256)
    if kind == "pixtral":   # the processor's longest-edge clamp first (pixtral_resize.py)
        return pixtral_resize.tokens(height, width, v.int("patch_size"),
                                     _Sub("", config).int("spatial_merge_size", default=2),
                                     v.int("image_size", default=1024))
    if kind in ("clip_vision_model", "siglip_vision_model"):
        return (v.int("image_size") // v.int("patch_size")) ** 2
    raise _bad("vision_config", f"image tokens of a '{kind}' tower are not known")


def nested_note(arch: MultimodalArch) -> str:
    """One line for the notes: the towers counted in the weights, and what is not modelled."""
    towers = ", ".join(f"{name} {n / 1e6:,.0f}M" for name, n in arch.tower_params().items())
    approx = (f"; {', '.join(arch.approximate)} counted with a generic encoder layout "
              f"(its model_type is not one vramplan knows)" if arch.approximate else "")
    return (f"multimodal: the text decoder plus its towers' parameters ({towers}) in the "
            f"weights{approx}; the towers' activations are not modelled: each image adds its "
            f"tokens to seq_len")
