"""Parameter counts of the 2025 diffusers video / image components, from their config.json.

Each function takes the component's config (an object with `.int(key)`, `.ints(key)` and the raw
dict as `.cfg`, as `catalog.pipeline._Cfg` gives) and returns the diffusion family's catalog
entry (`workloads/diffusion`): `kind`, `params` and the shape keys the activation walk reads.
Counted the way the diffusers module builds its parameters, read from huggingface/diffusers
(snapshot 58eb52c, 2026-08-23; files cited per class). `lin(i, o)` is an nn.Linear with bias.

Hand checks (tests/test_catalog_2025_vision_video.py):
- WanTransformer3DModel 1.3B config: 1,418,996,800; 14B: 14,288,491,584.
- AutoencoderKLWan (Wan 2.1 / Qwen-Image VAE, base_dim 96): 126,892,531 (Wan paper: 127M).
- QwenImageTransformer2DModel: 20,430,401,088 (model card: 20B MMDiT).
"""
from __future__ import annotations

import math

from ..errors import ScenarioError
from .hf_config import arch_from_config
from .nested import is_nested, nested_arch


def lin(i: int, o: int) -> int:
    """An nn.Linear(i, o) with bias."""
    return i * o + o


def _conv(i: int, o: int, kernel: tuple) -> int:
    """A convolution with bias over `kernel`."""
    return i * o * math.prod(kernel) + o


# ---- transformers -----------------------------------------------------------------------------

def wan_transformer(c) -> dict:
    """WanTransformer3DModel (diffusers models/transformers/transformer_wan.py), D = heads x
    head_dim: Conv3d patch embedding (in_channels -> D over patch_size); condition embedder:
    time 256 -> D -> D, time_proj D -> 6D, text PixArtAlphaTextProjection text_dim -> D -> D
    (+ an image embedder when image_dim: I2V, not counted here, refused); per WanTransformerBlock
    self-attention and cross-attention (q/k/v/out D -> D with bias, RMSNorm across heads on q and
    k: 2D each), the cross-attention LayerNorm (affine, 2D, when cross_attn_norm), the GELU FFN
    D -> ffn_dim -> D and a 6D scale_shift_table; proj_out D -> out x prod(patch) and a 2D
    scale_shift_table. Text goes in by cross-attention (not joint)."""
    heads, hd, layers = c.int("num_attention_heads"), c.int("attention_head_dim"), c.int("num_layers")
    d, ffn, cin = heads * hd, c.int("ffn_dim"), c.int("in_channels")
    patch = c.ints("patch_size")
    if len(patch) != 3:
        raise ValueError("patch_size")
    if c.cfg.get("image_dim") or c.cfg.get("added_kv_proj_dim") or c.cfg.get("vace_layers"):
        raise KeyError("image_dim")
    text_dim, freq = c.int("text_dim"), c.int("freq_dim", 256)
    embed = _conv(cin, d, tuple(patch)) + lin(freq, d) + lin(d, d) + lin(d, 6 * d) + \
        lin(text_dim, d) + lin(d, d)
    attn = 4 * lin(d, d) + 2 * d
    block = 2 * attn + (2 * d if c.cfg.get("cross_attn_norm", True) else 0) + lin(d, ffn) + \
        lin(ffn, d) + 6 * d
    out = lin(d, (c.cfg.get("out_channels") or cin) * math.prod(patch)) + 2 * d
    total = embed + layers * block + out
    # the per-block scale_shift_table and time_proj are the adaptive-norm terms run once per
    # video, not per token (workloads/diffusion/flops.py)
    per_image = lin(d, 6 * d) + layers * 6 * d
    return {"kind": "wan", "params": total, "hidden": d, "layers": layers, "heads": heads,
            "ffn": ffn, "patch": patch[1], "patch_t": patch[0], "joint_text": False,
            "rope": True, "cross_attention_dim": text_dim, "quantize": True,
            "linear_fraction": 0.999, "layerwise_skip_params": per_image}


