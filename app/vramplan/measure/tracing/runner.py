"""Run two steps of a job (jobs.py: a scenario's model, or any module) and count live bytes.

mode='fake': under `FakeTensorMode` with tensors on device 'cpu' (no data, no GPU; DESIGN.md:
its peak equals a real CPU run's to the byte). mode='cpu': the same steps with real tensors, the
oracle that proves the fake run right. `kernels='cuda'` emulates the CUDA kernels that allocate
differently (see emulation.py); `kernels='cpu'` traces what the CPU does.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch
from torch import nn

from ...errors import ScenarioError, VramplanError
from . import recompute
from .allocator import replay
from .counter import MemoryCounter
from .emulation import kernel_mode, optimizer_kwargs
from .jobs import PRECISIONS, Job

OPTIMIZERS = ("adamw", "adam", "sgd", "sgd-momentum", "adafactor", "none")


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


def _device_and_kernels(mode: str, kernels: str) -> tuple[str, str]:
    """(torch device, kernel emulation) of a trace mode; refuses unknown ones."""
    if mode not in ("fake", "cpu", "cuda"):
        raise VramplanError(f"trace mode must be 'fake' or 'cpu', not '{mode}'")
    dev = "cuda" if mode == "cuda" else "cpu"
    if mode == "cuda":
        kernels = "cpu"   # real CUDA kernels: nothing to emulate
    if kernels not in ("cuda", "cpu"):
        raise VramplanError(f"trace kernels must be 'cuda' or 'cpu', not '{kernels}'")
    return dev, kernels


def _build_job(job_fn) -> tuple:
    """(the Job job_fn builds with its precision as the default dtype, dtype, autocast dtype)."""
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
    return job, dtype, amp


def _log_allocations(counter, log: list) -> None:
    """Log allocations for the allocator model: wrap the counter's track/free."""
    _orig_change = counter._change

    def _change(r, d, draw):
        log.append((id(r), r[0] if d > 0 else -1))
        _orig_change(r, d, draw)
    counter._change = _change


def _train_step(job, step_mod, inputs, counter, amp_ctx, opt, owner: dict) -> None:
    """One training step: forward and backward per micro-batch (or the job's pipeline / loss
    parallel schedule), then the optimizer step, its states tracked, gradients set to None."""
    sched = getattr(job, "schedule", None)   # pipeline / loss parallel: plan.py
    for _ in range(job.micro_batches if sched is None else 0):
        counter.phase = "forward"
        with amp_ctx():
            loss = step_mod(*inputs)
        counter.phase = "backward"
        loss.backward()
        del loss
    if sched is not None:
        sched(step_mod, inputs, counter, amp_ctx)
    counter.phase = "optimizer-step"
    if opt is not None:
        opt.step()
        for p, st in opt.state.items():
            for k, v in st.items():
                if isinstance(v, torch.Tensor):
                    if k == "step" and v.dim() == 0:
                        continue  # a host scalar on CUDA too
                    counter.track(v, "optimizer_states", owner.get(p))
        opt.zero_grad(set_to_none=True)
    else:
        step_mod.zero_grad(set_to_none=True)


def run_job(job_fn, mode="fake", kernels="cuda", steps=2, timeline=True, on_step=None,
            instrument=None) -> Counted:
    """Build the job (inside the fake mode, so parameters are fake) and run `steps` steps.
    `instrument(model, counter, owner)` runs once after the build (sharded.py uses it)."""
    dev, kernels = _device_and_kernels(mode, kernels)
    t0 = time.perf_counter()
    counter = MemoryCounter(timeline=timeline)
    log = []
    fake = contextlib.nullcontext()
    if mode == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode
        fake = FakeTensorMode()
    km = kernel_mode(kernels)
    with fake, torch.device(dev):
        job, dtype, amp = _build_job(job_fn)
        model = job.model
        if any(p.dtype != dtype for p in model.parameters() if p.is_floating_point()):
            model = model.to(dtype)
        step_mod = _Step(model, job.loss_fn) if job.loss_fn else model
        hooks = _Hooks(counter, step_mod)
        _log_allocations(counter, log)
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
        recompute.RECOMPUTE_CONTEXT = (lambda: kernel_mode(kernels)) if kernels == "cuda" else None
        try:
            with counter, km, (job.context or contextlib.nullcontext)():
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
                        _train_step(job, step_mod, inputs, counter, amp_ctx, opt, hooks.owner)
                    counter.phase = "idle"
                    if on_step is not None:
                        on_step(step)
        finally:
            recompute.RECOMPUTE_CONTEXT = None
            counter.close()
            hooks.remove()
    reserved = replay(log)
    return Counted(counter, reserved, time.perf_counter() - t0, dict(getattr(km, "rewrites", {})),
                   list(job.notes))


def _generate(counter, model, inputs, gen, amp_ctx, dtype):
    """Prefill + decode with a static KV cache. Decode steps differ only in the attended length,
    so the first and the last decode positions are traced (the last one allocates the most).
    A transformers model (gen["hf"]) runs its own cache: hf.generate_steps."""
    if gen.get("hf"):
        from .hf import generate_steps
        return generate_steps(counter, model, inputs[0], gen["new_tokens"], amp_ctx,
                              gen.get("prefill"))
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
