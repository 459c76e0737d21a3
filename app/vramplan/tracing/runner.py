"""Run two steps of a scenario (or of any module) and count live bytes.

mode='fake': under `FakeTensorMode` with tensors on device 'cpu' (no data, no GPU; DESIGN.md:
its peak equals a real CPU run's to the byte). mode='cpu': the same steps with real tensors, the
oracle that proves the fake run right. `kernels='cuda'` emulates the CUDA kernels that allocate
differently (see emulation.py); `kernels='cpu'` traces what the CPU does.
"""
from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ScenarioError, VramplanError
from . import models as M
from .allocator import replay
from .counter import MemoryCounter
from .emulation import kernel_mode, optimizer_kwargs

PRECISIONS = {"fp32": (torch.float32, None), "tf32": (torch.float32, None),
              "bf16": (torch.bfloat16, None), "fp16": (torch.float16, None),
              "bf16-mixed": (torch.float32, torch.bfloat16),
              "fp16-mixed": (torch.float32, torch.float16)}
OPTIMIZERS = ("adamw", "adam", "sgd", "sgd-momentum", "adafactor", "none")
TASKS = ("train", "lora", "forward", "generate")


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
    generate: dict | None = None    # {"prompt": s, "new_tokens": n, "caches": fn(dtype) -> list}
    lr: float = 1e-4
    notes: list = field(default_factory=list)


def group_of(fqn: str) -> str:
    """Module group for the breakdown: up to the first numbered child ('model.layers.3'), else
    the first two levels ('model.embed_tokens', 'lm_head')."""
    if not fqn:
        return "(loss)"
    parts = fqn.split(".")
    for i, p in enumerate(parts):
        if p.isdigit():
            return ".".join(parts[: i + 1])
    return ".".join(parts[:2])


class _Step(nn.Module):
    """Wraps the model so the loss runs inside a module (attributed to '(loss)')."""

    def __init__(self, net, loss_fn):
        super().__init__()
        self.net, self.loss_fn = net, loss_fn

    def forward(self, *inputs):
        return self.loss_fn(self.net, *inputs)


class _Hooks:
    def __init__(self, counter: MemoryCounter, model: nn.Module):
        self.stack: list[str] = []
        self.handles = []
        strip = "net." if isinstance(model, _Step) else ""
        names = {id(m): n[len(strip):] if n.startswith(strip) else n for n, m in model.named_modules()}
        for m in model.modules():
            g = group_of(names[id(m)])
            self.handles.append(m.register_forward_pre_hook(lambda _m, _i, g=g: self.stack.append(g)))
            self.handles.append(m.register_forward_hook(lambda *_a: self.stack.pop() and None))
        counter.module_of = lambda: self.stack[-1] if self.stack else None
        counter.recompute = lambda: bool(self.stack)
        self.owner = {}
        for n, m in model.named_modules():
            n = names[id(m)]
            for pn, p in m.named_parameters(recurse=False):
                self.owner.setdefault(p, group_of(n))
            for bn, b in m.named_buffers(recurse=False):
                if b is not None:
                    self.owner.setdefault(b, group_of(n))
        for p, g in self.owner.items():
            if isinstance(p, nn.Parameter) and p.requires_grad:
                self.handles.append(p.register_post_accumulate_grad_hook(
                    lambda p, g=g: counter.track(p.grad, "gradients", g)))

    def remove(self):
        for h in self.handles:
            h.remove()


def make_optimizer(name: str, params, kernels: str, lr: float):
    kw = optimizer_kwargs(kernels, name)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, **kw)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, **kw)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, **kw)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, **kw)
    if name == "adafactor" and hasattr(torch.optim, "Adafactor"):
        return torch.optim.Adafactor(params, lr=lr, **kw)
    if name == "none":
        return None
    raise ScenarioError("optimizer", f"trace supports {', '.join(OPTIMIZERS)}; '{name}' needs "
                                     "kernels (bitsandbytes, lion) that do not run on the CPU")