def qwenimage_transformer(c, text_tokens: int) -> dict:
    """QwenImageTransformer2DModel (diffusers transformer_qwenimage.py), D = heads x head_dim:
    time embedder 256 -> D -> D, txt_norm RMSNorm(joint_attention_dim), img_in in -> D, txt_in
    joint -> D; per QwenImageTransformerBlock img_mod and txt_mod D -> 6D, joint attention with
    q/k/v, add_q/add_k/add_v, to_out and to_add_out (D -> D with bias), RMSNorm q/k and added
    q/k (head_dim each), GELU MLPs D -> 4D -> D per stream; norm_out D -> 2D, proj_out D ->
    patch^2 x out_channels."""
    heads, hd, layers = c.int("num_attention_heads"), c.int("attention_head_dim"), c.int("num_layers")
    d, p, cin, joint = heads * hd, c.int("patch_size"), c.int("in_channels"), c.int("joint_attention_dim")
    if c.cfg.get("guidance_embeds"):
        raise KeyError("guidance_embeds")
    embed = lin(256, d) + lin(d, d) + joint + lin(cin, d) + lin(joint, d)
    block = 2 * lin(d, 6 * d) + 8 * lin(d, d) + 4 * hd + 2 * (lin(d, 4 * d) + lin(4 * d, d))
    total = embed + layers * block + lin(d, 2 * d) + lin(d, p * p * (c.cfg.get("out_channels") or cin))
    return {"kind": "qwen-image", "params": total, "hidden": d, "layers": layers,
            "heads": heads, "ffn": 4 * d, "patch": p, "joint_text": True,
            "text_tokens": text_tokens, "rope": True, "cross_attention_dim": joint,
            "quantize": True, "linear_fraction": 0.999,
            "layerwise_skip_params": layers * 2 * lin(d, 6 * d) + lin(d, 2 * d)}


def hunyuan_video_transformer(c, text_tokens: int) -> dict:
    """HunyuanVideoTransformer3DModel (diffusers transformer_hunyuan_video.py), D = heads x
    head_dim, text-to-video layout (image_condition_type None): Conv3d patch embedding over
    (patch_t, patch, patch); the token refiner (time 256 -> D -> D, pooled text_embed_dim -> D
    -> D, proj_in text_embed_dim -> D, num_refiner_layers blocks of LayerNorm (affine),
    q/k/v/out with bias, LayerNorm, a linear-SiLU MLP D -> 4D -> D and an AdaNorm D -> 2D);
    the condition embedding (time and guidance 256 -> D -> D, pooled CLIP -> D -> D); double
    blocks as FLUX's (AdaLayerNormZero D -> 6D per stream, q/k/v/out and the added twins with
    bias, RMSNorm q/k per stream, GELU MLPs D -> mlp_ratio D -> D per stream); single blocks
    (AdaLayerNormZeroSingle D -> 3D, q/k/v, RMSNorm q/k, proj_mlp D -> mlp_ratio D, proj_out
    (1 + mlp_ratio) D -> D); norm_out D -> 2D and proj_out D -> patch_t patch^2 out."""
    heads, hd = c.int("num_attention_heads"), c.int("attention_head_dim")
    d, layers, single = heads * hd, c.int("num_layers"), c.int("num_single_layers")
    if c.cfg.get("image_condition_type"):
        raise KeyError("image_condition_type")
    cin, p, pt = c.int("in_channels"), c.int("patch_size"), c.int("patch_size_t", 1)
    m = int(d * float(c.cfg.get("mlp_ratio", 4.0)))
    txt, pooled = c.int("text_embed_dim"), c.int("pooled_projection_dim")
    refiner = 4 * d + 4 * lin(d, d) + lin(d, 4 * d) + lin(4 * d, d) + lin(d, 2 * d)
    context = lin(256, d) + lin(d, d) + lin(txt, d) + lin(d, d) + lin(txt, d) + \
        c.int("num_refiner_layers", 2) * refiner
    cond = (2 if c.cfg.get("guidance_embeds", True) else 1) * (lin(256, d) + lin(d, d)) + \
        lin(pooled, d) + lin(d, d)
    double = 2 * lin(d, 6 * d) + 8 * lin(d, d) + 4 * hd + 2 * (lin(d, m) + lin(m, d))
    one = lin(d, 3 * d) + 3 * lin(d, d) + 2 * hd + lin(d, m) + lin(d + m, d)
    out = lin(d, 2 * d) + lin(d, pt * p * p * (c.cfg.get("out_channels") or cin))
    total = _conv(cin, d, (pt, p, p)) + context + cond + layers * double + single * one + out
    return {"kind": "hunyuan-video", "params": total, "hidden": d, "layers": layers,
            "single_layers": single, "heads": heads, "ffn": m, "patch": p, "patch_t": pt,
            "joint_text": True, "text_tokens": text_tokens, "rope": True,
            "cross_attention_dim": txt, "quantize": True, "linear_fraction": 0.999,
            "layerwise_skip_params": layers * 2 * lin(d, 6 * d) + single * lin(d, 3 * d)
            + lin(d, 2 * d)}


