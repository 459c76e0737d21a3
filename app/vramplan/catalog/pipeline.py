"""An inline diffusers pipeline: `model_index.json` plus its components' `config.json`s, read
into the diffusion family's catalog config (workloads/diffusion, catalog/data/diffusion.json).

The scenario's `architecture` is the pipeline's model_index.json (its `_class_name` ends in
`Pipeline`; each component is a `[library, class]` pair) with one more key, `configs`: the
config.json of each component by name (`transformer`, `vae`, `text_encoder`, ...). Each
component's parameters are counted from its config the way its diffusers / transformers module
builds them (cited per class below); the sampling defaults are the pipeline's `__call__`
defaults. Known today: FluxPipeline, FluxKontextPipeline, StableDiffusion3Pipeline,
WanPipeline, QwenImagePipeline, HunyuanVideoPipeline and LTXPipeline (the component classes
the refusal message lists; the 2025 ones counted in pipeline_video.py); other pipelines or
component classes are refused with a message naming them.
"""
from __future__ import annotations

from ..errors import ScenarioError
from . import pipeline_video as V

# diffusers FluxPipeline.__call__ defaults (pipelines/flux/pipeline_flux.py): height = width =
# default_sample_size (128) x vae_scale_factor (8) = 1024, num_inference_steps 28,
# max_sequence_length 512; no classifier-free guidance batch (guidance-distilled: the scale is
# an input of the transformer, true_cfg_scale defaults to 1.0)
PIPELINES = {"FluxPipeline": {"denoiser": "transformer", "guidance": "distilled",
                              "default_resolution": [1024, 1024], "default_steps": 28,
                              "t5_max_tokens": 512},
             # StableDiffusion3Pipeline.__call__ (pipeline_stable_diffusion_3.py): 1024 x 1024
             # (128 x 8), 28 steps, guidance_scale 7.0 (CFG), max_sequence_length 256
             "StableDiffusion3Pipeline": {"denoiser": "transformer", "guidance": "cfg",
                                          "default_resolution": [1024, 1024],
                                          "default_steps": 28, "t5_max_tokens": 256,
                                          "clip_tokens": 77},
             # WanPipeline.__call__ (pipelines/wan/pipeline_wan.py): 480 x 832, 81 frames, 50
             # steps, guidance_scale 5.0 run as two transformer calls per step (cond, then
             # uncond: not a doubled batch), max_sequence_length 512; Wan 2.2 A14B adds
             # transformer_2 (the low-noise expert; both resident)
             "WanPipeline": {"denoiser": "transformer", "guidance": "cfg-sequential",
                             "video": True, "default_resolution": [480, 832],
                             "default_frames": 81, "default_steps": 50, "t5_max_tokens": 512},
             # FluxKontextPipeline.__call__ (pipeline_flux_kontext.py): the FLUX defaults (28
             # steps, guidance-distilled, max_sequence_length 512); the reference image's packed
             # latents are concatenated to the sequence (torch.cat([latents, image_latents],
             # dim=1)), the reference auto-resized to a preferred Kontext size (1024 x 1024
             # among them)
             "FluxKontextPipeline": {"denoiser": "transformer", "guidance": "distilled",
                                     "default_resolution": [1024, 1024], "default_steps": 28,
                                     "t5_max_tokens": 512, "reference_image": True},
             # QwenImagePipeline.__call__ (pipelines/qwenimage/pipeline_qwenimage.py): 1024 x
             # 1024, 50 steps, max_sequence_length 512 after the 34-token template drop, true
             # CFG (a second call) only with a negative prompt
             "QwenImagePipeline": {"denoiser": "transformer", "guidance": "cfg-sequential",
                                   "guidance_default": False, "default_resolution": [1024, 1024],
                                   "default_steps": 50, "llm_max_tokens": 512,
                                   "text_tokens": 512},
             # HunyuanVideoPipeline.__call__ (pipeline_hunyuan_video.py): 720 x 1280, 129 frames,
             # 50 steps, embedded guidance (true_cfg_scale 1.0), max_sequence_length 256 + the
             # template's crop_start 95 through the Llama encoder, 256 reach the transformer
             "HunyuanVideoPipeline": {"denoiser": "transformer", "guidance": "distilled",
                                      "video": True, "default_resolution": [720, 1280],
                                      "default_frames": 129, "default_steps": 50,
                                      "llm_max_tokens": 351, "text_tokens": 256},
             # LTXPipeline.__call__ (pipelines/ltx/pipeline_ltx.py): 512 x 704, 161 frames, 50
             # steps, guidance_scale 3 on a doubled batch, max_sequence_length 128
             "LTXPipeline": {"denoiser": "transformer", "guidance": "cfg", "video": True,
                             "default_resolution": [512, 704], "default_frames": 161,
                             "default_steps": 50, "t5_max_tokens": 128, "text_tokens": 128}}

