"""Detection and segmentation heads and necks (mmdetection v2 / mmsegmentation v0 layouts).

mmcv's ConvModule is conv (no bias when a norm follows) -> BN/SyncBN -> ReLU(inplace); the
segmentation losses upsample the logits to the input size and run cross-entropy there, which is
why a 150-class head at 512x512 keeps ~160 MB per image in its loss alone.
"""
from __future__ import annotations

from .layers import Graph, T


def conv_module(g: Graph, x: T, cout: int, k=1, norm=True, act=True, d=1) -> T:
    y = g.conv(x, cout, k, 1, dil=d, bias=not norm)
    if norm:
        y = g.bn(y)
    return g.relu(y) if act else y


def seg_loss(g: Graph, logits: T, size) -> T:
    """resize(logits, input size) -> cross-entropy: log_softmax saves its (fp32) output."""
    up = g.resize(logits, size)
    lp = g.softmax(up)
    return g.custom("nll", [lp], (1,), out_dtype="f32")


def cls_seg(g: Graph, x: T, classes: int, dropout: float) -> T:
    return g.conv(g.dropout(x, dropout, feature=True), classes, 1, bias=True)


def ppm(g: Graph, x: T, ch: int, scales) -> list:
    """Pyramid pooling: adaptive avg-pool to s x s -> ConvModule 1x1 -> bilinear up."""
    return [g.resize(conv_module(g, g.pool(x, s), ch), x.spatial) for s in scales]


def psp_head(g: Graph, x: T, cfg: dict) -> T:
    ch = cfg["channels"]
    y = g.cat([x] + ppm(g, x, ch, cfg.get("pool_scales", (1, 2, 3, 6))))
    y = conv_module(g, y, ch, 3)
    return cls_seg(g, y, cfg["num_classes"], cfg.get("dropout", 0.1))


def fcn_head(g: Graph, x: T, cfg: dict) -> T:
    y = x
    for _ in range(cfg.get("num_convs", 1)):
        y = conv_module(g, y, cfg["channels"], 3)
    return cls_seg(g, y, cfg["num_classes"], cfg.get("dropout", 0.1))


def uper_head(g: Graph, feats: list, cfg: dict) -> T:
    """UPerHead: PPM on the last level, lateral 1x1 ConvModules, top-down resize + add, 3x3 FPN
    ConvModules, everything resized to the finest level, concatenated, 3x3 bottleneck."""
    ch = cfg["channels"]
    lat = [conv_module(g, f, ch) for f in feats[:-1]]
    top = feats[-1]
    top = conv_module(g, g.cat([top] + ppm(g, top, ch, cfg.get("pool_scales", (1, 2, 3, 6)))),
                      ch, 3)
    lat.append(top)
    for i in range(len(lat) - 1, 0, -1):
        lat[i - 1] = g.add(lat[i - 1], g.resize(lat[i], lat[i - 1].spatial))
    outs = [conv_module(g, lat[i], ch, 3) for i in range(len(lat) - 1)] + [lat[-1]]
    size = outs[0].spatial
    outs = [outs[0]] + [g.resize(o, size) for o in outs[1:]]
    y = conv_module(g, g.cat(outs), ch, 3)
    return cls_seg(g, y, cfg["num_classes"], cfg.get("dropout", 0.1))


def multi_level_neck(g: Graph, feats: list, cfg: dict) -> list:
    """mmseg MultiLevelNeck: 1x1 lateral convs, resize by `scales`, 3x3 convs (no norm/act)."""
    out_c = cfg["out_channels"]
    feats = [g.conv(f, out_c, 1, bias=True) for f in feats]
    outs = []
    for f, s in zip(feats, cfg["scales"]):
        size = tuple(max(1, int(h * s)) for h in f.spatial)
        outs.append(g.conv(g.resize(f, size) if s != 1 else f, out_c, 3, bias=True))
    return outs


def fpn(g: Graph, feats: list, ch: int, extra_pool=True) -> list:
    """mmdet FPN: lateral 1x1 convs (bias), nearest top-down add, 3x3 output convs, and P6 by
    max-pool(1, stride 2)."""
    lat = [g.conv(f, ch, 1, bias=True) for f in feats]
    for i in range(len(lat) - 1, 0, -1):
        lat[i - 1] = g.add(lat[i - 1], g.resize(lat[i], lat[i - 1].spatial))
    outs = [g.conv(x, ch, 3, bias=True) for x in lat]
    if extra_pool:
        outs.append(g.maxpool(outs[-1], 1, 2, 0))
    return outs


def faster_rcnn_heads(g: Graph, feats: list, cfg: dict) -> list:
    """RPN (3x3 conv + ReLU, 1x1 objectness and box convs per level, anchor targets) and the
    RoI box head (RoIAlign 7x7 on `rois_per_image` sampled proposals, two shared FCs, class and
    box predictors). Returns the loss-side tensors (kept alive until backward)."""
    ch, a = cfg["fpn_channels"], cfg.get("anchors_per_location", 3)
    anchors = 0
    losses = []
    rpn_w = [g.conv(feats[0], ch, 3, bias=True)]  # shared weights: count params once
    for i, f in enumerate(feats):
        y = g.relu(g.conv(f, ch, 3, bias=True) if i else rpn_w[0])
        cls = g.conv(y, a, 1, bias=True)
        reg = g.conv(y, 4 * a, 1, bias=True)
        losses.append(g.copy(g.cat([cls, reg]), name="permute_flatten"))
        anchors += a * f.spatial[0] * f.spatial[1]
    g.param_split["matmul"] -= (len(feats) - 1) * (9 * ch * ch + ch + (ch + 1) * 5 * a)
    # MaxIoUAssigner on the GPU, one image at a time: bbox_overlaps builds lt, rb, wh
    # ([gts, anchors, 2] fp32 each) plus overlap / union / iou maps: ~36 B per gt-anchor pair,
    # live at the RPN loss on top of everything the forward saved
    g.transient = 36 * cfg.get("gt_boxes_max", 93) * anchors
    # anchors (4 fp32), labels (int64), label / box weights and targets (9 fp32) per anchor
    losses.append(g.custom("anchor_targets", [], (anchors * 12,), out_dtype="f32"))
    losses.append(g.custom("anchor_labels", [], (anchors,), out_dtype="i64"))
    rois = cfg.get("rois_per_image", 512)
    r = cfg.get("roi_size", 7)
    pooled = g.custom("roi_align", feats[:4], (rois, ch * r * r), saves=[])
    y = g.relu(g.linear(pooled, cfg.get("fc_dim", 1024)))
    y = g.relu(g.linear(y, cfg.get("fc_dim", 1024)))
    k = cfg["num_classes"]
    losses.append(g.linear(y, k + 1))
    losses.append(g.linear(y, 4 * k))
    return losses