def ltx_video_transformer(c, text_tokens: int) -> dict:
    """LTXVideoTransformer3DModel (diffusers transformer_ltx.py), D = heads x head_dim: proj_in
    in -> D, a 2D scale_shift_table, AdaLayerNormSingle (time 256 -> D -> D, linear D -> 6D),
    caption projection caption_channels -> D -> D; per LTXVideoTransformerBlock self-attention
    (q/k/v/out D -> D, attention_bias / attention_out_bias), cross-attention (q D -> D, k/v
    cross_attention_dim -> D, out), each with RMSNorms across heads on q and k (affine:
    LTXAttention builds them so; the block's own norm1 / norm2 are affine only when
    norm_elementwise_affine), a GELU(tanh) FFN D -> 4D -> D and a 6D scale_shift_table;
    proj_out D -> out. Text goes in by cross-attention. Checked against diffusers 0.42.1's
    module: 1,923,385,472 for the 2B config."""
    heads, hd, layers = c.int("num_attention_heads"), c.int("attention_head_dim"), c.int("num_layers")
    d, cin, cross = heads * hd, c.int("in_channels"), c.int("cross_attention_dim")
    if c.int("patch_size", 1) != 1 or c.int("patch_size_t", 1) != 1:
        raise ValueError("patch_size")
    b_in, b_out = int(bool(c.cfg.get("attention_bias", True))), int(bool(c.cfg.get("attention_out_bias", True)))
    proj = lambda i: i * d + b_in * d   # noqa: E731 - q/k/v projections
    norms = 2 * d if c.cfg.get("norm_elementwise_affine") else 0      # the block's norm1 / norm2
    attn1 = 3 * proj(d) + d * d + b_out * d + 2 * d     # LTXAttention's q / k RMSNorms: affine
    attn2 = proj(d) + 2 * proj(cross) + d * d + b_out * d + 2 * d
    block = attn1 + attn2 + lin(d, 4 * d) + lin(4 * d, d) + 6 * d + norms
    total = lin(cin, d) + 2 * d + lin(256, d) + lin(d, d) + lin(d, 6 * d) + \
        lin(c.int("caption_channels"), d) + lin(d, d) + layers * block + \
        lin(d, c.cfg.get("out_channels") or cin)
    return {"kind": "ltx-video", "params": total, "hidden": d, "layers": layers, "heads": heads,
            "ffn": 4 * d, "patch": 1, "patch_t": 1, "joint_text": False,
            "text_tokens": text_tokens, "rope": True,
            "cross_attention_dim": c.int("caption_channels"), "quantize": True,
            "linear_fraction": 0.999, "layerwise_skip_params": lin(d, 6 * d) + layers * 6 * d}


# ---- VAE ----------------------------------------------------------------------------------------

def _ltx_res(i: int, o: int) -> int:
    """LTXVideoResnetBlock3d (no affine RMSNorms): two 3x3x3 convs; a LayerNorm and a 1x1x1
    shortcut conv when the channels change."""
    k3 = (3, 3, 3)
    return _conv(i, o, k3) + _conv(o, o, k3) + ((2 * i + _conv(i, o, (1, 1, 1))) if i != o else 0)