@dataclass
class Counted:
    counter: MemoryCounter
    reserved: dict
    seconds: float
    rewrites: dict
    notes: list


def run_job(job_fn, mode="fake", kernels="cuda", steps=2, timeline=True, on_step=None,
            instrument=None) -> Counted:
    """Build the job (inside the fake mode, so parameters are fake) and run `steps` steps.
    `instrument(model, counter, owner)` runs once after the build (sharded.py uses it)."""
    if mode not in ("fake", "cpu", "cuda"):
        raise VramplanError(f"trace mode must be 'fake' or 'cpu', not '{mode}'")
    dev = "cuda" if mode == "cuda" else "cpu"
    if mode == "cuda":
        kernels = "cpu"   # real CUDA kernels: nothing to emulate
    if kernels not in ("cuda", "cpu"):
        raise VramplanError(f"trace kernels must be 'cuda' or 'cpu', not '{kernels}'")
    t0 = time.perf_counter()
    counter = MemoryCounter(timeline=timeline)
    log = []
    fake = contextlib.nullcontext()
    if mode == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode
        fake = FakeTensorMode()
    km = kernel_mode(kernels)
    with fake, torch.device(dev):
        prec = getattr(job_fn, "precision", "fp32")
        if prec not in PRECISIONS:
            raise ScenarioError("precision", f"trace supports {', '.join(PRECISIONS)}; not '{prec}'")
        dtype, amp = PRECISIONS[prec]
        old = torch.get_default_dtype()
        torch.set_default_dtype(dtype)   # build pure-16-bit models in their dtype directly
        try:
            job: Job = job_fn()
        finally:
            torch.set_default_dtype(old)
        model = job.model
        if any(p.dtype != dtype for p in model.parameters() if p.is_floating_point()):
            model = model.to(dtype)
        step_mod = _Step(model, job.loss_fn) if job.loss_fn else model
        hooks = _Hooks(counter, step_mod)
        # log allocations for the allocator model: wrap track/free
        _orig_change = counter._change

        def _change(r, d, draw):
            log.append((id(r), r[0] if d > 0 else -1))
            _orig_change(r, d, draw)
        counter._change = _change
        for t, g in hooks.owner.items():
            counter.track(t, "weights", g)
        if instrument is not None:
            instrument(step_mod, counter, hooks.owner)
        inputs = tuple(x.to(dtype) if torch.is_floating_point(x) else x for x in job.inputs)
        for x in inputs:
            counter.track(x, "activations", "(inputs)")
        trainable = [p for p in step_mod.parameters() if p.requires_grad]
        train = job.task in ("train", "lora") and job.loss_fn is not None
        opt = make_optimizer(job.optimizer, trainable, kernels, job.lr) if train else None
        amp_ctx = (lambda: torch.autocast(dev, dtype=amp)) if amp else contextlib.nullcontext
        step_mod.train(train)
        M.RECOMPUTE_CONTEXT = (lambda: kernel_mode(kernels)) if kernels == "cuda" else None
        try:
            with counter, km:
                for step in range(1, steps + 1):
                    counter.step = step
                    if job.generate:
                        _generate(counter, model, inputs, job.generate, amp_ctx, dtype)
                    elif not train:
                        counter.phase = "forward"
                        with torch.no_grad(), amp_ctx():
                            out = step_mod(*inputs)
                        del out
                    else:
                        for _ in range(job.micro_batches):
                            counter.phase = "forward"
                            with amp_ctx():
                                loss = step_mod(*inputs)
                            counter.phase = "backward"
                            loss.backward()
                            del loss
                        counter.phase = "optimizer-step"
                        if opt is not None:
                            opt.step()
                            for p, st in opt.state.items():
                                for k, v in st.items():
                                    if isinstance(v, torch.Tensor):
                                        if k == "step" and v.dim() == 0:
                                            continue  # a host scalar on CUDA too
                                        counter.track(v, "optimizer_states", hooks.owner.get(p))
                            opt.zero_grad(set_to_none=True)
                        else:
                            step_mod.zero_grad(set_to_none=True)
                    counter.phase = "idle"
                    if on_step is not None:
                        on_step(step)
        finally:
            M.RECOMPUTE_CONTEXT = None
            counter.close()
            hooks.remove()
    reserved = replay(log)
    return Counted(counter, reserved, time.perf_counter() - t0, dict(getattr(km, "rewrites", {})),
                   list(job.notes))


