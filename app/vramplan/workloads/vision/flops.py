"""FLOPs of one vision step, counted on the layer walk (`layers.Graph`), 2 FLOPs per
multiply-add.

Each matmul-like op records its forward multiply-adds per sample when it is walked:
* conv: Cout x Cin / groups x k_h x k_w per output position (a transposed conv: per input
  position), bias adds not counted;
* linear: in x out per token;
* attention: QK^T and PV are queries x keys x width each (width = heads x head dim; keys = the
  window's tokens under windowed attention), 4 x n^2 x d FLOPs for global attention; the eager
  path's two batched matmuls count the same.
Norms, activations, pooling, resizes and the few custom ops of a walk (RoI Align, SAM 2's mask
decoder, loss) are not counted, as torchvision's and fvcore's counts leave them out.

Training: the backward computes, per op, the gradient of each input that requires grad and of
the weight when it is trainable, each as many multiply-adds as the forward (a linear / conv
with all of them: 2 x forward, so 3 x forward per step); a frozen stem whose input needs no
gradient has no backward. Fused attention's backward is 2.5 x its forward (FlashAttention-2,
Dao 2023, s.4: the backward recomputes QK^T beside its four gradient matmuls). Full
checkpointing adds the forward of every checkpointed block once more (the recomputation);
selective adds the attention cores' forward.

Hand checks (tests/test_vision_flops.py): ResNet-50 at 224 x 224, 4.09 G multiply-adds per
image (torchvision's model docs: GFLOPS 4.09, counted as multiply-adds); ViT-B/16 at 224, 17.56
(torchvision: GFLOPS 17.56).
"""
from __future__ import annotations

from ...hardware.capabilities import compute_dtype
from ...vec import to_int

MATMUL_KINDS = ("conv", "linear", "matmul", "attention")
FUSED_ATTENTION_BACKWARD = 2.5     # FlashAttention-2 s.4: 5 matmuls backward vs 2 forward


def forward_macs(g) -> int:
    """Multiply-adds of one forward, per sample."""
    return sum(op.macs for op in g.ops)


def _backward_macs(op) -> float:
    if not op.macs:
        return 0.0
    if op.kind == "attention":
        return FUSED_ATTENTION_BACKWARD * op.macs if op.inputs[0].requires_grad else 0.0
    if op.kind == "matmul":
        return op.macs * sum(1 for t in op.inputs[:2] if t.requires_grad)
    grads = (1 if op.inputs[0].requires_grad else 0) + (1 if op.trainable else 0)
    return op.macs * grads


def _recompute_macs(g, checkpointing: str) -> int:
    if checkpointing == "full":
        return sum(op.macs for a, b in g.blocks for op in g.ops[a:b])
    if checkpointing == "selective":
        return sum(op.macs for op in g.ops if op.kind in ("attention", "matmul"))
    return 0


def step_flops(g, batch, training: bool, checkpointing: str = "none") -> dict:
    """{'flops_per_step', 'flops_per_image'} of one step over `batch` images (an int, or an
    int64 array on a sweep's batch axis: vramplan.vec); inference: one forward."""
    fwd = forward_macs(g)
    per_image = fwd
    if training:
        per_image = fwd + sum(_backward_macs(op) for op in g.ops) \
            + _recompute_macs(g, checkpointing)
    per_image = 2 * int(round(per_image))
    return {"flops_per_step": to_int(per_image * batch), "flops_per_image": per_image}


KIND = {"resnet": "cnn", "convnext": "cnn", "efficientnet": "cnn", "unet": "cnn",
        "vit": "vit", "swin": "vit", "sam2": "vit", "faster_rcnn": "detection",
        "pspnet": "segmentation", "upernet": "segmentation"}


def step_bandwidth(g, batch, scenario, cfg: dict) -> dict:
    """The footprint's FLOP keys: flops_per_step, flops_per_image, the compute_dtype of the
    scenario's precision (the roofline's compute floor, vramplan.timing) and the workload_kind
    whose measured efficiency the roofline note quotes."""
    training = scenario.task == "train"
    ckpt = getattr(scenario, "checkpointing", "none") or "none"
    return {**step_flops(g, batch, training, ckpt),
            "compute_dtype": compute_dtype(scenario.precision_for("default")),
            "workload_kind": KIND.get(cfg.get("arch"), "unknown") if training else "inference"}


def with_flops(fp, g, batch, scenario, cfg: dict):
    """`fp` with the FLOP keys added to its bandwidth dict where it runs a step (a load has no
    bandwidth figures and gets none)."""
    if fp.bandwidth.get("bytes_per_step") is not None:
        fp.bandwidth.update(step_bandwidth(g, batch, scenario, cfg))
    return fp
