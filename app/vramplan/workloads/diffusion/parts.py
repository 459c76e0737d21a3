"""Live activation bytes of each diffusion pipeline component, walked op by op (inference).

What: closed forms for the transient memory of one text-encoder forward, one denoiser step
(U-Net or DiT/MMDiT) and one VAE decode, in bytes, from the catalog's component configs
(`catalog/data/diffusion.json`). Why a walk and not a factor: the peak of a diffusion pipeline
moves between phases with resolution, dtype and attention kernel (SD1.5 at 512 px peaks in the
U-Net's eager attention scores; SDXL at 1024 px in the VAE decoder; CogVideoX in its 3-D VAE),
so each phase is computed from the tensors diffusers keeps alive and the estimate takes the max.

Conventions (diffusers eager code, no autograd):
- A module's input stays alive while it runs (the caller holds it), so a ResnetBlock2D holds
  x + GroupNorm(x) + SiLU(...) = 3 inputs' worth, and `(x + h) / scale` briefly needs 4.
- Eager attention (AttnProcessor): `baddbmm` into an empty buffer, then softmax: 2 score
  matrices live; the VAE's attention upcasts the softmax to fp32 (upcast_softmax=True).
  SDPA/flash: no score matrix (the VAE's head_dim 512 runs the mem-efficient kernel).
- cuDNN convolution workspace: assumed the size of the convolution's output (an NCHW <-> NHWC
  transform); stated, not measured here.
"""
from __future__ import annotations

import math

from ...vec import is_array, to_int, truth, vmax, where
from .cogvideox_vae import cogvideox_decode

# ---------------------------------------------------------------------------------------------
# text encoders


def text_encoder_bytes(cfg: dict, batch: int, tokens: int, e: int) -> int:
    """One forward of a CLIP / T5 text encoder over `batch` prompts of `tokens` tokens."""
    h, f, heads = cfg["hidden"], cfg["ffn"], cfg["heads"]
    per_tok = 4 * h + (3 if cfg.get("gated") else 2) * f      # residual, norm, qkv, ffn (+gate)
    act = batch * tokens * per_tok * e
    # T5 (transformers) runs eager attention with an fp32 softmax + position bias: ~3 matrices
    scores = batch * heads * tokens * tokens * (3 * 4 if cfg["kind"] == "t5-encoder" else 2 * e)
    out = batch * tokens * h * e * 2                            # hidden states returned
    return to_int(act + scores + out)


# ---------------------------------------------------------------------------------------------
# denoisers


def _unet_resnet(cin: int, cout: int) -> int:
    """Peak of a ResnetBlock2D over its (caller-held) input, in bytes of the same unit: norm1 +
    SiLU of the input, conv1, then `(shortcut(x) + h) / scale` holding the shortcut, h, the sum
    and the quotient (the input itself when there is no shortcut, already held)."""
    return vmax(2 * cin, cin + cout, 3 * cout + (cout if truth(cin != cout) else 0))


def _unet_transformer(u: int, scores: int, cross: int) -> int:
    """Peak of a Transformer2DModel over its held input (the residual), per BasicTransformerBlock:
    the block input (held by the Transformer2D loop) + the residual stream + norm3 + GEGLU (8c
    projection, gelu of its half 4c, the product 4c) = 19c per token; eager self-attention: block
    input, norm1, q/k/v (head_to_batch_dim copies) + 2 score matrices (baddbmm into an empty
    buffer, then softmax); cross-attention likewise with the text tokens."""
    return vmax(19 * u, 5 * u + 2 * scores, 5 * u + 2 * cross, 3 * u)