# T5 'wo' stays out of quantisation (transformers T5 _keep_in_fp32_modules): fp32 under
# bitsandbytes 4-bit, the compute dtype under int8 - as catalog/data/diffusion.json records
T5_KEEP_BYTES = {"nf4": 4, "int4": 4, "int8": 2}


def _bad(sub: str, msg: str) -> ScenarioError:
    return ScenarioError(f"architecture.{sub}" if sub else "architecture", msg)


def is_pipeline(config: object) -> bool:
    """Whether an inline architecture is a diffusers model_index.json."""
    name = config.get("_class_name") if isinstance(config, dict) else None
    return isinstance(name, str) and name.endswith("Pipeline")


class _Cfg:
    def __init__(self, where: str, cfg: object):
        if not isinstance(cfg, dict):
            raise _bad(where, f"must be an object (the component's config.json), got "
                              f"{type(cfg).__name__}")
        self.where, self.cfg = where, cfg

    def int(self, key: str, default: int | None = None) -> int:
        v = self.cfg.get(key, default)
        if v is None:
            raise _bad(self.where, f"missing key '{key}'")
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= 2**40:
            raise _bad(self.where, f"'{key}' must be a positive integer, got {v!r}")
        return v

    def ints(self, key: str) -> list[int]:
        v = self.cfg.get(key)
        if not isinstance(v, list) or not v or not all(
                isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v):
            raise _bad(self.where, f"'{key}' must be a list of positive integers, got {v!r}")
        return v


# ---- components -----------------------------------------------------------------------------

def flux_transformer(c: _Cfg) -> dict:
    """FluxTransformer2DModel (diffusers transformer_flux.py), D = heads x head_dim: time (and
    guidance) embedders 256 -> D -> D, pooled text embedder, context / x embedders; per double
    block AdaLayerNormZero x2 (D -> 6D), q/k/v/out and their added-stream twins with bias,
    RMSNorm q/k per stream, two GELU MLPs D -> 4D -> D; per single block AdaLayerNormZeroSingle
    (D -> 3D), q/k/v, proj_mlp D -> 4D, proj_out 5D -> D; norm_out D -> 2D and proj_out."""
    heads, hd = c.int("num_attention_heads"), c.int("attention_head_dim")
    d, layers, single = heads * hd, c.int("num_layers"), c.int("num_single_layers")
    cin, joint = c.int("in_channels"), c.int("joint_attention_dim")
    pooled, patch = c.int("pooled_projection_dim"), c.int("patch_size", 1)
    out_ch = c.cfg.get("out_channels") or cin
    emb = lambda i, o: i * o + o   # noqa: E731 - a Linear with bias
    time = emb(256, d) + emb(d, d)
    embed = time * (2 if c.cfg.get("guidance_embeds", True) else 1) + emb(pooled, d) + \
        emb(d, d) + emb(joint, d) + emb(cin, d)
    double = 2 * emb(d, 6 * d) + 8 * emb(d, d) + 4 * hd + 2 * (emb(d, 4 * d) + emb(4 * d, d))
    one = emb(d, 3 * d) + emb(d, 4 * d) + emb(5 * d, d) + 3 * emb(d, d) + 2 * hd
    total = embed + layers * double + single * one + emb(d, 2 * d) + emb(d, patch * patch * out_ch)
    skip = layers * 2 * emb(d, 6 * d) + single * emb(d, 3 * d) + emb(d, 2 * d)
    return {"kind": "flux", "params": total, "hidden": d, "layers": layers,
            "single_layers": single, "heads": heads, "ffn": 4 * d, "patch": 2,
            "joint_text": True, "rope": True, "quantize": True, "linear_fraction": 0.999,
            "layerwise_skip_params": skip}


