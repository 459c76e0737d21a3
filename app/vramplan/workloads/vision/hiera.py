"""SAM 2 on one image: the Hiera image encoder, the FPN neck and the SAM heads, walked as the
vision family's layer graph (arch "sam2"; catalog/data/vision_2025.json).

From facebookresearch/sam2 (commit 2b90b9f, 2024-12-15), cited per piece:
- Hiera (sam2/modeling/backbones/hieradet.py): a 7x7 stride-4 patch conv, a background
  position embedding (C x 7 x 7, interpolated) plus a window one (C x w0 x w0), then
  MultiScaleBlocks: LayerNorm, (at a stage change) a Linear projection of the normed input to
  the new width max-pooled 2x2 for the shortcut, windowed attention (window_spec per stage;
  global attention at global_att_blocks) whose qkv Linear(dim, 3 dim_out) has its queries
  max-pooled 2x2 at the first block of the next q_pool stages, proj Linear, then LayerNorm +
  MLP(dim_out, 4 dim_out) (GELU). Width and heads double at each stage.
- FpnNeck (backbones/image_encoder.py): a 1x1 conv with bias from each stage to d_model, the
  top-down nearest upsample + add on fpn_top_down_levels, sine position encodings (no
  parameters); scalp 1 drops the coarsest level.
- The heads (prompt encoder, two-way mask decoder, memory attention / encoder, object pointer
  projections; sam2_base.py): d_model 256 in every size, `heads_params` of them, counted by
  building the modules from the released configs. On one image only the mask decoder runs:
  its two-way transformer attends between the few prompt tokens and the 64 x 64 image tokens,
  then transposed convs upscale to 256 x 256 masks (memory attention is skipped:
  directly_add_no_mem_embed). Its small activations are walked coarsely (no parameters).
"""
from __future__ import annotations

import math

from .layers import Graph, T


def _pool_tokens(g: Graph, x: T, h: int, w: int) -> T:
    """do_pool: max-pool 2x2 over the (h, w) token grid (saves its input and int64 indices)."""
    d = x.shape[-1]
    return g.view(g.maxpool(g.view(x, (d, h, w)), 2, 2, 0), ((h // 2) * (w // 2), d))


def _block(g: Graph, x: T, h: int, w: int, dim_out: int, heads: int, window: int,
           q_pool: bool, mode: str) -> tuple:
    """One MultiScaleBlock over n = h x w tokens; returns (tokens, h, w)."""
    n, dim = x.shape
    xn = g.ln(x)
    shortcut = x
    if dim != dim_out:
        shortcut = _pool_tokens(g, g.linear(xn, dim_out), h, w)
    ws = window or max(h, w)
    nwin = math.ceil(h / ws) * math.ceil(w / ws)
    if window:
        xn = g.copy(xn, (nwin * ws * ws, dim), "partition")
    qkv = g.linear(xn, 3 * dim_out)
    nq = n // 4 if q_pool else n
    q = g.custom("q_pool", [qkv], (nq, dim_out), saves=[qkv]) if q_pool else qkv
    if mode == "eager":
        s = g.matmul(q, qkv, (nwin * heads, nq // nwin, n // nwin),
                     contract=dim_out // heads)
        o = g.matmul(g.softmax(s), qkv, (nq, dim_out), contract=n // nwin)
    else:
        o = g.sdpa(q, qkv, qkv, heads, (nq, dim_out), keys=n // nwin)
    o = g.linear(g.copy(o, (nq, dim_out)), dim_out)
    if window:
        o = g.copy(o, (nq, dim_out), "unpartition")
    if q_pool:
        h, w = h // 2, w // 2
    x = g.add(shortcut, o)
    y = g.linear(g.act(g.linear(g.ln(x), 4 * dim_out), "gelu"), dim_out)
    return g.add(x, y), h, w


def hiera(g: Graph, x: T, cfg: dict, mode: str) -> list:
    """The Hiera trunk; returns [(tokens, h, w)] at each stage end."""
    c, heads = cfg["embed_dim"], cfg["num_heads"]
    stages, windows = cfg["stages"], cfg["window_spec"]
    glob = set(cfg.get("global_att_blocks", ()))
    x = g.conv(x, c, 7, 4, pad=3, bias=True)
    h, w = x.spatial
    bkg = cfg.get("window_pos_embed_bkg_spatial_size", [14, 14])
    g.param(c * bkg[0] * bkg[1] + c * windows[0] ** 2)
    tok = g.add(g.copy(x, (h * w, c), "to_nhwc"), g.copy(x, (h * w, c), "pos_embed"))
    ends = [sum(stages[:i + 1]) - 1 for i in range(len(stages))]
    q_pool_blocks = [e + 1 for e in ends[:-1]][:cfg.get("q_pool", 3)]
    stage, dim, feats = 0, c, []
    for i in range(sum(stages)):
        if i - 1 in ends[:-1]:
            dim, heads, stage = dim * 2, heads * 2, stage + 1
        window = 0 if i in glob else windows[stage]
        g.begin_block()
        tok, h, w = _block(g, tok, h, w, dim, heads, window, i in q_pool_blocks, mode)
        g.end_block()
        if i in ends:
            feats.append((tok, h, w))
    return feats


def sam2(g: Graph, x: T, cfg: dict, mode: str) -> T:
    """Image encoder + neck + the mask decoder for one prompt; returns the mask logits."""
    feats = hiera(g, x, cfg, mode)
    d = cfg.get("d_model", 256)
    maps = [g.conv(g.copy(t, (t.shape[-1], h, w), "to_map"), d, 1, bias=True)
            for t, h, w in feats]
    top_down = set(cfg.get("fpn_top_down_levels", [2, 3]))
    for lvl in range(len(maps) - 2, -1, -1):          # coarse to fine; the coarsest has no prev
        if lvl in top_down:
            maps[lvl] = g.add(maps[lvl], g.resize(maps[lvl + 1], maps[lvl].spatial))
    maps = maps[:len(maps) - cfg.get("scalp", 1)]
    g.param(cfg["heads_params"])
    emb = maps[-1]                                     # 64 x 64 at 1024 px: + no_mem_embed
    n = emb.spatial[0] * emb.spatial[1]
    src = g.copy(emb, (n, d), "image_tokens")
    for _ in range(2):                                 # TwoWayTransformer, downsample_rate 2
        kv = g.custom("image_kv", [src], (n, d), saves=[src])
        src = g.custom("image_update", [src, kv], (n, d), saves=[kv])
    up1 = g.custom("upscale_1", [src], (d // 4,) + tuple(2 * s for s in emb.spatial),
                   saves=[src])
    up2 = g.custom("upscale_2", [up1, maps[0]], (d // 8,) + tuple(4 * s for s in emb.spatial),
                   saves=[up1])
    return g.custom("masks", [up2], (4,) + up2.spatial, saves=[up2])