def _generate(counter, model, inputs, gen, amp_ctx, dtype):
    """Prefill + decode with a static KV cache. Decode steps differ only in the attended length,
    so the first and the last decode positions are traced (the last one allocates the most)."""
    ids = inputs[0]
    b, s = ids.shape
    n = gen["new_tokens"]
    counter.phase = "prefill"
    with torch.no_grad(), amp_ctx():
        d = ids.device.type
        cdt = torch.get_autocast_dtype(d) if torch.is_autocast_enabled(d) else dtype
        caches = gen["caches"](b, s + max(n, 1), cdt)
        for kv in caches:
            for t in kv:
                counter.track(t, "kv_cache", "(kv_cache)")
        logits = model(ids, caches, 0, last_only=True)
        nxt = logits.argmax(-1)
        del logits
        counter.phase = "decode"
        for pos in sorted({s, s + n - 1}) if n > 0 else []:
            logits = model(nxt, caches, pos, last_only=True)
            nxt = logits.argmax(-1)
            del logits
    del caches


# ----------------------------------------------------------------------------- scenarios -> jobs


def _sget(scn, key, default=None):
    if isinstance(scn, dict):
        v = scn.get(key, default)
    else:
        v = getattr(scn, key, default)
    return default if v is None else v


def _get(cfg, *keys, default=None):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def _res2(res, cfg, default):
    r = res or cfg.get("resolution") or cfg.get("image_size") or default
    r = (r, r) if isinstance(r, int) else tuple(r)
    return int(r[0]), int(r[-1])


def _lora_cfg(scn):
    lora = _sget(scn, "lora")
    if lora is None:
        return 8, 16, ("q_proj", "v_proj")
    g = (lambda k, d: lora.get(k, d)) if isinstance(lora, dict) else (lambda k, d: getattr(lora, k, d) or d)
    return int(g("rank", 8)), float(g("alpha", 16)), tuple(g("targets", ("q_proj", "v_proj")))


