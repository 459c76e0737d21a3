"""Vision architectures written as layer walks over a `vision_layers.Graph`.

Each builder follows its reference implementation op by op (torchvision, timm, Hugging Face,
mmdetection / mmsegmentation), because memory is decided by which tensors each op keeps:
a ResNet bottleneck as torchvision writes it (conv-BN-ReLU(inplace) x2, conv-BN, add, ReLU),
a ViT block as `nn.MultiheadAttention` runs it, and so on. The catalog config (data) chooses the
sizes; the code here chooses only the order of ops. Every builder returns the feature maps it
produces so that detection / segmentation heads can be stacked on top.
"""
from __future__ import annotations

import math

from .layers import Graph, T


# --- CNN backbones -----------------------------------------------------------------------------
def conv_bn(g: Graph, x: T, cout, k=3, s=1, d=1, groups=1, relu=True, pad=None) -> T:
    y = g.bn(g.conv(x, cout, k, s, pad=pad, dil=d, groups=groups))
    return g.relu(y) if relu else y


def resnet(g: Graph, x: T, cfg: dict) -> list:
    """ResNet / ResNetV1c (deep stem) / dilated ResNet-D8. Config: block ('basic'|'bottleneck'),
    depths, widths, stem ('7x7'|'deep'), strides, dilations, frozen_stages (-1: none)."""
    bottleneck = cfg.get("block", "bottleneck") == "bottleneck"
    exp = 4 if bottleneck else 1
    frozen = cfg.get("frozen_stages", -1)
    g.frozen = frozen >= 0
    g.frozen_bn = cfg.get("norm") == "FrozenBN"   # detectron2 / torchvision detection backbones
    if cfg.get("stem", "7x7") == "deep":
        sw = cfg.get("stem_width", 64)
        x = conv_bn(g, x, sw // 2, 3, 2)
        x = conv_bn(g, x, sw // 2, 3, 1)
        x = conv_bn(g, x, sw, 3, 1)
    else:
        x = conv_bn(g, x, cfg.get("stem_width", 64), 7, 2)
    x = g.maxpool(x, 3, 2, 1)
    outs = []
    strides = cfg.get("strides", [1, 2, 2, 2])
    dils = cfg.get("dilations", [1] * len(cfg["depths"]))
    for si, (n, w) in enumerate(zip(cfg["depths"], cfg["widths"])):
        g.frozen = si < frozen
        for bi in range(n):
            s = strides[si] if bi == 0 else 1
            d = dils[si]
            g.begin_block()
            idn = x
            if bottleneck:
                y = conv_bn(g, x, w, 1, 1)
                y = conv_bn(g, y, w, 3, s, d)
                y = conv_bn(g, y, w * exp, 1, 1, relu=False)
            else:
                y = conv_bn(g, x, w, 3, s, d)
                y = conv_bn(g, y, w, 3, 1, d, relu=False)
            if bi == 0 and (s != 1 or x.c != w * exp):
                idn = conv_bn(g, x, w * exp, 1, s, relu=False)
            x = g.relu(g.add(y, idn))
            g.end_block()
        outs.append(x)
    g.frozen = g.frozen_bn = False
    return outs


def convnext(g: Graph, x: T, cfg: dict) -> list:
    """ConvNeXt (torchvision): 4x4 patchify stem + LN; blocks dwconv7x7 -> permute -> LN ->
    Linear 4x -> GELU -> Linear -> layer scale -> permute -> stochastic depth -> add."""
    dims, depths = cfg["dims"], cfg["depths"]
    x = g.conv(x, dims[0], 4, 4, pad=0, bias=True)
    x = g.copy(g.ln(g.copy(x, x.spatial + (x.c,))), x.shape)  # LayerNorm2d permutes twice
    outs, k, total = [], 0, sum(depths)
    for si, (n, d) in enumerate(zip(depths, dims)):
        if si > 0:
            x = g.copy(g.ln(g.copy(x, x.spatial + (x.c,))), x.shape)
            x = g.conv(x, d, 2, 2, pad=0, bias=True)
        for _ in range(n):
            p = cfg.get("drop_path", 0.1) * k / max(total - 1, 1)
            g.begin_block()
            y = g.conv(x, d, 7, 1, groups=d, bias=True)
            y = g.ln(g.copy(y, y.spatial + (d,)))
            y = g.linear(y, 4 * d)
            y = g.linear(g.act(y, "gelu"), d)
            y = g.copy(g.scale(y), x.shape)
            x = g.add(g.drop_path(y, p), x)
            g.end_block()
            k += 1
        outs.append(x)
    return outs


def _se_mbconv(g: Graph, x: T, cout, expand, k, s, p_drop) -> T:
    cin, mid = x.c, x.c * expand
    y = x
    if expand != 1:
        y = g.act(g.bn(g.conv(y, mid, 1)), "silu")
    y = g.act(g.bn(g.conv(y, mid, k, s, groups=mid)), "silu")
    sq = max(1, cin // 4)
    z = g.pool(y, 1)
    z = g.act(g.conv(z, sq, 1, bias=True), "silu")
    z = g.act(g.conv(z, mid, 1, bias=True), "sigmoid")
    y = g.mul(y, z)
    y = g.bn(g.conv(y, cout, 1))
    if s == 1 and cin == cout:
        y = g.add(g.drop_path(y, p_drop), x)
    return y


def efficientnet(g: Graph, x: T, cfg: dict) -> list:
    """EfficientNet B0-B7 (torchvision): MBConv + squeeze-excitation, SiLU, stochastic depth;
    width/depth multipliers scale the B0 stage table."""
    wm, dm = cfg["width_mult"], cfg["depth_mult"]

    def ch(c):
        c = c * wm
        v = max(8, int(c + 4) // 8 * 8)
        return v + 8 if v < 0.9 * c else v

    table = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2),
             (6, 3, 2, 40, 80, 3), (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4),
             (6, 3, 1, 192, 320, 1)]
    x = g.act(g.bn(g.conv(x, ch(32), 3, 2)), "silu")
    total = sum(int(math.ceil(n * dm)) for *_, n in table)
    k, outs = 0, []
    for e, ks, s, _, cout, n in table:
        for i in range(int(math.ceil(n * dm))):
            g.begin_block()
            x = _se_mbconv(g, x, ch(cout), e, ks, s if i == 0 else 1,
                           cfg.get("drop_path", 0.2) * k / total)
            g.end_block()
            k += 1
        outs.append(x)
    x = g.act(g.bn(g.conv(x, 4 * ch(320), 1)), "silu")
    outs.append(x)
    return outs


def unet(g: Graph, x: T, cfg: dict) -> list:
    """U-Net (2-D or 3-D, padded convs): double conv (conv-BN-ReLU x2) per level, max-pool down,
    transposed-conv up, skip concatenation, 1x1 output conv."""
    chans = cfg["channels"]
    skips = []
    for i, c in enumerate(chans):
        if i:
            x = g.maxpool(x, 2, 2, 0)
        g.begin_block()
        x = conv_bn(g, conv_bn(g, x, c, 3, 1), c, 3, 1)
        g.end_block()
        skips.append(x)
    for c, skip in zip(reversed(chans[:-1]), reversed(skips[:-1])):
        x = g.conv(x, c, 2, 2, pad=0, bias=True, transpose=True)
        g.begin_block()
        x = g.cat([skip, x])
        x = conv_bn(g, conv_bn(g, x, c, 3, 1), c, 3, 1)
        g.end_block()
    return [g.conv(x, cfg.get("out_channels", 2), 1, bias=True)]


# --- transformers ------------------------------------------------------------------------------
def attention(g: Graph, x: T, heads: int, mode: str, style: str, rel_bias=False,
              k_bias=True) -> T:
    """Multi-head self-attention on tokens x (n, d).

    style 'torch': nn.MultiheadAttention (torchvision, mmcv): packed in_proj, q/k/v views of one
    contiguous copy; eager path scales q, bmm, softmax, bmm. style 'hf': separate q/k/v Linear
    (Hugging Face ViT/DeiT/BEiT/Swin), scores divided after the matmul. mode 'eager'
    materialises heads x n x n scores; 'sdpa'/'flash' run the fused kernel."""
    n, d = x.shape
    if style == "torch":
        qkv = g.linear(x, 3 * d)
        qkv = g.copy(qkv)                                  # unflatten/transpose().contiguous()
        q = k = v = qkv
        qs = (n, d)
    else:
        q, k, v = g.linear(x, d), g.linear(x, d, bias=k_bias), g.linear(x, d)
        qs = (n, d)
    if mode == "eager":
        if style == "torch":
            q = g.copy(q, qs, "scale_q")                   # q * scaling
        s = g.matmul(q, k, (heads, n, n), contract=d // heads)
        if style != "torch":
            s = g.copy(s, name="div")
        if rel_bias:
            s = g.copy(s, name="add_bias")
        p = g.softmax(s)
        o = g.matmul(p, v, qs, contract=n)
    else:
        o = g.sdpa(q, k, v, heads, qs)
    # transpose(...).contiguous(): the fused kernels already write (batch, n, heads, hd), so
    # nn.MultiheadAttention's permute to (n, batch, ...) copies only when batch > 1
    if not (mode != "eager" and style == "torch" and g.batch1):
        o = g.copy(o, (n, d))
    return g.linear(o, d)


def vit_block(g: Graph, x: T, cfg: dict, mode: str, p_drop: float) -> T:
    """A pre-norm block. Under no_grad a transformers tower (`framework` "hf": SigLIP,
    DINOv2 / v3) keeps by Python reference what the walk would free at its last use
    (transformers 5.23 SiglipEncoderLayer / Dinov2Layer.forward and their encoders' loops):
    the block input, held by the encoder's `hidden_states` loop variable until the layer
    returns; the attention's and the MLP's normed inputs, held by the layer's `hidden_states`
    local until `self.self_attn(...)` / `self.mlp(...)` return (Graph.hold)."""
    heads = cfg["heads"]
    style = cfg.get("attn_style", "torch")
    scale = cfg.get("layer_scale", False)
    hf = cfg.get("framework") == "hf"
    x_in = x
    normed = g.ln(x)
    y = attention(g, normed, heads, mode, style, rel_bias=cfg.get("rel_pos_bias", False),
                  k_bias=cfg.get("k_bias", True))
    if hf:
        g.hold(normed)
    if scale:
        y = g.scale(y)
    x = g.add(x, g.drop_path(y, p_drop))
    normed = g.ln(x)
    y = _mlp(g, normed, cfg)
    if hf:
        g.hold(normed)
    if scale:
        y = g.scale(y)
    out = g.add(x, g.drop_path(y, p_drop))
    if hf:
        g.hold(x_in)
    return out


def mlp_width(cfg: dict, d: int) -> int:
    """The MLP's hidden width: `mlp_dim` where the config gives it (SigLIP's intermediate_size
    4304 at width 1152, not a ratio), else d x mlp_ratio; SwiGLU (`mlp: "swiglu"`, DINOv2
    giant) as transformers' Dinov2SwiGLUFFN sizes it: int(2/3 x d x mlp_ratio) rounded up to a
    multiple of 8 (1536 x 4 -> 4096)."""
    width = int(cfg.get("mlp_dim") or d * cfg.get("mlp_ratio", 4))
    if cfg.get("mlp") == "swiglu":
        width = (int(width * 2 / 3) + 7) // 8 * 8
    return width


def _mlp(g: Graph, x: T, cfg: dict) -> T:
    """GELU MLP d -> width -> d, or SwiGLU (Dinov2SwiGLUFFN: weights_in d -> 2 x width, chunk,
    silu(x1) * x2, weights_out width -> d; chunk is a view)."""
    d, width = x.shape[-1], mlp_width(cfg, x.shape[-1])
    if cfg.get("mlp") != "swiglu":
        return g.linear(g.act(g.linear(x, width), "gelu"), d)
    y = g.linear(x, 2 * width)
    x1, x2 = g.view(y, y.shape[:-1] + (width,)), g.view(y, y.shape[:-1] + (width,))
    return g.linear(g.mul(g.act(x1, "silu"), x2), d)


def vit(g: Graph, x: T, cfg: dict, mode: str) -> tuple:
    """ViT / DeiT / BEiT / DINOv2 / SigLIP: patchify conv, class (and distillation) tokens,
    DINOv2's register tokens (`register_tokens`: after the class token, no position
    embedding; transformers Dinov2WithRegistersEmbeddings) and mask token (`mask_token`: one
    d-vector, a parameter used only when masking), position embedding, pre-norm blocks.
    Returns (tokens, list of (C, H, W) feature maps at `out_indices`)."""
    p, d = cfg["patch"], cfg["hidden"]
    x = g.conv(x, d, p, p, pad=0, bias=True)
    gh, gw = x.spatial
    extra = cfg.get("extra_tokens", 1)
    regs = cfg.get("register_tokens", 0)
    g.param((extra + regs + (1 if cfg.get("mask_token") else 0)) * d)
    # flatten(2).transpose(1, 2) is a view; concatenating the class token copies
    tok = g.copy(x, (gh * gw + extra + regs, d), "cat_cls") if extra + regs else \
        g.view(x, (gh * gw, d))
    if cfg.get("pos_embed", True):
        g.param((cfg.get("pos_grid", gh * gw) + extra) * d)
        tok = g.add(tok, tok)
    if cfg.get("framework") == "hf":   # the embedding output: SiglipVisionModel.forward's
        g.hold(tok, to_end=True)       # `hidden_states`, Dinov2Model's `embedding_output`
    if cfg.get("rel_pos_bias"):  # BEiT: one (2w-1)^2 + 3 table per layer
        w = cfg.get("pos_grid_side", 14)
        g.param(((2 * w - 1) ** 2 + 3) * cfg["heads"] * cfg["layers"])
    feats, L = [], cfg["layers"]
    outs_at = set(cfg.get("out_indices", []))
    for i in range(L):
        g.begin_block()
        tok = vit_block(g, tok, cfg, mode, cfg.get("drop_path", 0.0) * i / max(L - 1, 1))
        g.end_block()
        if i == L - 1 and cfg.get("final_norm", True):
            tok = g.ln(tok)
        if i in outs_at:
            feats.append(g.copy(tok, (d, gh, gw), "to_map"))  # x[:, 1:].reshape().permute()
    return tok, feats


def swin(g: Graph, x: T, cfg: dict, mode: str) -> T:
    """Swin (Hugging Face SwinModel): patch embed + LN, stages of window attention (7x7 windows,
    shifted every other block: roll + partition copies), patch merging (cat of 4 -> LN -> Linear
    4C->2C), final LN. Attention is per window: heads x 49 x 49 scores."""
    p, c, win = cfg.get("patch", 4), cfg["embed_dim"], cfg.get("window", 7)
    x = g.conv(x, c, p, p, pad=0, bias=True)
    h, w = x.spatial
    tok = g.ln(g.copy(x, (h * w, c)))
    total, k = sum(cfg["depths"]), 0
    for si, (n, heads) in enumerate(zip(cfg["depths"], cfg["heads"])):
        if si:
            tok = g.copy(tok, (h * w // 4, 4 * c), "merge_cat")
            h, w, c = h // 2, w // 2, c * 2
            tok = g.linear(g.ln(tok), c, bias=False)
        ww = min(win, h, w)
        nwin = math.ceil(h / ww) * math.ceil(w / ww)
        for bi in range(n):
            pd = cfg.get("drop_path", 0.1) * k / max(total - 1, 1)
            g.begin_block()
            y = g.ln(tok)
            if bi % 2 and min(h, w) > win:
                y = g.copy(y, name="roll")
            y = g.copy(y, (nwin * ww * ww, c), "partition")
            y = _window_attn(g, y, heads, nwin, ww * ww, mode)
            y = g.copy(y, (h * w, c), "reverse")
            if bi % 2 and min(h, w) > win:
                y = g.copy(y, name="roll")
            tok = g.add(tok, g.drop_path(y, pd))
            y = g.linear(g.act(g.linear(g.ln(tok), 4 * c), "gelu"), c)
            tok = g.add(tok, g.drop_path(y, pd))
            g.end_block()
            k += 1
        # relative position bias table per block
        g.param(((2 * ww - 1) ** 2) * heads * n)
    return g.ln(tok)


def _window_attn(g: Graph, x: T, heads: int, nwin: int, wt: int, mode: str) -> T:
    n, c = x.shape
    q, k, v = g.linear(x, c), g.linear(x, c), g.linear(x, c)
    if mode == "eager":
        s = g.matmul(q, k, (nwin * heads, wt, wt), contract=c // heads)
        s = g.copy(g.copy(s, name="div"), name="add_bias")
        o = g.matmul(g.softmax(s), v, (n, c), contract=wt)
    else:
        o = g.sdpa(q, k, v, heads, (n, c), keys=wt)
    return g.linear(g.copy(o, (n, c)), c)


def map_head(g: Graph, x: T, cfg: dict, mode: str) -> T:
    """SigLIP's attention-pooling head (transformers SiglipMultiheadAttentionPoolingHead): a
    learned probe (1 x d) queries the tokens through nn.MultiheadAttention (packed in_proj
    3d x d + 3d, out_proj), then LayerNorm and the MLP with a residual; returns the pooled
    d-vector (the probe's output)."""
    n, d = x.shape
    probe = g.custom("probe", [x], (1, d), params=d)        # the probe, expanded per sample
    q, k, v = g.linear(probe, d), g.linear(x, d), g.linear(x, d)
    heads = cfg["heads"]
    if mode == "eager":
        s = g.matmul(q, k, (heads, 1, n), contract=d // heads)
        o = g.matmul(g.softmax(s), v, (1, d), contract=n)
    else:
        o = g.sdpa(q, k, v, heads, (1, d))
    o = g.linear(o, d)
    o = g.add(o, _mlp(g, g.ln(o), cfg))
    return g.view(o, (d,))


def classifier(g: Graph, x: T, classes: int, tokens=False, pool="cls", ln_after=True) -> T:
    """Global pool (CNN) or class token / mean (ViT) -> Linear; `classes` 0 (a backbone with
    no head: DINOv2, SigLIP's vision tower) returns the pooled feature itself."""
    if tokens and pool == "map":     # already pooled by map_head
        return g.linear(x, classes) if classes else x
    if tokens:
        if pool == "mean":           # BEiT / Swin: mean over tokens (then LayerNorm for BEiT)
            f = g.copy(x, (x.shape[-1],), "mean")
            f = g.ln(f) if ln_after else f
        else:                        # x[:, 0] is a view: the head keeps the whole storage
            f = g.view(x, (x.shape[-1],))
    else:
        f = g.view(g.pool(x, 1), (x.c,))
    return g.linear(f, classes) if classes else f


def cross_entropy(g: Graph, logits: T) -> T:
    """log_softmax (fp32 under autocast) saves its output; NLL keeps nothing large."""
    lp = g.softmax(logits)
    return g.custom("nll", [lp], (1,), out_dtype="f32")
