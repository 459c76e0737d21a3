"""Vision workloads: CNNs, ViT/DeiT/BEiT/Swin, U-Net, detection and segmentation.

Memory comes from each model's layer structure at the requested resolution: the catalog config
(`catalog/data/vision.json`) names the architecture and its sizes, `vision_nets` /
`vision_heads` walk its layers on a `vision_layers.Graph`, and the graph's liveness curves give
the activation bytes at the top of forward, during backward and at the optimizer step. Model
states (weights, gradients, optimizer states) follow `precision.py` / `optimizers.py`.

Framework conventions that change memory, chosen per catalog entry (`config.framework`):
* ``torch`` (torchvision / timm / Hugging Face on PyTorch 2.x): `zero_grad(set_to_none=True)`,
  so gradients appear during backward; Adam/AdamW/SGD `foreach` on CUDA; AMP is autocast
  (fp32 parameters, 16-bit copies of conv/linear weights cached for the forward).
* ``mmcv`` (mmdetection v2 / mmsegmentation v0 on PyTorch 1.x): `zero_grad()` zeroes gradients
  in place, so they stay allocated through forward; per-tensor optimizer loops; `fp16-mixed` is
  mmcv's fp16 hook: the model cast to fp16 except BatchNorm, an fp32 master copy of every
  parameter with fp32 gradients, fp16 activations, losses in fp32.
DDP (data > 1, ZeRO 0) adds its gradient buckets: a flat copy of the gradients.
"""
from __future__ import annotations

import functools
import json

from ... import runtime
from ...catalog import stacks
from ...errors import ScenarioError
from ...vec import isin, shown, to_int, truth, vmax, where
from ...vec import peak as peak_of
from .. import stack_mechanisms
from ..base import Footprint
from ...hardware.capabilities import plan_warnings
from .family import native_resolution, resolution_rule
from .layers import Graph
from . import cudnn, mmcv_fp16, nets
from . import heads, hiera
from .flops import with_flops



def _modes(precision: str, framework: str) -> dict:
    """Activation dtype, autocast dtype and model-state bytes for a precision."""
    if precision in ("fp32", "tf32"):
        return dict(dt="f32", amp=None, w=4, g=4, master=0, mgrad=0, loss_fp32=False)
    if precision in ("fp16", "bf16"):
        d = "f16" if precision == "fp16" else "bf16"
        return dict(dt=d, amp=None, w=2, g=2, master=0, mgrad=0, loss_fp32=False)
    if precision in ("fp16-mixed", "bf16-mixed"):
        d = "f16" if precision.startswith("fp16") else "bf16"
        if framework == "mmcv":
            return dict(dt=d, amp=None, w=2, g=2, master=4, mgrad=4, loss_fp32=True)
        return dict(dt="f32", amp=d, w=4, g=4, master=0, mgrad=0, loss_fp32=True)
    # quantised weight formats: inference only, 16-bit activations
    return dict(dt="f16", amp=None, w=None, g=2, master=0, mgrad=0, loss_fp32=False)


