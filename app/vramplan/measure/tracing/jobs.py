"""What one traced run does (`Job`), made from a Scenario and its ModelSpec, or from any module.

`job_for(scenario, spec)` reads the normalised Scenario as it is (batch, sequence length, new
tokens, resolution, precision, optimizer, checkpointing, attention kernel, LoRA, gradient
accumulation: its defaults are the scenario's, there are none here) and the model's
`TransformerArch` (`spec.arch`) or vision config; it returns a zero-argument builder that the
runner calls inside the fake mode, so that parameters and inputs are fake tensors.

torch is imported when this module is imported: import it lazily (measure/trace.py does).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import ScenarioError
from ..buildable import TASKS, check_task  # noqa: F401 (TASKS: one list, buildable.check)
from . import transformer as T
from . import vision as V
from .lora import apply_lora

PRECISIONS = {"fp32": (torch.float32, None), "tf32": (torch.float32, None),
              "bf16": (torch.bfloat16, None), "fp16": (torch.float16, None),
              "bf16-mixed": (torch.float32, torch.bfloat16),
              "fp16-mixed": (torch.float32, torch.float16)}
"""precision -> (parameter dtype, autocast dtype or None)"""
FAMILIES = ("decoder", "encoder", "vit", "cnn", "unet")


@dataclass
class Job:
    """What one traced run does; built from a scenario or given directly."""
    model: nn.Module
    inputs: tuple
    loss_fn: object = None          # loss_fn(model, *inputs) -> scalar; None: forward only
    task: str = "train"
    precision: str = "fp32"
    optimizer: str = "adamw"
    micro_batches: int = 1
    generate: dict | None = None    # {"new_tokens": n, "caches": fn(batch, length, dtype) -> list}
    lr: float = 1e-4
    notes: list = field(default_factory=list)
    context: object = None          # a context manager factory the steps run in (vlm.py)


def _get(cfg, *keys, default=None):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def _size(res, cfg) -> tuple[int, ...]:
    """The input size: the scenario's resolution (normalised to the model's), else the config's."""
    r = res or cfg.get("resolution") or cfg.get("image_size")
    if r is None:
        raise ScenarioError("resolution", "give the input resolution to trace this model")
    return (int(r),) * 2 if isinstance(r, int) else tuple(int(x) for x in r)


def _classify(train):
    if train:
        return lambda net, x, y: F.cross_entropy(net(x), y)
    return lambda net, x, y: net(x)


def _decoder(scn, arch, spec, train):
    model = T.CausalLM(arch, scn.attention, scn.checkpointing)
    ids = torch.randint(0, arch.vocab, (scn.batch_size, scn.seq_len))
    if scn.task == "generate":
        def caches(b, length, dt):
            return [(torch.zeros(b, arch.kv_heads, length, arch.head_dim, dtype=dt),
                     torch.zeros(b, arch.kv_heads, length, arch.head_dim, dtype=dt))
                    for _ in range(arch.layers)]
        return model, (ids,), None, {"new_tokens": int(scn.new_tokens), "caches": caches}
    loss = (lambda net, x: T.causal_lm_loss(net(x), x)) if train else (lambda net, x: net(x))
    return model, (ids,), loss, None


def _encoder(scn, arch, spec, train):
    labels = int(spec.config.get("num_labels", 2))
    model = T.EncoderClassifier(arch, scn.attention, scn.checkpointing, head=train, labels=labels)
    inputs = (torch.randint(0, arch.vocab, (scn.batch_size, scn.seq_len)),
              torch.randint(0, labels, (scn.batch_size,)))
    return model, inputs, _classify(train), None


def _vit(scn, arch, spec, train):
    c = spec.config
    hidden = int(_get(c, "hidden", "hidden_size", default=768))
    mlp = int(_get(c, "mlp_dim", "intermediate_size", default=0)) or int(hidden * c.get("mlp_ratio", 4))
    image = _size(scn.resolution, c)[0]
    classes = int(_get(c, "num_classes", "num_labels", default=1000))
    model = V.ViT(hidden, int(_get(c, "layers", "num_hidden_layers", default=12)),
                  int(_get(c, "heads", "num_attention_heads", default=12)), mlp, image,
                  int(_get(c, "patch", "patch_size", default=16)), 3, classes, scn.attention,
                  scn.checkpointing)
    inputs = (torch.randn(scn.batch_size, 3, image, image),
              torch.randint(0, classes, (scn.batch_size,)))
    return model, inputs, _classify(train), None


