"""FLOPs of one denoiser forward (2 FLOPs per multiply-add), from the catalog's component
configs: the U-Net walked level by level as diffusers' UNet2DConditionModel runs it, the
transformer denoisers (DiT, PixArt, MMDiT, FLUX, CogVideoX) from their per-token parameters.

U-Net (per image, latent n = h/8 x w/8 positions at level 0, a quarter per level down):
3x3 convs 9 x cin x cout MACs per output position (resnet conv1/conv2, 1x1 shortcut when the
channels change, downsamplers at the lower and upsamplers at the higher resolution), and per
BasicTransformerBlock at width c: self-attention projections 4c^2, cross-attention q/out 2c^2
(k/v over the text tokens), GEGLU feed-forward 8c^2 + 4c^2, plus proj_in / proj_out 2c^2 per
Transformer2D; attention cores 2 x n x c (self) and 2 x text x c (cross) per position.
Hand check: SD 1.5 at 512 x 512 gives 402 G MACs (0.80 TFLOP), 340 G of them in convolutions and
linear layers, against the 338.7 G MACs BK-SDM (Kim et al. 2023) counts for the SD v1.4 U-Net
(convolutions and linear layers: the attention score matmuls are not counted there).

Transformers: 2 x (per-token parameters) x tokens + attention 4 x layers x n^2 x hidden. The
adaptive-norm modulation linears run once per image, not per token (DiT's adaLN-Zero 6h^2 per
block, SD3's MMDiT 12h^2 per joint block, FLUX's `layerwise_skip_params`; PixArt's adaLN-single
is one shared linear), so they are taken out of the per-token parameters. Hand check: DiT-XL/2
at 256 x 256 (256 tokens) gives 0.24 TFLOP = 119 GMACs (DiT paper, Peebles & Xie 2023: 118.6
Gflops, counted as multiply-adds).
"""
from __future__ import annotations


def unet_macs(cfg: dict, lat_h: int, lat_w: int, text_tokens: int, cores: bool = True) -> float:
    """Multiply-adds of one U-Net forward for one latent; `cores` False leaves out the
    attention score matmuls (QK^T, AV) and counts convolutions and linear layers only."""
    chans, attn = cfg["block_out_channels"], cfg["attention_levels"]
    depth = cfg["transformer_depth"]
    lpb = cfg.get("layers_per_block", 2)
    cross = int(cfg.get("cross_attention_dim") or chans[-1])
    ns, hh, ww = [], lat_h, lat_w
    for _ in chans:
        ns.append(hh * ww)
        hh, ww = (hh + 1) // 2, (ww + 1) // 2

    def resnet(cin, cout, n):
        return n * (9 * cin * cout + 9 * cout * cout + (cin * cout if cin != cout else 0))

    def transformer(c, n, d):
        core = (2 * n * c + 2 * text_tokens * c) if cores else 0
        per_block = n * (18 * c * c + core) + 2 * text_tokens * cross * c
        return n * 2 * c * c + d * per_block

    macs = 9 * 4 * chans[0] * ns[0]                              # conv_in
    skips = [chans[0]]
    cin = chans[0]
    for lvl, c in enumerate(chans):                              # down path
        for j in range(lpb):
            macs += resnet(cin if j == 0 else c, c, ns[lvl])
            if attn[lvl]:
                macs += transformer(c, ns[lvl], depth[lvl])
            skips.append(c)
        if lvl < len(chans) - 1:
            macs += 9 * c * c * ns[lvl + 1]                      # downsampler (stride 2)
            skips.append(c)
        cin = c
    top = len(chans) - 1                                         # mid block
    c = chans[top]
    macs += 2 * resnet(c, c, ns[top])
    if cfg.get("mid_attention", any(attn)):
        macs += transformer(c, ns[top], depth[top])
    x = c
    for lvl in reversed(range(len(chans))):                      # up path
        c = chans[lvl]
        for _ in range(lpb + 1):
            macs += resnet(x + skips.pop(), c, ns[lvl])
            if attn[lvl]:
                macs += transformer(c, ns[lvl], depth[lvl])
            x = c
        if lvl:
            macs += 9 * c * c * ns[lvl - 1]                      # upsampler conv
    macs += 9 * chans[0] * 4 * ns[0]                             # conv_out
    return float(macs)


def _per_image_params(cfg: dict) -> float:
    """Modulation (adaptive norm) parameters applied once per image."""
    h, layers = cfg["hidden"], cfg.get("layers", 0)
    kind = cfg["kind"]
    if cfg.get("layerwise_skip_params"):
        return float(cfg["layerwise_skip_params"])
    if kind == "dit":
        return 6.0 * h * h * layers + 2.0 * h * h
    if kind == "mmdit":
        return 12.0 * h * h * layers
    return 0.0


def denoiser_flops(cfg: dict, batch: int, lat_h: int, lat_w: int, lat_f: int,
                   text_tokens: int, reference: int = 1) -> float:
    """FLOPs of one denoiser forward over `batch` latents (CFG already doubled); `reference`
    2 where a reference image's tokens join the sequence (FLUX.1 Kontext)."""
    if cfg["kind"] == "unet":
        return 2.0 * batch * unet_macs(cfg, lat_h, lat_w, text_tokens)
    p, pt = cfg.get("patch", 2), cfg.get("patch_t", 1)
    img = (lat_h // p) * (lat_w // p) * -(-max(1, lat_f) // pt) * reference
    n = img + (text_tokens if cfg.get("joint_text") else 0)
    layers = cfg.get("layers", 0) + cfg.get("single_layers", 0)
    per_tok = max(0.0, float(cfg["params"]) - _per_image_params(cfg))
    attn = 4.0 * layers * n * n * cfg["hidden"]
    if cfg["kind"] in ("dit-cross", "wan", "ltx-video"):         # cross-attention to the text
        attn += 4.0 * layers * img * text_tokens * cfg["hidden"]
    return batch * (2.0 * per_tok * n + attn)