def sd3_transformer(c: _Cfg, text_tokens: int) -> dict:
    """SD3Transformer2DModel (diffusers transformer_sd3.py), D = heads x head_dim: patch Conv2d
    with bias (the position table is a buffer), time embedder 256 -> D -> D, pooled text
    embedder, context embedder joint -> caption_projection_dim; per JointTransformerBlock
    AdaLayerNormZero x2 (D -> 6D; the last block's context norm D -> 2D and no context
    output / MLP), q/k/v/out and the added-stream twins with bias, RMSNorm q/k per stream when
    qk_norm, GELU MLPs D -> 4D -> D; dual-attention blocks (SD3.5 MMDiT-X) a 9D norm and a
    second attention; norm_out D -> 2D, proj_out D -> patch^2 x out_channels."""
    heads, hd, layers = c.int("num_attention_heads"), c.int("attention_head_dim"), c.int("num_layers")
    d, p, cin = heads * hd, c.int("patch_size"), c.int("in_channels")
    cap = c.int("caption_projection_dim")
    emb = lambda i, o: i * o + o   # noqa: E731 - a Linear with bias
    qk = 2 * hd if c.cfg.get("qk_norm") else 0
    dual = set(c.cfg.get("dual_attention_layers") or ())
    total = cin * p * p * d + d + emb(256, d) + emb(d, d) + emb(c.int("pooled_projection_dim"), d)
    total += emb(d, d) + emb(c.int("joint_attention_dim"), cap)
    for i in range(layers):
        last = i == layers - 1
        block = emb(d, 9 * d if i in dual else 6 * d) + (emb(d, 2 * d) if last else emb(d, 6 * d))
        block += (7 if last else 8) * emb(d, d) + 2 * qk + (1 if last else 2) * (
            emb(d, 4 * d) + emb(4 * d, d))
        if i in dual:
            block += 4 * emb(d, d) + qk
        total += block
    total += emb(d, 2 * d) + emb(d, p * p * (c.cfg.get("out_channels") or cin))
    return {"kind": "mmdit", "params": total, "hidden": d, "layers": layers, "heads": heads,
            "ffn": 4 * d, "patch": p, "joint_text": True, "text_tokens": text_tokens,
            "rope": False, "quantize": True, "linear_fraction": 0.99}


def _resnet(cin: int, cout: int) -> int:
    """diffusers ResnetBlock2D without time embedding: GroupNorm, 3x3 conv, GroupNorm, 3x3 conv,
    a 1x1 shortcut when the channels change."""
    n = 2 * cin + 9 * cin * cout + cout + 2 * cout + 9 * cout * cout + cout
    return n + (cin * cout + cout if cin != cout else 0)


def autoencoder_kl(c: _Cfg) -> dict:
    """AutoencoderKL (diffusers autoencoder_kl.py, vae.py Encoder / Decoder): conv_in, down
    blocks of layers_per_block resnets (+ a stride-2 conv but the last), a mid block (two
    resnets around a one-head attention with GroupNorm), GroupNorm + conv_out to 2 x latent;
    the decoder mirrors it with layers_per_block + 1 resnets and upsampling convs; the 1x1
    quant / post-quant convs when use_quant_conv / use_post_quant_conv (default true)."""
    ch, lpb = c.ints("block_out_channels"), c.int("layers_per_block", 1)
    z, cin, cout = c.int("latent_channels", 4), c.int("in_channels", 3), c.int("out_channels", 3)
    conv = lambda i, o, k=3: k * k * i * o + o   # noqa: E731
    top = ch[-1]
    mid = 2 * _resnet(top, top) + 2 * top + 4 * (top * top + top)
    enc, prev = conv(cin, ch[0]), ch[0]
    for i, w in enumerate(ch):
        enc += sum(_resnet(prev if j == 0 else w, w) for j in range(lpb))
        enc += conv(w, w) if i < len(ch) - 1 else 0
        prev = w
    enc += mid + 2 * top + conv(top, 2 * z)
    dec, prev = conv(z, top) + mid, top
    for i, w in enumerate(reversed(ch)):
        dec += sum(_resnet(prev if j == 0 else w, w) for j in range(lpb + 1))
        dec += conv(w, w) if i < len(ch) - 1 else 0
        prev = w
    dec += 2 * ch[0] + conv(ch[0], cout)
    quant = (conv(2 * z, 2 * z, 1) if c.cfg.get("use_quant_conv", True) else 0) + \
        (conv(z, z, 1) if c.cfg.get("use_post_quant_conv", True) else 0)
    return {"kind": "kl2d", "params": enc + dec + quant, "latent_channels": z,
            "block_out_channels": ch, "layers_per_block": lpb, "downsample": 2 ** (len(ch) - 1),
            "sample_size": c.int("sample_size", 512), "attention": True}