class _UNetWalk:
    """The running peak and largest tensor of one UNet2DConditionModel forward (unet_step):
    level sizes, the tensor unit of a level and the transformer blocks' working set."""

    def __init__(self, cfg: dict, b: int, lat_h: int, lat_w: int, text_tokens: int, e: int,
                 eager: bool):
        self.chans, self.attn, self.heads = (cfg["block_out_channels"], cfg["attention_levels"],
                                             cfg["heads"])
        self.lpb = cfg.get("layers_per_block", 2)
        self.b, self.e, self.eager, self.text_tokens = b, e, eager, text_tokens
        ns, hh, ww = [], lat_h, lat_w
        for _ in self.chans:                                    # conv stride 2, padding 1: ceil
            ns.append(hh * ww)
            hh, ww = (hh + 1) // 2, (ww + 1) // 2
        self.ns = ns
        self.peak = self.largest = 0

    def unit(self, lvl: int, c: int):
        return self.b * (self.ns[lvl] * c * self.e)   # ints: one array product

    def transformer(self, lvl: int, depth_attn: bool) -> int:
        b, ns, e, heads = self.b, self.ns, self.e, self.heads
        u = self.unit(lvl, self.chans[lvl])
        if not depth_attn:
            return 0
        s = b * heads[lvl] * ns[lvl] * ns[lvl] * e if self.eager else 0
        x = b * heads[lvl] * ns[lvl] * self.text_tokens * e if self.eager else 0
        self.largest = vmax(self.largest, where(s, s, 8 * u))   # s or 8u
        return u + _unet_transformer(u, s, x)                   # + its residual input

    def down(self) -> list:
        """The down path; returns the skip list (conv_in, every block's and downsampler's
        output)."""
        chans, attn, lpb, unit = self.chans, self.attn, self.lpb, self.unit
        levels = len(chans)
        skips = [unit(0, chans[0])]                             # conv_in output
        cin = chans[0]
        for lvl, c in enumerate(chans):                         # down path
            for j in range(lpb):
                held = sum(skips)
                ci = cin if j == 0 else c
                self.peak = vmax(self.peak, held + _unet_resnet(unit(lvl, ci), unit(lvl, c)),
                                 held + self.transformer(lvl, attn[lvl]))
                self.largest = vmax(self.largest, unit(lvl, vmax(ci, c)))
                skips.append(unit(lvl, c))
            if lvl < levels - 1:                                # downsampler
                skips.append(unit(lvl + 1, c))
                self.peak = vmax(self.peak, sum(skips))
            cin = c
        return skips

    def up(self, skips: list, x_in) -> None:
        """The up path from the mid block's output x_in, consuming the skips."""
        chans, attn, lpb, unit = self.chans, self.attn, self.lpb, self.unit
        for lvl in reversed(range(len(chans))):                 # up path
            c = chans[lvl]
            tup = skips[-(lpb + 1):]
            skips = skips[:-(lpb + 1)]
            held = sum(skips) + sum(tup) + x_in
            x = x_in
            for j in range(lpb + 1):
                cat = x + tup[-1 - j]
                prev = x if j else 0                            # previous output, until the cat
                self.peak = vmax(self.peak, held + prev + cat)
                self.peak = vmax(self.peak, held + cat + _unet_resnet(cat, unit(lvl, c)))
                self.largest = vmax(self.largest, cat)
                self.peak = vmax(self.peak, held + self.transformer(lvl, attn[lvl]))
                x = unit(lvl, c)
            if lvl:                                             # upsampler into level lvl - 1
                up = unit(lvl - 1, c)
                self.peak = vmax(self.peak, held + x + 2 * up)
                x_in = up


def unet_step(cfg: dict, b: int, lat_h: int, lat_w: int, text_tokens: int, e: int,
              eager: bool) -> tuple[int, int]:
    """(peak transient bytes, largest tensor) of one UNet2DConditionModel forward, batch b
    (CFG already doubled), walked as diffusers runs it: the down path appends every block's
    output (and each downsampler's) to the skip list; the mid block; the up path hands each up
    block its lpb + 1 skips as a tuple the caller holds until the block returns, concatenates
    them one by one with the running tensor (the caller also keeps the block's input), and
    upsamples (nearest interpolate + conv) into the next level. The peak is the largest of
    held skips + held inputs + the running block's working set (resnet, transformer: GEGLU 19c
    per token or eager attention scores)."""
    walk = _UNetWalk(cfg, b, lat_h, lat_w, text_tokens, e, eager)
    chans = walk.chans
    mid_attn = cfg.get("mid_attention", any(walk.attn))
    skips = walk.down()
    top = len(chans) - 1
    u_top = walk.unit(top, chans[top])                          # mid block
    held = sum(skips)
    walk.peak = vmax(walk.peak, held + _unet_resnet(u_top, u_top),
                     held + walk.transformer(top, mid_attn))
    walk.up(skips, u_top)
    latents = 6 * b * cfg.get("latent_channels", 4) * lat_h * lat_w * 4
    return to_int(walk.peak + latents), to_int(walk.largest)