def ltx_vae(c) -> dict:
    """AutoencoderKLLTXVideo, the 0.9.0 layout (diffusers autoencoder_kl_ltx.py; its defaults
    and Lightricks/LTX-Video's vae/config.json): the input cut into 4 x 4 patches (48
    channels); encoder down blocks of layers_per_block[i] resnets, a stride-2 3x3x3 conv
    where spatio_temporal_scaling, a resnet to the next width; a mid block of
    layers_per_block[-1] resnets; conv_out to latent + 1 (uniform log-variance). The decoder
    mirrors it: conv_in, mid resnets, per up block a resnet to its width, an LTXVideoUpsampler3d
    (3x3x3 conv to 8 x width, depth-to-space over 2 x 2 x 2) and resnets; conv_out to 48.
    No quant convs; latents_mean / std are buffers."""
    if any(k in c.cfg for k in ("down_block_types", "decoder_block_out_channels",
                                "timestep_conditioning", "upsample_factor")):
        if c.cfg.get("timestep_conditioning") or c.cfg.get("decoder_block_out_channels") or \
                any(t != "LTXVideoDownBlock3D" for t in c.cfg.get("down_block_types") or ()):
            raise KeyError("decoder_block_out_channels")
    bo = c.ints("block_out_channels") if "block_out_channels" in c.cfg else [128, 256, 512, 512]
    lpb = c.ints("layers_per_block") if "layers_per_block" in c.cfg else [4, 3, 3, 3, 4]
    st = list(c.cfg.get("spatio_temporal_scaling", [True, True, True, False]))
    z, p = c.int("latent_channels", 128), c.int("patch_size", 4)
    cin, k3 = c.int("in_channels", 3) * p * p, (3, 3, 3)
    enc, out = _conv(cin, bo[0], k3), bo[0]
    for i in range(len(bo)):
        inp, out = out, bo[i + 1] if i + 1 < len(bo) else bo[i]
        enc += lpb[i] * _ltx_res(inp, inp) + (_conv(inp, inp, k3) if st[i] else 0)
        enc += _ltx_res(inp, out) if inp != out else 0
    enc += lpb[-1] * _ltx_res(out, out) + _conv(out, z + 1, k3)
    rb, rs, rl = bo[::-1], st[::-1], lpb[::-1]
    dec, out = _conv(z, rb[0], k3) + rl[0] * _ltx_res(rb[0], rb[0]), rb[0]
    for i in range(len(rb)):
        inp, out = out, rb[i]
        dec += (_ltx_res(inp, out) if inp != out else 0) + (_conv(out, 8 * out, k3) if rs[i] else 0)
        dec += rl[i + 1] * _ltx_res(out, out)
    dec += _conv(rb[-1], cin, k3)
    return {"kind": "kl3d-ltx", "params": enc + dec, "latent_channels": z,
            "decoder_channels": rb, "up_scaling": rs, "decoder_layers": rl,
            "patch": p, "downsample": p * 2 ** sum(1 for t in st if t),
            "temporal_compression": 2 ** sum(1 for t in st if t), "sample_size": 512,
            "attention": False}


def _kl3d_res(i: int, o: int) -> int:
    """HunyuanVideoResnetBlockCausal3D: GroupNorm, causal 3x3x3 conv, GroupNorm, causal conv,
    a 1x1x1 shortcut when the channels change."""
    k3 = (3, 3, 3)
    return 2 * i + _conv(i, o, k3) + 2 * o + _conv(o, o, k3) + (_conv(i, o, (1, 1, 1)) if i != o else 0)


def hunyuan_vae(c) -> dict:
    """AutoencoderKLHunyuanVideo (diffusers autoencoder_kl_hunyuan_video.py): AutoencoderKL's
    layout with causal 3x3x3 convolutions: conv_in, layers_per_block resnets per level and a
    stride-2 causal conv between levels (space, and time on the middle levels), a mid block
    (resnet, one-head attention with GroupNorm and q/k/v/out, resnet), GroupNorm + conv_out to
    2 x latent; the decoder with layers_per_block + 1 resnets and causal upsampling convs;
    1x1x1 quant / post-quant convs."""
    ch, lpb = c.ints("block_out_channels") if "block_out_channels" in c.cfg else [128, 256, 512, 512], \
        c.int("layers_per_block", 2)
    z = c.int("latent_channels", 16)
    if c.int("temporal_compression_ratio", 4) != 4 or c.int("spatial_compression_ratio", 8) != 8:
        raise ValueError("temporal_compression_ratio")
    k3, top = (3, 3, 3), ch[-1]
    mid = 2 * _kl3d_res(top, top) + 2 * top + 4 * lin(top, top)
    enc, prev = _conv(c.int("in_channels", 3), ch[0], k3), ch[0]
    for i, w in enumerate(ch):
        enc += sum(_kl3d_res(prev if j == 0 else w, w) for j in range(lpb))
        enc += _conv(w, w, k3) if i < len(ch) - 1 else 0
        prev = w
    enc += mid + 2 * top + _conv(top, 2 * z, k3)
    dec, prev = _conv(z, top, k3) + mid, top
    for i, w in enumerate(reversed(ch)):
        dec += sum(_kl3d_res(prev if j == 0 else w, w) for j in range(lpb + 1))
        dec += _conv(w, w, k3) if i < len(ch) - 1 else 0
        prev = w
    dec += 2 * ch[0] + _conv(ch[0], c.int("out_channels", 3), k3)
    quant = _conv(2 * z, 2 * z, (1, 1, 1)) + _conv(z, z, (1, 1, 1))
    return {"kind": "kl3d-hunyuan", "params": enc + dec + quant, "latent_channels": z,
            "block_out_channels": ch, "layers_per_block": lpb, "downsample": 8,
            "temporal_compression": 4, "tile_frames": 16, "sample_size": 256, "attention": True}