def clip_text(c: _Cfg, projection: bool) -> dict:
    """CLIPTextModel (transformers modeling_clip.py): token and position tables, per layer
    q/k/v/out and fc1/fc2 with bias and two LayerNorms, a final LayerNorm; WithProjection adds
    text_projection (hidden x projection_dim, no bias)."""
    h, L, ffn = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("intermediate_size")
    pos = c.int("max_position_embeddings")
    n = c.int("vocab_size") * h + pos * h + L * (4 * h * h + 4 * h + 4 * h + 2 * h * ffn + ffn
                                                  + h) + 2 * h
    if projection:
        n += h * c.int("projection_dim")
    return {"kind": "clip-text", "params": n, "hidden": h, "layers": L,
            "heads": c.int("num_attention_heads"), "ffn": ffn, "max_tokens": pos,
            "quantize": False}


def t5_encoder(c: _Cfg, max_tokens: int) -> dict:
    """T5EncoderModel (transformers modeling_t5.py): shared embedding, per layer q/k/v/o without
    bias (heads x d_kv wide), a gated (or plain) FFN and two RMSNorms, the relative position
    bias of the first layer, a final RMSNorm."""
    d, L, ffn = c.int("d_model"), c.int("num_layers"), c.int("d_ff")
    heads, dkv = c.int("num_heads"), c.int("d_kv", 64)
    gated = str(c.cfg.get("feed_forward_proj", "relu")).startswith("gated")
    vocab = c.int("vocab_size")
    n = vocab * d + L * (4 * d * heads * dkv + (3 if gated else 2) * d * ffn + 2 * d) + \
        c.int("relative_attention_num_buckets", 32) * heads + d
    return {"kind": "t5-encoder", "params": n, "hidden": d, "layers": L, "heads": heads,
            "head_dim": dkv, "ffn": ffn, "gated": gated, "max_tokens": max_tokens,
            "quantize": True, "embedding_params": vocab * d,
            "keep_in_fp32": {"params": L * ffn * d, "bytes_by_format": dict(T5_KEEP_BYTES)}}


def _video_component(cls: str, cfg: _Cfg, defaults: dict) -> dict | None:
    """The 2025 component classes (catalog/pipeline_video.py); None for other classes. A config
    those counters cannot read (an I2V image embedder, the Wan 2.2 residual VAE) is refused."""
    tokens = defaults.get("text_tokens", 0)
    counters = {"WanTransformer3DModel": V.wan_transformer,
                "QwenImageTransformer2DModel": lambda c: V.qwenimage_transformer(c, tokens),
                "HunyuanVideoTransformer3DModel": lambda c: V.hunyuan_video_transformer(c, tokens),
                "LTXVideoTransformer3DModel": lambda c: V.ltx_video_transformer(c, tokens),
                "AutoencoderKLWan": V.wan_vae, "AutoencoderKLQwenImage": V.wan_vae,
                "AutoencoderKLHunyuanVideo": V.hunyuan_vae, "AutoencoderKLLTXVideo": V.ltx_vae,
                "UMT5EncoderModel": lambda c: V.umt5_encoder(c, defaults["t5_max_tokens"]),
                "Qwen2_5_VLForConditionalGeneration":
                    lambda c: V.llm_encoder(c, defaults["llm_max_tokens"], lm_head=True),
                "LlamaModel": lambda c: V.llm_encoder(c, defaults["llm_max_tokens"], lm_head=False)}
    if cls not in counters:
        return None
    try:
        return counters[cls](cfg)
    except (KeyError, ValueError) as e:
        raise _bad(cfg.where, f"{cls} with '{e.args[0]}' as given is a variant vramplan does "
                              f"not count (text-to-video / text-to-image layouts only)") from e