# transformer denoisers whose image tokens attend to the text by cross-attention (PixArt's
# DiT, Wan's WanTransformerBlock attn2) and those with FLUX-style single-stream blocks
CROSS_KINDS = ("dit-cross", "wan", "ltx-video")
PARALLEL_KINDS = ("flux", "hunyuan-video")


def dit_step(cfg: dict, b: int, img_tokens: int, text_tokens: int, e: int,
             eager: bool) -> tuple[int, int]:
    """(peak transient bytes, largest tensor) of one DiT / MMDiT / FLUX / CogVideoX forward.
    Per token of the attended sequence: residual + norm + q,k,v (+ their joint concatenation)
    + fp32 RoPE copies + attention output, or the MLP's two ffn-wide tensors; FLUX's single
    blocks run attention and MLP in parallel (6h + 3f)."""
    h, f, heads = cfg["hidden"], cfg["ffn"], cfg["heads"]
    joint = cfg.get("joint_text", False)
    n = img_tokens + (text_tokens if joint else 0)
    rope = (3 * h * 4 // e) if cfg.get("rope") else 0           # three fp32 copies of q (or k)
    attn_phase = (2 + 3 + (3 if joint else 0) + 1) * h + rope
    ff_phase = 4 * h + 2 * f
    per_tok = vmax(attn_phase, ff_phase)
    if cfg["kind"] in PARALLEL_KINDS:
        per_tok = vmax(per_tok, 6 * h + 3 * f + rope)
    act = b * n * per_tok * e
    largest = b * n * vmax(f, 3 * h) * e
    if eager:
        scores = b * heads * n * n * e
        act += 2 * scores
        largest = vmax(largest, scores)
    if cfg["kind"] in CROSS_KINDS and eager:
        act += 2 * b * heads * img_tokens * text_tokens * e
    stream = 2 * b * n * h * e                                  # hidden states between blocks
    return to_int(act + stream), to_int(largest)


# ---------------------------------------------------------------------------------------------
# VAE decoders


def _resnet(u_in: int, u_out: int, ws: bool = True) -> int:
    """Peak of a diffusers ResnetBlock2D (input held by the caller)."""
    a = 3 * u_in                                                # x, norm1, silu
    b = 2 * u_in + u_out + (u_out if ws else 0)                 # conv1 (+ workspace)
    c = u_in + 3 * u_out + (u_out if ws else 0)                 # norm2/silu/conv2
    d = u_in + u_out + (u_out if truth(u_in != u_out) else 0) + 2 * u_out   # (x + h) / scale
    return vmax(a, b, c, d)


def vae2d_decode(cfg: dict, b: int, out_h: int, out_w: int, e: int,
                 eager: bool) -> tuple[int, int, int]:
    """(peak, largest tensor, staircase) of AutoencoderKL.decode for b images of out_h x out_w.
    `staircase` sums the per-level peaks: the caching allocator keeps each level's segments, and
    a level's blocks are too small for the next (4x larger) level, so reserved memory climbs."""
    levels = vae2d_levels(cfg, b, out_h, out_w, e, eager)
    peaks = [p for p, _ in levels]
    return to_int(vmax(*peaks)), to_int(vmax(*(big for _, big in levels))), to_int(sum(peaks))


def vae2d_levels(cfg: dict, b: int, out_h: int, out_w: int, e: int,
                 eager: bool) -> list[tuple[int, int]]:
    """(peak, largest tensor) of each resolution level of AutoencoderKL.decode, from the latent
    size up (the mid block and its attention sit at level 0; an upsampler belongs to the level
    it produces)."""
    ds = cfg.get("downsample", 8)
    lh, lw = vmax(1, out_h // ds), vmax(1, out_w // ds)
    chs = list(reversed(cfg["block_out_channels"]))
    lpb = cfg.get("layers_per_block", 2)
    p0 = lh * lw
    u = lambda c, p: b * (p * c * e)  # noqa: E731  (ints: one array product)
    # per resolution level: its peak (the mid block and attention sit at level 0; an upsampler
    # belongs to the level it produces)
    levels = [0] * len(chs)
    bigs = [0] * len(chs)
    levels[0] = _resnet(u(chs[0], p0), u(chs[0], p0))
    if cfg.get("attention", True):
        att = 8 * b * p0 * p0 if eager else 0                   # fp32 softmax: 2 fp32 matrices
        levels[0] = vmax(levels[0], 4 * u(chs[0], p0) + att)
        bigs[0] = b * p0 * p0 * 4 if eager else 0
    for i, c_out in enumerate(chs):
        c_in = chs[i - 1] if i else chs[0]
        p = p0 * 4 ** i
        pk = _resnet(u(c_in, p), u(c_out, p))
        if lpb >= 1:
            pk = vmax(pk, _resnet(u(c_out, p), u(c_out, p)))
        if i == len(chs) - 1:
            pk = vmax(pk, 3 * u(c_out, p))                       # norm_out, silu, conv_out
        if i:                                                   # upsampler into this level
            pk = vmax(pk, u(c_in, p // 4) + 3 * u(c_in, p))      # in, interp, conv, workspace
        levels[i] = vmax(levels[i], pk)
        bigs[i] = vmax(bigs[i], u(c_in, p))
    return [(to_int(pk), to_int(big)) for pk, big in zip(levels, bigs)]


def vae3d_decode(cfg: dict, b: int, frames: int, out_h: int, out_w: int, e: int,
                 eager: bool, returned: bool = False) -> tuple[int, int, int]:
    """(peak, largest, staircase) of AutoencoderKLCogVideoX.decode without tiling. Peak and
    largest tensor: diffusers 0.30.x's decoder walked op by op (cogvideox_vae.py; the chunks'
    outputs and their concatenation included; `returned`: diffusers >= 0.31's). The staircase (the reserved floor): latent
    frames are decoded `frame_batch` at a time (the first chunk takes the odd one), each causal
    3-D conv keeps its last 2 input frames in a cache for the next chunk, and the decoder's
    spatial norm (GroupNorm(x) * conv_y(zq) + conv_b(zq)) holds ~6 copies of its input."""
    if is_array(b):    # a sweep's batch axis: one walk per batch size
        import numpy as np      # only here: the page's first screen imports no numpy
        runs = [vae3d_decode(cfg, int(x), frames, out_h, out_w, e, eager, returned)
                for x in b.ravel()]
        return tuple(np.array([r[k] for r in runs]).reshape(b.shape) for k in range(3))
    peak, largest = cogvideox_decode(cfg, b, frames, out_h, out_w, e, returned)
    return int(peak), int(largest), _cogvideox_staircase(cfg, b, frames, out_h, out_w, e)


def _cogvideox_staircase(cfg: dict, b: int, frames: int, out_h: int, out_w: int,
                         e: int) -> int:
    """The decode's allocator staircase: per chunk the sum of its levels' peaks, the caches
    of the first chunk and the output video (a reserved floor, workloads/diffusion/footprint)."""
    tc = cfg.get("temporal_compression", 4)
    ds = cfg.get("downsample", 8)
    lat_f = (frames - 1) // tc + 1
    fb = cfg.get("frame_batch", 2)
    first = min(lat_f, fb + lat_f % fb)
    chunks = [first] + ([fb] if lat_f > first else [])
    chs = list(reversed(cfg["block_out_channels"]))
    lpb = cfg.get("layers_per_block", 3) + 1
    p0 = max(1, out_h // ds) * max(1, out_w // ds)
    t_ups = int(round(math.log2(tc)))
    stair, cache_total = 0, 0
    for ci, k in enumerate(chunks):
        f = k
        stair_c = 0
        for i, c_out in enumerate(chs):
            c_in = chs[i - 1] if i else chs[0]
            p = p0 * 4 ** i
            u_in, u_out = b * f * p * c_in * e, b * f * p * c_out * e
            res = max(6 * u_in, 2 * u_in + u_in * (f + 2) // f + 2 * u_out, u_in + 6 * u_out)
            res2 = 6 * u_out
            lvl_cache = 2 * b * p * e * (c_in + c_out + 2 * c_out * (lpb - 1))
            stair_c += max(res, res2)
            if ci == 0:
                cache_total += lvl_cache
            if i < len(chs) - 1:
                f = (1 + 2 * (f - 1) if f % 2 else 2 * f) if i < t_ups else f
        stair = max(stair, stair_c + cache_total)
    return int(stair + b * frames * out_h * out_w * 3 * e)


def wan_vae_decode(cfg: dict, b: int, frames: int, out_h: int, out_w: int,
                   e: int) -> tuple[int, int, int]:
    """(peak, largest, staircase) of AutoencoderKLWan._decode without tiling (diffusers
    autoencoder_kl_wan.py): the decoder runs one latent frame at a time (the first gives 1
    output frame, each later one 4: two upsample3d time convs double the frames, skipped on
    the first chunk); every causal conv keeps the last 2 frames of its input in feat_cache for
    the next chunk (CACHE_T = 2), and the chunks are joined by torch.cat (the video so far and
    the joined copy are both alive). A WanResidualBlock holds its input, RMS_norm + SiLU, the
    cache-padded conv input (f + 2 frames) and the conv outputs (the 2-D resnet walk of
    `_resnet` plus the padded copy); the mid block's attention runs SDPA per frame. The Wan 2.2
    VAE (`residual`: WanResidualUpBlock) keeps its level widths (no halving), its upsampler
    convolves to the full width, and each up block holds a clone of its input and the DupUp3D
    shortcut beside the main path; its 2 x 2 patches make the last level half the output size
    (`downsample` 16)."""
    res = bool(cfg.get("residual"))
    tc = cfg.get("temporal_compression", 4)
    lat_f = (frames - 1) // tc + 1
    ds = cfg.get("downsample", 8)
    p0 = max(1, out_h // ds) * max(1, out_w // ds)
    chans, c0 = cfg["block_out_channels"], cfg["decoder_in_channels"]
    ups = list(cfg.get("temporal_upsample", [True, True, False]))
    lpb = cfg.get("layers_per_block", 2) + 1
    cache = 0
    for i, c in enumerate(chans):                       # feat_cache: 2 frames per causal conv
        c_in = c0 if i == 0 else chans[i - 1] // (1 if res else 2)
        convs = c_in + c + (2 * lpb - 1) * c + (c if i < len(ups) and ups[i] else 0)
        cache += 2 * b * p0 * 4 ** i * convs * e
    cache += 2 * b * p0 * c0 * e * 5                    # conv_in + the mid block's 4 convs
    peak = largest = stair = 0
    for first in ((True, False) if lat_f > 1 else (True,)):
        f, stair_c = 1, 0
        for i, c in enumerate(chans):
            c_in = c0 if i == 0 else chans[i - 1] // (1 if res else 2)
            p = p0 * 4 ** i
            u_in, u_out = b * f * p * c_in * e, b * f * p * c * e
            pk = vmax(_resnet(u_in, u_out), _resnet(u_out, u_out)) + u_out * (f + 2) // f
            if i < len(chans) - 1:                      # time conv (2c), nearest 2x, conv
                f2 = f * 2 if (ups[i] and not first) else f
                up = 4 * b * f2 * p * c * e                 # the upsampled map
                pk = vmax(pk, u_out + 2 * u_out * (f2 // f) + up + up // (1 if res else 2)
                          + ((u_in + up) if res else 0))    # input clone + DupUp3D shortcut
                largest = vmax(largest, 4 * b * f2 * p * c * e)
                f = f2
            largest = vmax(largest, u_out)
            peak = vmax(peak, pk + (cache if not first else 0))
            stair_c += pk
        stair = vmax(stair, stair_c + cache)
    video = b * frames * out_h * out_w * 3 * e                 # torch.cat of the chunks
    return to_int(peak + video), to_int(largest), to_int(stair + video)


def hunyuan_vae_decode(cfg: dict, b: int, frames: int, out_h: int, out_w: int, e: int,
                       eager: bool) -> tuple[int, int, int]:
    """(peak, largest, staircase) of AutoencoderKLHunyuanVideo._decode (diffusers
    autoencoder_kl_hunyuan_video.py) on one spatial tile (the caller passes the tile size under
    vae-tiling): framewise decoding (on by default) runs the decoder on tile_sample_min_num_frames
    / 4 + 1 = 5 latent frames at a time, whose frames double after the two middle up blocks
    (5, 5, 9, 17); each causal conv pads its input by 2 frames (a copy). The mid block's
    attention spans every token of the chunk (S = frames x h x w) under a causal mask built by
    prepare_causal_attention_mask: two int32 meshgrids, a float32 torch.where and its cast to
    the compute dtype, 14 bytes per S^2 at the cast; eager attention adds two fp32 S^2 score
    matrices (upcast_softmax). The decoded chunks are blended and joined by torch.cat."""
    lat_f = (frames - 1) // cfg.get("temporal_compression", 4) + 1
    f0 = min(lat_f, cfg.get("tile_frames", 16) // 4 + 1)
    ds = cfg.get("downsample", 8)
    p0 = max(1, out_h // ds) * max(1, out_w // ds)
    chs = list(reversed(cfg["block_out_channels"]))
    fr = [f0, f0] + [2 * f0 - 1, 4 * f0 - 3][:max(0, len(chs) - 2)]
    s_tok = b * f0 * p0
    mask = 14 * (f0 * p0) ** 2 + (8 * s_tok * f0 * p0 if eager else 0)
    u0 = s_tok * chs[0] * e
    peak = largest = stair = 0
    levels = []
    for i, c_out in enumerate(chs):
        c_in = chs[i - 1] if i else chs[0]
        f, p = fr[i], p0 * 4 ** i
        u_in, u_out = b * f * p * c_in * e, b * f * p * c_out * e
        pad = u_in * (f + 2) // f
        pk = vmax(_resnet(u_in, u_out) + pad, _resnet(u_out, u_out) + u_out * (f + 2) // f)
        if i < len(chs) - 1:                  # interpolate (x2 space, x2 time where it grows)
            up = b * fr[i + 1] * 4 * p * c_out * e
            pk = vmax(pk, u_out + 2 * up + up * (fr[i + 1] + 2) // fr[i + 1])
            largest = vmax(largest, up)
        levels.append(pk)
        largest = vmax(largest, u_out)
    levels[0] = vmax(levels[0], 4 * u0 + mask)
    peak, stair = vmax(*levels), sum(levels)
    largest = vmax(largest, 2 * (f0 * p0) ** 2)
    video = 2 * b * frames * out_h * out_w * 3 * e              # chunks, then torch.cat
    return to_int(peak + video), to_int(largest), to_int(stair + video)


def ltx_vae_decode(cfg: dict, b: int, frames: int, out_h: int, out_w: int,
                   e: int) -> tuple[int, int, int]:
    """(peak, largest, staircase) of AutoencoderKLLTXVideo._decode (diffusers
    autoencoder_kl_ltx.py; framewise decoding off by default): the whole latent video runs
    through the non-causal decoder at once. Each resnet pads its input by one frame at each
    end (a copy), so it holds its input, the padded copy and its outputs (the 2-D resnet walk
    plus the copy); an LTXVideoUpsampler3d convolves to 8 x width, then depth-to-space
    (reshape + permute: a copy) into 2f - 1 frames of 4x the pixels; conv_out writes 48
    channels (4 x 4 patches of RGB) that unpatchify copies into the video."""
    tc, ds, pch = cfg.get("temporal_compression", 8), cfg.get("downsample", 32), cfg.get("patch", 4)
    f = (frames - 1) // tc + 1
    p = max(1, out_h // ds) * max(1, out_w // ds)
    chs, ups = cfg["decoder_channels"], cfg["up_scaling"]
    u = lambda c: b * f * p * c * e  # noqa: E731
    pad = lambda c: b * (f + 2) * p * c * e  # noqa: E731
    levels, largest, c_prev = [_resnet(u(chs[0]), u(chs[0])) + pad(chs[0])], 0, chs[0]
    for c, up in zip(chs, ups):
        pk = _resnet(u(c_prev), u(c)) + pad(c_prev)
        if up:
            pk = vmax(pk, u(c) + 2 * u(8 * c))          # conv to 8c, depth-to-space copy
            largest = vmax(largest, u(8 * c))
            f, p = 2 * f - 1, 4 * p
        pk = vmax(pk, _resnet(u(c), u(c)) + pad(c))
        levels.append(pk)
        c_prev = c
    n48 = 3 * pch * pch
    levels.append(3 * u(c_prev) + 2 * u(n48))           # norm_out, silu, conv_out, unpatchify
    largest = vmax(largest, u(c_prev))
    video = b * frames * out_h * out_w * 3 * e
    return to_int(vmax(*levels) + video), to_int(largest), to_int(sum(levels) + video)