def _wan_res(i: int, o: int) -> int:
    """WanResidualBlock: RMS_norm (gamma only), causal 3x3x3 conv, RMS_norm, causal conv, a
    1x1x1 shortcut conv when the channels change."""
    k3 = (3, 3, 3)
    return i + _conv(i, o, k3) + o + _conv(o, o, k3) + (_conv(i, o, (1, 1, 1)) if i != o else 0)


def _wan_mid(d: int) -> int:
    """WanMidBlock: resnet, attention (RMS_norm, 1x1 conv to qkv, 1x1 proj), resnet."""
    return 2 * _wan_res(d, d) + d + _conv(d, 3 * d, (1, 1)) + _conv(d, d, (1, 1))


def wan_vae(c) -> dict:
    """AutoencoderKLWan / AutoencoderKLQwenImage (diffusers autoencoder_kl_wan.py,
    autoencoder_kl_qwenimage.py; the Wan 2.1 layout, is_residual false): encoder dims
    base x [1] + dim_mult, num_res_blocks resnets per level, a stride-2 Conv2d (+ a (3,1,1)
    causal time conv where temperal_downsample) between levels, mid block, RMS_norm + conv to
    2 x z; quant / post-quant 1x1x1 convs; decoder dims base x [last] + reversed(dim_mult), the
    input of every level after the first halved (the upsamplers' Conv2d outputs dim // 2),
    num_res_blocks + 1 resnets, upsample2d / upsample3d (+ a (3,1,1) time conv to 2 x dim)."""
    if c.cfg.get("is_residual"):
        return wan22_vae(c)
    if c.cfg.get("patch_size") or c.cfg.get("attn_scales"):
        raise KeyError("patch_size")
    base, z, nrb = c.int("base_dim", 96), c.int("z_dim", 16), c.int("num_res_blocks", 2)
    mult = c.ints("dim_mult") if "dim_mult" in c.cfg else [1, 2, 4, 4]
    td = list(c.cfg.get("temperal_downsample", [False, True, True]))
    if len(td) != len(mult) - 1:
        raise ValueError("temperal_downsample")
    dims = [base * u for u in [1] + mult]
    enc = _conv(3, dims[0], (3, 3, 3))
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        for _ in range(nrb):
            enc, a = enc + _wan_res(a, b), b
        if i != len(mult) - 1:
            enc += _conv(b, b, (3, 3)) + (_conv(b, b, (3, 1, 1)) if td[i] else 0)
    top = dims[-1]
    enc += _wan_mid(top) + top + _conv(top, 2 * z, (3, 3, 3))
    quant = _conv(2 * z, 2 * z, (1, 1, 1)) + _conv(z, z, (1, 1, 1))
    dd = [base * u for u in [mult[-1]] + mult[::-1]]
    tu = td[::-1]
    dec = _conv(z, dd[0], (3, 3, 3)) + _wan_mid(dd[0])
    for i, (a, b) in enumerate(zip(dd[:-1], dd[1:])):
        a = a // 2 if i else a
        for _ in range(nrb + 1):
            dec, a = dec + _wan_res(a, b), b
        if i != len(mult) - 1:
            dec += _conv(b, b // 2, (3, 3)) + (_conv(b, 2 * b, (3, 1, 1)) if tu[i] else 0)
    dec += dd[-1] + _conv(dd[-1], 3, (3, 3, 3))
    return {"kind": "kl3d-wan", "params": enc + quant + dec, "latent_channels": z,
            "block_out_channels": dd[1:], "decoder_in_channels": dd[0],
            "layers_per_block": nrb, "downsample": 2 ** (len(mult) - 1),
            "temporal_compression": 2 ** sum(1 for t in td if t), "temporal_upsample": tu,
            "sample_size": 256, "attention": True}


def wan22_vae(c) -> dict:
    """AutoencoderKLWan with is_residual (the Wan 2.2 VAE; diffusers autoencoder_kl_wan.py): the
    input cut into patch_size x patch_size patches (in_channels 12); encoder levels of
    WanResidualDownBlock (num_res_blocks resnets, a WanResample down where not the last, a
    parameter-free AvgDown3D shortcut); the decoder (decoder_base_dim) of WanResidualUpBlock
    (num_res_blocks + 1 resnets, WanResample up to the full width, a parameter-free DupUp3D
    shortcut), widths not halved; quant / post-quant 1x1x1 convs."""
    base, z, nrb = c.int("base_dim"), c.int("z_dim"), c.int("num_res_blocks", 2)
    dbase, p = c.int("decoder_base_dim", base), c.int("patch_size")
    mult = c.ints("dim_mult") if "dim_mult" in c.cfg else [1, 2, 4, 4]
    td = list(c.cfg.get("temperal_downsample", [False, True, True]))
    if len(td) != len(mult) - 1 or c.cfg.get("attn_scales"):
        raise ValueError("temperal_downsample")
    k3 = (3, 3, 3)
    dims = [base * u for u in [1] + mult]
    enc = _conv(c.int("in_channels", 3 * p * p), dims[0], k3)
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        for _ in range(nrb):
            enc, a = enc + _wan_res(a, b), b
        if i != len(mult) - 1:
            enc += _conv(b, b, (3, 3)) + (_conv(b, b, (3, 1, 1)) if td[i] else 0)
    enc += _wan_mid(dims[-1]) + dims[-1] + _conv(dims[-1], 2 * z, k3)
    dd, tu = [dbase * u for u in [mult[-1]] + mult[::-1]], td[::-1]
    dec = _conv(z, dd[0], k3) + _wan_mid(dd[0])
    for i, (a, b) in enumerate(zip(dd[:-1], dd[1:])):
        for _ in range(nrb + 1):
            dec, a = dec + _wan_res(a, b), b
        if i != len(mult) - 1:
            dec += _conv(b, b, (3, 3)) + (_conv(b, 2 * b, (3, 1, 1)) if tu[i] else 0)
    dec += dd[-1] + _conv(dd[-1], c.int("out_channels", 3 * p * p), k3)
    quant = _conv(2 * z, 2 * z, (1, 1, 1)) + _conv(z, z, (1, 1, 1))
    return {"kind": "kl3d-wan", "params": enc + quant + dec, "latent_channels": z,
            "block_out_channels": dd[1:], "decoder_in_channels": dd[0], "residual": True,
            "layers_per_block": nrb, "downsample": p * 2 ** (len(mult) - 1),
            "temporal_compression": 2 ** sum(1 for t in td if t), "temporal_upsample": tu,
            "sample_size": 256, "attention": True}


# ---- text encoders ------------------------------------------------------------------------------

def umt5_encoder(c, max_tokens: int) -> dict:
    """UMT5EncoderModel (transformers models/umt5/modeling_umt5.py): the shared embedding, per
    layer q/k/v/o without bias, its own relative position bias (buckets x heads: UMT5 gives
    every layer one, unlike T5's first layer only), a gated FFN and two RMSNorms; a final
    RMSNorm."""
    d, layers, ffn = c.int("d_model"), c.int("num_layers"), c.int("d_ff")
    heads, dkv, vocab = c.int("num_heads"), c.int("d_kv", 64), c.int("vocab_size")
    gated = bool(c.cfg.get("is_gated_act")) or str(c.cfg.get("feed_forward_proj", "")).startswith("gated")
    per = 4 * d * heads * dkv + (3 if gated else 2) * d * ffn + 2 * d + \
        c.int("relative_attention_num_buckets", 32) * heads
    return {"kind": "t5-encoder", "params": vocab * d + layers * per + d, "hidden": d,
            "layers": layers, "heads": heads, "head_dim": dkv, "ffn": ffn, "gated": gated,
            "max_tokens": max_tokens, "quantize": True, "embedding_params": vocab * d}


def llm_encoder(c, max_tokens: int, lm_head: bool) -> dict:
    """A decoder LLM whose hidden states are the prompt embedding: Qwen-Image's
    Qwen2_5_VLForConditionalGeneration (its vision tower and lm_head loaded too: the nested
    config's count, catalog/nested.py) or HunyuanVideo's LlamaModel (no lm_head: the untied
    vocab x hidden head taken off the causal-LM count of catalog/hf_config.py)."""
    try:
        arch = nested_arch(c.cfg) if is_nested(c.cfg) else arch_from_config(c.cfg)
    except ScenarioError as exc:
        raise ScenarioError(c.where, str(exc)) from exc
    n = arch.param_count() - (0 if lm_head or arch.tied_embeddings else arch.vocab * arch.hidden)
    return {"kind": "llm-encoder", "params": n, "hidden": arch.hidden, "layers": arch.layers,
            "heads": arch.heads, "ffn": arch.ffn, "gated": True, "max_tokens": max_tokens,
            "quantize": True, "embedding_params": arch.vocab * arch.hidden}