def _component(name: str, cls: str, cfg: _Cfg, defaults: dict) -> dict | None:
    """The diffusion-family entry of one component; None for parameter-free ones."""
    video = _video_component(cls, cfg, defaults)
    if video is not None:
        return video
    if cls == "FluxTransformer2DModel":
        return flux_transformer(cfg)
    if cls == "SD3Transformer2DModel":
        return sd3_transformer(cfg, defaults["clip_tokens"] + defaults["t5_max_tokens"])
    if cls == "AutoencoderKL":
        return autoencoder_kl(cfg)
    if cls in ("CLIPTextModel", "CLIPTextModelWithProjection"):
        return clip_text(cfg, cls.endswith("Projection"))
    if cls == "T5EncoderModel":
        return t5_encoder(cfg, defaults["t5_max_tokens"])
    raise _bad(f"configs.{name}", f"component class '{cls}' is not one vramplan can count "
                                  f"(FluxTransformer2DModel, SD3Transformer2DModel, "
                                  f"WanTransformer3DModel, QwenImageTransformer2DModel, "
                                  f"HunyuanVideoTransformer3DModel, LTXVideoTransformer3DModel, "
                                  f"AutoencoderKL, AutoencoderKLWan, AutoencoderKLQwenImage, "
                                  f"AutoencoderKLHunyuanVideo, AutoencoderKLLTXVideo, "
                                  f"CLIPTextModel, CLIPTextModelWithProjection, T5EncoderModel, "
                                  f"UMT5EncoderModel, Qwen2_5_VLForConditionalGeneration, "
                                  f"LlamaModel)")


NO_PARAMS = ("tokenizer", "tokenizer_2", "tokenizer_3", "scheduler", "feature_extractor")


def pipeline_config(index: dict) -> dict:
    """The diffusion family's catalog config of an inline pipeline (see the module docstring).
    Raises ScenarioError('architecture[.configs.<component>]', ...) naming what is wrong."""
    name = index["_class_name"]
    if name not in PIPELINES:
        raise _bad("_class_name", f"pipeline '{name}' is not one vramplan can read; known: "
                                  f"{', '.join(sorted(PIPELINES))}")
    defaults = PIPELINES[name]
    configs = index.get("configs")
    if not isinstance(configs, dict):
        raise _bad("configs", "missing: give each component's config.json by name, e.g. "
                              "{\"transformer\": {...}, \"vae\": {...}, \"text_encoder\": {...}}")
    comps = {}
    for comp, entry in index.items():
        if comp.startswith("_") or comp == "configs" or comp in NO_PARAMS:
            continue
        if not (isinstance(entry, list) and len(entry) == 2):
            raise _bad(comp, f"must be a [library, class] pair as in model_index.json, got "
                             f"{entry!r}")
        if entry[1] is None:   # an optional component the pipeline ships without
            continue
        if comp not in configs:
            raise _bad(f"configs.{comp}", f"missing: the config.json of '{comp}' ({entry[1]})")
        comps[comp] = _component(comp, str(entry[1]), _Cfg(f"configs.{comp}", configs[comp]),
                                 defaults)
    for need in (defaults["denoiser"], "vae"):
        if need not in comps:
            raise _bad(need, f"the pipeline has no '{need}' component")
    out = {"pipeline": name, "denoiser": defaults["denoiser"], "guidance": defaults["guidance"],
           "default_resolution": list(defaults["default_resolution"]),
           "default_steps": defaults["default_steps"], "components": comps}
    if defaults.get("video"):
        out.update(video=True, default_frames=defaults["default_frames"])
    for key in ("reference_image", "guidance_default"):
        if key in defaults:
            out[key] = defaults[key]
    return out