def _resolution(cfg: dict, res) -> tuple:
    """The input size the layers see: `res` checked against the model (dimensions, minimum
    side) and padded to the size divisor (mmdet pads the batch to a multiple of 32)."""
    res = tuple(int(r) for r in res)
    want = 3 if cfg.get("dims", 2) == 3 else 2
    if len(res) != want:
        raise ScenarioError("resolution", f"this model takes {want} dimensions "
                                          f"({'d, h, w' if want == 3 else 'h, w'}), got {list(res)}")
    stride = cfg.get("min_size", 32 if cfg["arch"] in ("resnet", "convnext", "swin") else 1)
    if any(r < stride for r in res):
        raise ScenarioError("resolution", f"at least {stride} per side for this model")
    rule = resolution_rule(cfg)
    if rule and any(r % rule["multiple"] for r in res):
        m = rule["multiple"]
        near = "; ".join(f"{r} -> " + (f"{r // m * m} or " if r >= m else "") + f"{-(-r // m) * m}"
                         for r in dict.fromkeys(res) if r % m)
        raise ScenarioError("resolution", f"must be a multiple of {m} for this model "
                                          f"({rule['why']}): nearest valid {near}")
    div = cfg.get("size_divisor")           # mmdet pads the batch to a multiple of 32
    if div:
        res = tuple(-(-r // div) * div for r in res)
    return res


def build(cfg: dict, res: tuple, dt: str, amp, training: bool, mode: str, loss_fp32: bool,
          batch1: bool = False, legacy: bool = False):
    """Walk the network of `cfg` at `res`; returns (graph, tensors kept to the end).
    `legacy`: the torch 1.x stack (runtime.legacy_stack), whose softmax / log_softmax keep
    their input for backward as well as their output (pytorch/pytorch#64000, until 1.11)."""
    return _build(json.dumps(cfg, sort_keys=True), res, dt, amp, training, mode, loss_fp32,
                  batch1, legacy)


@functools.lru_cache(maxsize=64)
def _build(cfg_json, res, dt, amp, training, mode, loss_fp32, batch1, legacy=False):
    cfg = json.loads(cfg_json)
    g = Graph(dt=dt, amp=amp, training=training)
    g.batch1 = batch1
    g.loss_fp32 = loss_fp32
    g.softmax_saves_input = legacy
    # mmcv fp16 hook: the pipeline's image is fp32 and auto_fp16(apply_to=('img',)) casts it;
    # both stay referenced through the forward (mmcv_fp16.py)
    mmcv_hook = cfg.get("framework") == "mmcv" and loss_fp32 and not amp and dt != "f32"
    x0 = g.input((cfg.get("in_channels", 3),) + res,
                 "f32" if (amp or dt == "f32" or mmcv_hook) else dt)
    keep = [x0]
    if x0.dtype != dt and not amp:
        x0 = g.custom("to_half", [x0], x0.shape, out_dtype=dt)
        if mmcv_hook:
            keep.append(x0)
    keep += _network(g, x0, cfg, res, mode, training)
    return g, keep


def _loss(g: Graph, logits, training: bool):
    """What a classifier keeps to the end of the step: its loss when training, else the
    logits."""
    return nets.cross_entropy(g, _loss_in(g, logits)) if training else logits


def _classifier_logits(g: Graph, x0, cfg: dict, mode: str):
    """Logits of an image classifier (CNN, ViT, Swin) or SAM 2's image encoder output."""
    arch = cfg["arch"]
    classes = cfg.get("num_classes", 1000)
    if arch in ("resnet", "convnext", "efficientnet"):
        fn = {"resnet": nets.resnet, "convnext": nets.convnext, "efficientnet": nets.efficientnet}
        f = fn[arch](g, x0, cfg)[-1]
        pooled = g.view(g.pool(f, 1), (f.c,))
        if arch == "convnext":
            pooled = g.ln(pooled)
        if arch == "efficientnet":
            pooled = g.dropout(pooled, cfg.get("dropout", 0.2))
        return g.linear(pooled, classes)
    if arch == "sam2":
        return hiera.sam2(g, x0, cfg, mode)
    if arch == "vit":
        tok, _ = nets.vit(g, x0, cfg, mode)
        if cfg.get("pool") == "map":            # SigLIP: attention-pooling head
            tok = nets.map_head(g, tok, cfg, mode)
    else:
        tok = nets.swin(g, x0, cfg, mode)
    return nets.classifier(g, tok, classes, tokens=True, pool=cfg.get("pool", "cls"),
                           ln_after=arch == "vit")


def _segmenter(g: Graph, x0, cfg: dict, res: tuple, mode: str, training: bool) -> list:
    """PSPNet / UperNet (mmseg): backbone, optional neck, decode head (and auxiliary head);
    returns the tensors kept to the end of the step."""
    arch = cfg["arch"]
    keep = []
    bb = cfg["backbone"]
    if bb["arch"] == "vit":
        _, feats = nets.vit(g, x0, bb, mode)
    else:
        feats = nets.resnet(g, x0, bb)
    if cfg.get("neck"):
        feats = heads.multi_level_neck(g, feats, cfg["neck"])
    dh = cfg["decode_head"]
    if arch == "pspnet":
        logits = heads.psp_head(g, feats[dh.get("in_index", -1)], dh)
    else:
        logits = heads.uper_head(g, feats, dh)
    if training:
        keep.append(g.input(res, "i64"))                       # the label map
        keep.append(heads.seg_loss(g, _loss_in(g, logits), res))
        ah = cfg.get("auxiliary_head")
        if ah:
            aux = heads.fcn_head(g, feats[ah["in_index"]], ah)
            keep.append(heads.seg_loss(g, _loss_in(g, aux), res))
    else:
        keep.append(g.resize(logits, res))
    return keep


def _network(g: Graph, x0, cfg: dict, res: tuple, mode: str, training: bool) -> list:
    """Walk the architecture of `cfg` from the input `x0`; returns the tensors kept to the end
    of the step (the losses, or the outputs)."""
    arch = cfg["arch"]
    if arch in ("resnet", "convnext", "efficientnet", "vit", "swin", "sam2"):
        return [_loss(g, _classifier_logits(g, x0, cfg, mode), training)]
    if arch == "unet":
        out = nets.unet(g, x0, cfg)[0]
        return [heads.seg_loss(g, _loss_in(g, out), res) if training else out]
    if arch == "faster_rcnn":
        feats = nets.resnet(g, x0, cfg["backbone"])
        feats = heads.fpn(g, feats, cfg["fpn_channels"])
        outs = heads.faster_rcnn_heads(g, feats, cfg)
        return list(outs if training else outs[-2:])
    if arch in ("pspnet", "upernet"):
        return _segmenter(g, x0, cfg, res, mode, training)
    raise ScenarioError("model", f"unknown vision architecture '{arch}'")


def _loss_in(g: Graph, logits):
    """mmcv `force_fp32` / autocast: losses see fp32 logits (a cast copy of 16-bit ones)."""
    if getattr(g, "loss_fp32", False) and logits.dtype != "f32":
        return g.copy(logits, name="to_fp32") if not g.amp else logits
    return logits


def _attention_mode(scenario, cfg) -> str:
    mode = getattr(scenario, "attention", None) or "sdpa"
    if getattr(scenario, "checkpointing", "none") == "selective":
        mode = "sdpa"          # the attention core is recomputed: no n x n scores kept
    return "eager" if mode == "eager" else "sdpa"


def _notes(scenario, spec, device, g, cfg, res, batch, prec, legacy, frozen_bn, stack) -> list:
    """The estimate's notes on the layer walk, the framework convention and the stack."""
    fw = cfg.get("framework", "torch")
    training = scenario.task == "train"
    P, tr = g.params, (g.params - g.frozen_params if training else 0)
    notes = [f"{spec.id}: {P:,} parameters ({tr:,} trainable); activations from the layer "
             f"graph at {'x'.join(map(str, res))}, batch {shown(batch)}",
             f"framework convention '{fw}' (see docs/vision.md)"]
    if legacy:
        notes.append("torch 1.x stack (before 1.11): softmax and log_softmax keep their input "
                     "for backward as well as their output (pytorch/pytorch#64000), so the "
                     "attention scores and the loss's logits are saved twice")
    if frozen_bn:
        stack_mechanisms.use(notes, stack, "frozen-bn")
    notes += cudnn.notes(g)
    return plan_warnings(device, precisions=(prec,), attention=scenario.attention,
                         compute=scenario.task != "load") + notes


def _weight_bytes(g: Graph, m: dict, prec: str, fw: str) -> int:
    """Resident parameter and buffer bytes: a quantised format on the matmul weights, else
    the mode's bytes per parameter (buffers in fp32 unless the model is cast to 16 bits)."""
    from ...precision import weights_bytes
    P = g.params
    wb = m["w"] if m["w"] is not None else None
    if wb is None:
        mat = g.param_split["matmul"]
        return weights_bytes(mat, P - mat, prec) + 4 * g.buffers
    return wb * P + (4 if wb == 4 or fw == "mmcv" else 2) * g.buffers


def footprint(scenario, spec, device) -> Footprint:
    """Live bytes at the peak of one training step (or inference forward) of a vision model."""
    cfg = spec.config
    task = scenario.task
    fw = cfg.get("framework", "torch")
    prec = scenario.precision_for("default")
    m = _modes(prec, fw)
    training = task == "train"
    if training and m["w"] is None:
        raise ScenarioError("precision", f"'{prec}' is a weight format for inference; train "
                                         f"in fp32, fp16/bf16 or fp16-mixed/bf16-mixed")
    res = _resolution(cfg, scenario.resolution)
    mode = _attention_mode(scenario, cfg)
    batch = to_int(scenario.batch_size)     # an int64 array in a sweep (vramplan.vec)
    legacy = training and runtime.legacy_stack(scenario, device)
    stack = stacks.of(scenario)
    frozen_bn = cfg["arch"] == "faster_rcnn" and stack.has("frozen-bn")
    if frozen_bn:   # the backbone's BN is FrozenBatchNorm2d (stack_mechanisms.py)
        cfg = {**cfg, "backbone": {**cfg["backbone"], "norm": "FrozenBN"}}
    g, keep = build(cfg, res, m["dt"], m["amp"], training, mode, m["loss_fp32"],
                    truth(batch == 1), legacy)
    notes = _notes(scenario, spec, device, g, cfg, res, batch, prec, legacy, frozen_bn, stack)
    weights = _weight_bytes(g, m, prec, fw)
    if not training:
        return with_flops(_inference(task, g, keep, batch, weights, m["w"], notes),
                          g, batch, scenario, cfg)
    return with_flops(_training(scenario, cfg, g, keep, batch, weights, m, notes),
                      g, batch, scenario, cfg)


def _inference(task: str, g: Graph, keep: list, batch, weights: int, wb, notes: list
               ) -> Footprint:
    """forward (the inference peak of the layer walk) or load (weights only)."""
    comps = {"weights": weights, "gradients": 0, "optimizer_states": 0, "activations": 0,
             "temporary": 0}
    c = g.curves(keep)
    a = c.at(batch)
    act = a["inference_peak"] if task == "forward" else 0
    comps["activations"] = act
    return Footprint(components=comps, peak_phase="forward" if task == "forward" else "load",
                     phases={"forward": dict(comps)},
                     largest_allocation=vmax(a["largest"] if task == "forward" else 0,
                                             int(g.largest_param * (wb or 2))),
                     bandwidth={} if task == "load" else   # a load runs no step
                     {"bytes_per_step": to_int(weights + 2 * a["inference_peak"])},
                     notes=notes)


def _model_states(scenario, fw: str, g: Graph, m: dict, weights: int, notes: list) -> dict:
    """Training model states per GPU: weights, gradients, optimizer states, the step's
    temporary, DDP buckets, after sharding, offload and optimizer-in-backward."""
    from ... import optimizers, parallel
    tr = g.params - g.frozen_params
    layout = parallel.layout_of(getattr(scenario, "parallel", None))
    div = parallel.shard_divisors(layout.zero, layout.shard_group)
    opts = set(getattr(scenario, "options", ()) or ())
    offload = set(getattr(scenario, "offload", ()) or ())
    opt = scenario.optimizer
    state_pb = m["master"] or m["w"]                      # states follow the fp32 master / param
    in_bwd = "optimizer-in-backward" in opts
    impl = "loop" if (fw == "mmcv" or in_bwd) else "foreach"
    grads = tr * m["g"] + tr * m["mgrad"]
    states = optimizers.state_bytes(opt, tr, state_pb) + tr * m["master"]
    temp = optimizers.step_temporary_bytes(opt, tr, state_pb, g.largest_param, impl)
    ddp = layout.data * layout.context > 1 and layout.zero == 0
    buckets = tr * m["g"] if ddp else 0
    if mmcv_fp16.applies(fw, m["master"], ddp):
        buckets = mmcv_fp16.bucket_bytes(tr)              # made fp32, before model.half()
        temp = max(temp, mmcv_fp16.step_flat_bytes(tr))   # allreduce_grads, before step()
        notes.append(mmcv_fp16.NOTE)
    weights = parallel.shard(weights, div["weights"])
    grads = parallel.shard(grads, div["gradients"])
    states = parallel.shard(states, div["optimizer_states"])
    if "optimizer" in offload:
        states, temp = 0, 0
        notes.append("optimizer states offloaded to CPU")
    if "gradients" in offload:
        grads = 0
    if opt == "none":
        temp = 0
    if in_bwd:
        grads, temp = g.largest_param * m["g"], g.largest_param * state_pb
        notes.append("optimizer-in-backward: each parameter steps as its gradient is ready; "
                     "no full gradient set")
    if layout.tensor > 1 or layout.pipeline > 1:
        notes.append("tensor/pipeline parallelism is not modelled for vision models: counted as "
                     "one full replica per GPU")
    return dict(weights=weights, grads=grads, states=states, temp=temp, buckets=buckets,
                in_bwd=in_bwd)


def _training(scenario, cfg: dict, g: Graph, keep: list, batch, weights: int, m: dict,
              notes: list) -> Footprint:
    """One training step: forward, backward and optimizer-step phases over the liveness
    curves of the layer walk."""
    fw = cfg.get("framework", "torch")
    comps = {"weights": weights, "gradients": 0, "optimizer_states": 0, "activations": 0,
             "temporary": 0}
    st = _model_states(scenario, fw, g, m, weights, notes)
    weights, grads, states, temp = st["weights"], st["grads"], st["states"], st["temp"]
    buckets, in_bwd = st["buckets"], st["in_bwd"]
    persist = fw == "mmcv" or scenario.gradient_accumulation > 1
    c = g.curves(keep, checkpoint=getattr(scenario, "checkpointing", "none") == "full")
    a = c.at(batch, 0 if (persist or in_bwd) else grads)
    g_fwd = grads if persist else 0
    g_bwd = grads if (persist or in_bwd) else to_int(a["backward_param_frac"] * grads)
    fwd_act, fwd_tmp = a["forward_peak"], 0
    if g.transient and truth(a["end_of_forward"] + g.transient > fwd_act):
        fwd_act, fwd_tmp = a["end_of_forward"], g.transient
        notes.append("forward peak at the RPN loss: IoU matrices of anchors x ground-truth "
                     f"boxes ({cfg.get('gt_boxes_max', 93)} boxes, the dataset's most crowded "
                     "image)")
    phases = {
        "forward": dict(weights=weights, gradients=g_fwd + buckets, optimizer_states=states,
                        activations=fwd_act, temporary=fwd_tmp),
        "backward": dict(weights=weights, gradients=g_bwd + buckets, optimizer_states=states,
                         activations=a["backward_peak"], temporary=0),
        "optimizer-step": dict(weights=weights, gradients=(0 if in_bwd else grads) + buckets,
                               optimizer_states=states, activations=0, temporary=temp),
    }
    if in_bwd:
        phases["optimizer-step"] = dict(phases["backward"], activations=0)
    peak, top = peak_of(phases)     # per element for a sweep's batch axis (vramplan.vec)
    comps.update(top)
    if buckets:
        notes.append("DDP gradient buckets (a flat copy of the gradients) counted in gradients")
    saved = a["saved"]
    bw = 3 * weights + 2 * grads + 2 * states + 2 * saved
    return Footprint(components=comps, peak_phase=peak, phases=phases,
                     largest_allocation=vmax(where(isin(peak, ("optimizer-step",)), 0,
                                                   a["largest"]), g.largest_param * 4),
                     bandwidth={"bytes_per_step": to_int(bw)}, notes=notes)


def activation_bytes(model: str, resolution, batch: int = 1, precision="fp32", task="train",
                     attention="sdpa", checkpointing="none") -> dict:
    """Activation figures of a catalog model without a full scenario (tests, docs, sweeps)."""
    from ...catalog import get_model
    spec = get_model(model)
    cfg = spec.config
    m = _modes(precision, cfg.get("framework", "torch"))
    res = _resolution(cfg, resolution or native_resolution(cfg))
    mode = "eager" if attention == "eager" else "sdpa"
    g, keep = build(cfg, res, m["dt"], m["amp"], task == "train", mode, m["loss_fp32"],
                    batch == 1)
    return g.curves(keep, checkpoint=checkpointing == "full").at(batch)


def param_count(model: str) -> int:
    """Parameters of a catalog vision model, counted from its layer walk."""
    from ...catalog import get_model
    cfg = get_model(model).config
    g, _ = build(cfg, _resolution(cfg, native_resolution(cfg)), "f32", None, True, "sdpa", False)
    return g.params