def job_for(scn, family: str, config: dict):
    """A zero-argument builder of the Job for this scenario (called inside the fake mode)."""
    task = _sget(scn, "task", "train")
    if task == "qlora":
        raise ScenarioError("task", "trace cannot run qlora (4-bit NF4 kernels need bitsandbytes "
                                    "on a GPU); trace 'lora' at bf16 for the adapter part")
    if task not in TASKS:
        raise ScenarioError("task", f"trace runs tasks {', '.join(TASKS)}; not '{task}'")
    b = int(_sget(scn, "batch_size", 1))
    s = int(_sget(scn, "seq_len", 512))
    prec = _sget(scn, "precision", "fp32")
    if isinstance(prec, dict):
        prec = prec.get("default", "fp32")
    attention = _sget(scn, "attention", "sdpa")
    ckpt = _sget(scn, "checkpointing", "none")
    opt = _sget(scn, "optimizer", "adamw")
    ga = int(_sget(scn, "gradient_accumulation", 1))
    res = _sget(scn, "resolution")
    train = task in ("train", "lora")
    notes = []
    if ga > 2:
        notes.append(f"gradient_accumulation={ga}: two micro-batches traced per step "
                     "(later ones repeat the second's memory)")

    def build() -> Job:
        gen = None
        if family == "decoder":
            a = M.transformer_arch(config)
            if a.num_experts and a.num_experts > 1:
                raise ScenarioError("model", "trace cannot build mixture-of-experts decoders yet")
            model = M.CausalLM(a, attention, ckpt)
            ids = torch.randint(0, a.vocab, (b, s))
            if task == "generate":
                n = int(_sget(scn, "new_tokens", 128))
                caches = lambda bb, L, dt: [  # noqa: E731
                    (torch.zeros(bb, a.kv_heads, L, a.head_dim, dtype=dt),
                     torch.zeros(bb, a.kv_heads, L, a.head_dim, dtype=dt)) for _ in range(a.layers)]
                gen = {"new_tokens": n, "caches": caches}
                inputs, loss = (ids,), None
            else:
                inputs = (ids,)
                loss = (lambda net, x: M.causal_lm_loss(net(x), x)) if train else (lambda net, x: net(x))
        elif family == "encoder":
            a = M.transformer_arch(config, kind="encoder")
            labels = int(config.get("num_labels", 2))
            model = M.EncoderClassifier(a, attention, ckpt, head=train, labels=labels)
            inputs = (torch.randint(0, a.vocab, (b, s)), torch.randint(0, labels, (b,)))
            loss = ((lambda net, x, y: F.cross_entropy(net(x), y))
                    if train else (lambda net, x, y: net(x)))
        elif family == "vit":
            c = config
            hidden = int(_get(c, "hidden", "hidden_size", default=768))
            mlp = int(_get(c, "mlp_dim", "intermediate_size", default=0)) or int(hidden * c.get("mlp_ratio", 4))
            image, _ = _res2(res, c, 224)
            classes = int(_get(c, "num_classes", "num_labels", default=1000))
            model = M.ViT(hidden, int(_get(c, "layers", "num_hidden_layers", default=12)),
                          int(_get(c, "heads", "num_attention_heads", default=12)), mlp, image,
                          int(_get(c, "patch", "patch_size", default=16)), 3, classes, attention, ckpt)
            inputs = (torch.randn(b, 3, image, image), torch.randint(0, classes, (b,)))
            loss = (lambda net, x, y: F.cross_entropy(net(x), y)) if train else (lambda net, x, y: net(x))
        elif family == "cnn":
            depths = tuple(config.get("depths") or config.get("layers") or (3, 4, 6, 3))
            block = str(config.get("layer_type") or config.get("block") or "bottleneck")
            classes = int(_get(config, "num_classes", "num_labels", default=1000))
            h, w = _res2(res, config, 224)
            widths = config.get("widths")
            model = M.ResNet(depths, "bottleneck" if "bottle" in block else "basic",
                             int(widths[0] if widths else config.get("embedding_size", 64)), classes,
                             3, ckpt)
            inputs = (torch.randn(b, 3, h, w), torch.randint(0, classes, (b,)))
            loss = (lambda net, x, y: F.cross_entropy(net(x), y)) if train else (lambda net, x, y: net(x))
        elif family == "unet":
            ch = tuple(config.get("channels") or config.get("block_out_channels") or (64, 128, 256, 512, 1024))
            inc, outc, dims = (int(config.get("in_channels", 3)), int(config.get("out_channels", 2)),
                               int(config.get("dims", 2)))
            size = tuple(int(r) for r in (res or config.get("resolution") or (256,) * dims))
            model = M.UNet(ch, inc, outc, dims, ckpt)
            inputs = (torch.randn(b, inc, *size), torch.randint(0, outc, (b, *size)))
            loss = ((lambda net, x, y: F.cross_entropy(net(x), y)) if train
                    else (lambda net, x, y: net(x)))
        else:
            raise ScenarioError("model", f"trace cannot build family '{family}'; it builds "
                                         f"{', '.join(M.FAMILIES)}")
        if task == "lora":
            r, al, targets = _lora_cfg(scn)
            if M.apply_lora(model, r, al, targets) == 0:
                raise ScenarioError("lora", f"no Linear named {', '.join(targets)} in the traced model")
        return Job(model, inputs, loss, task, prec, opt if train else "none",
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