def _cnn(scn, arch, spec, train):
    c = spec.config
    depths = tuple(c.get("depths") or c.get("layers"))
    block = str(c.get("layer_type") or c.get("block") or "bottleneck")
    classes = int(_get(c, "num_classes", "num_labels", default=1000))
    h, w = _size(scn.resolution, c)[-2:]
    widths = c.get("widths")
    model = V.ResNet(depths, "bottleneck" if "bottle" in block else "basic",
                     int(widths[0] if widths else c.get("embedding_size", 64)), classes, 3,
                     scn.checkpointing)
    inputs = (torch.randn(scn.batch_size, 3, h, w), torch.randint(0, classes, (scn.batch_size,)))
    return model, inputs, _classify(train), None


def _unet(scn, arch, spec, train):
    c = spec.config
    ch = tuple(c.get("channels") or c.get("block_out_channels") or (64, 128, 256, 512, 1024))
    inc, outc, dims = (int(c.get("in_channels", 3)), int(c.get("out_channels", 2)),
                       int(c.get("dims", 2)))
    size = _size(scn.resolution, c)
    model = V.UNet(ch, inc, outc, dims, scn.checkpointing)
    inputs = (torch.randn(scn.batch_size, inc, *size),
              torch.randint(0, outc, (scn.batch_size, *size)))
    return model, inputs, _classify(train), None


BUILDERS = {"decoder": _decoder, "encoder": _encoder, "vit": _vit, "cnn": _cnn, "unet": _unet}


def job_for(scn, spec):
    """A zero-argument builder of the Job for Scenario `scn` and its ModelSpec `spec` (family,
    config; `spec.arch` for transformers). Called inside the fake mode."""
    task = scn.task
    check_task(scn)
    make = BUILDERS.get(spec.family)
    if make is None:
        raise ScenarioError("model", f"trace cannot build family '{spec.family}'; it builds "
                                     f"{', '.join(FAMILIES)}")
    arch = None
    if spec.family in ("decoder", "encoder"):
        arch = spec.arch
        T.check_buildable(arch)
    prec = scn.precision_for("default")
    train = task in ("train", "lora")
    ga = scn.gradient_accumulation
    notes = []
    if ga > 2:
        notes.append(f"gradient_accumulation={ga}: two micro-batches traced per step "
                     "(later ones repeat the second's memory)")

    def build() -> Job:
        model, inputs, loss, gen = make(scn, arch, spec, train)
        if task == "lora":
            lora = scn.lora
            if apply_lora(model, lora.rank, lora.alpha, lora.targets) == 0:
                raise ScenarioError("lora", f"no Linear named {', '.join(lora.targets)} in the "
                                            "traced model")
        return Job(model, inputs, loss, task, prec, scn.optimizer if train else "none",
                   min(ga, 2) if train else 1, gen, notes=notes)
    build.precision = prec
    return build


def module_job(module, example_inputs, loss_fn=None, targets=(), *, task=None, precision="fp32",
               optimizer="adamw", micro_batches=1):
    """A builder for a user module: `loss_fn(module(*example_inputs), *targets)` is the loss.

    `module` is an nn.Module or a zero-argument factory (cheapest under fake mode: the module is
    then built with fake parameters). A built module is copied (as fake tensors in fake mode), so
    the caller's weights are never trained."""
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    targets = tuple(targets) if isinstance(targets, (tuple, list)) else (targets,)
    task = task or ("train" if loss_fn is not None else "forward")
    n_in = len(inputs)

    def build() -> Job:
        from torch._guards import active_fake_mode
        fm = active_fake_mode()
        factory = callable(module) and not isinstance(module, nn.Module)
        m = module() if factory else module
        xs = inputs + targets
        dt = PRECISIONS.get(precision, (torch.float32,))[0]
        if not factory and any(p.dtype != dt for p in m.parameters() if p.is_floating_point()):
            m = copy.deepcopy(m).to(dt)  # convert the real copy before faking it
        if fm is not None:
            from torch._subclasses.fake_tensor import FakeCopyMode, FakeTensor
            if any(not isinstance(p, FakeTensor) for p in m.parameters()):
                with FakeCopyMode(fm):
                    m = copy.deepcopy(m)
            xs = tuple(fm.from_tensor(x) if isinstance(x, torch.Tensor) and not isinstance(x, FakeTensor)
                       else x for x in xs)
        elif not factory:
            m = copy.deepcopy(m)
        if loss_fn is not None and task != "forward":
            lf = lambda net, *a: loss_fn(net(*a[:n_in]), *a[n_in:])  # noqa: E731
        else:
            lf = lambda net, *a: net(*a[:n_in])  # noqa: E731
        return Job(m, xs, lf, task, precision, optimizer if task == "train" else "none", micro_batches)
    build.precision = precision
    return build
