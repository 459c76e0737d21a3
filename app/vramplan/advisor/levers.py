"""The changes the advisor knows: each a `Lever` that, given the plan, proposes a change to
the scenario dict (or None where it does not apply). What applies is asked of the scenario's
form (`vramplan.scenario.form.fields`: the keys and choices this task and model family take)
and of the GPU's capabilities (bf16, fp8, FlashAttention-2); the validator (`Scenario.replace`)
and the estimate then judge each proposal: a change the validator refuses, or one that saves
nothing, is never recommended (`recommend.py`).

`slot`: levers in one slot exclude each other in a plan (one precision, one optimizer ...).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..hardware import traits_of
from ..vocab import QUANTISED, TRANSFORMER_FAMILIES
from .makers import (WIDE, array_dtype, fewer_copies, fft_in_place, fitting_utilisation,
                     formats_down, layerwise_fp8, quantise_t5, render, serving,
                     text_encoders_16bit)

ADAM = ("adam", "adamw")


@dataclass(frozen=True)
class Lever:
    id: str
    slots: tuple[str, ...]
    cost: str                                # costs.toml entry
    make: Callable                            # Ctx -> (title, changes) | None
    how: str | None = None                    # how.toml entry (default: id)


class Ctx:
    """The plan being advised: scenario, GPU, model, estimate and the form's fields."""

    def __init__(self, sc, dev, spec, est):
        from ..scenario import form
        self.sc, self.dev, self.spec, self.est = sc, dev, spec, est
        self.fields = {f.key: f for f in form.fields(sc.to_dict())}
        self.family = spec.family if spec is not None else None
        self.task = sc.task
        self.prec = sc.precision_for("default")
        self.traits = traits_of(dev)
        self.training = sc.task in ("train", "lora", "qlora")
        self.limit = dev.usable_bytes           # bytes the plan may use (set by the advisor)

    def supports(self, cap: str) -> bool:
        f = getattr(self.traits, "supports", None)
        return (f(cap) if callable(f) else None) is not False

    def offers(self, key: str, value=None) -> bool:
        f = self.fields.get(key)
        if f is None:
            return False
        return value is None or f.choices is None or value in f.choices

    @property
    def transformer(self) -> bool:
        return self.family in TRANSFORMER_FAMILIES

    def par(self, **kw) -> dict:
        p = {**self.sc.parallel.to_dict(), **kw}
        return {"parallel": p}


def _add(ctx: Ctx, key: str, name: str):
    cur = tuple(getattr(ctx.sc, key))
    if name in cur or not ctx.offers(key, name):
        return None
    return {key: sorted(cur + (name,))}


def _option(name, title, when=lambda c: True):
    def make(ctx):
        ch = _add(ctx, "options", name) if when(ctx) else None
        return (title, ch) if ch else None
    return make


def _offload(name, title, extra=lambda c: {}, when=lambda c: True):
    """An offload lever; none on a unified-memory device (Apple, DGX Spark, Ryzen AI Max):
    its CPU memory is the GPU's memory, so what is offloaded still takes the same bytes."""
    def make(ctx):
        unified = bool(getattr(ctx.dev, "unified_memory", False))
        ch = _add(ctx, "offload", name) if when(ctx) and not unified else None
        return (title, {**ch, **extra(ctx)}) if ch else None
    return make


def _half(ctx) -> str:
    return "bf16" if ctx.supports("bf16") else "fp16"


# ---- precision ------------------------------------------------------------------------------

def mixed_precision(ctx):
    if not ctx.training or ctx.prec not in WIDE:
        return None
    to = "bf16-mixed" if ctx.supports("bf16") else "fp16-mixed"
    return f"mixed precision ({to}: fp32 master weights, 16-bit compute)", {"precision": to}


def pure_16bit(ctx):
    if ctx.task != "train" or ctx.prec not in WIDE + ("bf16-mixed", "fp16-mixed") or \
            not ctx.supports("bf16") or not ctx.offers("precision", "bf16"):
        return None
    return "pure bf16 training (no fp32 master weights)", {"precision": "bf16"}


def half_precision(ctx):
    if ctx.training or ctx.prec not in WIDE or ctx.family is None:
        return None
    return f"{_half(ctx)} weights and activations", {"precision": _half(ctx)}


def weights(fmt, title):
    def make(ctx):
        if ctx.training or ctx.family is None or ctx.prec in QUANTISED:
            return None
        if fmt == "fp8" and not ctx.supports("fp8"):
            return None
        if not ctx.offers("precision", fmt) or (ctx.family == "diffusion" and fmt == "int4"):
            return None
        return title, {"precision": fmt}
    return make


# ---- activations ----------------------------------------------------------------------------

def ckpt(mode):
    def make(ctx):
        cur = ctx.sc.checkpointing
        if not ctx.training or not ctx.offers("checkpointing", mode) or cur == mode or \
                cur == "full" or (mode == "selective" and not ctx.transformer):
            return None
        what = {"selective": "selective activation checkpointing (recompute the attention "
                             "core)", "full": "full activation checkpointing (recompute each "
                                             "block in backward)"}[mode]
        return what, {"checkpointing": mode}
    return make


def fused_attention(ctx):
    if ctx.sc.attention != "eager" or not ctx.offers("attention"):
        return None
    to = "flash" if ctx.transformer and ctx.supports("flash_attention_2") else "sdpa"
    return f"{'FlashAttention-2' if to == 'flash' else 'SDPA'} instead of eager attention " \
           "(no s x s score matrix)", {"attention": to}


def micro_batch(to_one: bool):
    def make(ctx):
        b, ga = ctx.sc.batch_size, ctx.sc.gradient_accumulation
        if not ctx.training or b < (3 if to_one else 2):
            return None
        m = 1 if to_one else next(d for d in range(b // 2, 0, -1) if b % d == 0)
        return (f"micro-batch {b} -> {m} with gradient accumulation {ga} -> {ga * b // m} "
                "(same global batch)", {"batch_size": m, "gradient_accumulation": ga * b // m})
    return make


def smaller_batch(ctx):
    b = ctx.sc.batch_size
    if ctx.training or b < 2 or ctx.task in ("serve", "render", "array") or \
            not ctx.offers("batch_size"):
        return None
    return f"batch {b} -> {b // 2} (more, smaller steps)", {"batch_size": b // 2}


def smaller_resolution(ctx):
    res = ctx.sc.resolution
    if not res or ctx.family not in ("cnn", "vit", "detection", "segmentation", "unet",
                                     "diffusion") or not ctx.offers("resolution"):
        return None
    step = 64 if ctx.family == "diffusion" else 32
    new = [max(step, int(r * 0.75) // step * step) for r in res]
    if new == list(res):
        return None
    return f"resolution {'x'.join(map(str, res))} -> {'x'.join(map(str, new))}", \
        {"resolution": new}


# ---- optimizer ------------------------------------------------------------------------------

def optimizer(to, title, frm=ADAM, families=None):
    def make(ctx):
        if not ctx.training or ctx.sc.optimizer not in frm or not ctx.offers("optimizer", to):
            return None
        if families is not None and ctx.family not in families:
            return None
        return title, {"optimizer": to}
    return make


def oib_ok(ctx) -> bool:
    return ctx.training and ctx.sc.gradient_accumulation == 1 and ctx.sc.optimizer != "none"


# ---- task -----------------------------------------------------------------------------------

def to_task(task, title):
    def make(ctx):
        if not ctx.training or ctx.task == task or not ctx.offers("task", task):
            return None
        if task == "lora" and ctx.task == "qlora":
            return None
        return title, {"task": task}
    return make


# ---- layout (multi-GPU plans as given) --------------------------------------------------------

def zero(stage):
    """ZeRO / FSDP over the shard group, data x context-parallel ranks (parallel.shard_group):
    context-parallel ranks hold the same parameters and reduce their gradients together, so
    they shard with the data ranks (torchtitan torchtitan/distributed/parallel_dims.py at
    b5bcd76: 'fsdp: For FSDP dimension. This includes dp_shard and cp'; Megatron-LM's
    distributed optimizer shards over get_data_parallel_group(with_context_parallel=True)).
    The title names the group as it is made: '2 data x context-parallel GPUs' at dp 1, cp 2."""
    def make(ctx):
        p = ctx.sc.parallel
        if not ctx.training or p.shard_group < 2 or p.zero >= stage:
            return None
        name = {1: "ZeRO-1 (optimizer states sharded)", 2: "ZeRO-2 / FSDP SHARD_GRAD_OP",
                3: "ZeRO-3 / FSDP FULL_SHARD"}[stage]
        group = "data x context-parallel" if p.context > 1 else "data-parallel"
        return f"{name} over the {p.shard_group} {group} GPUs", ctx.par(zero=stage)
    return make


def _heads_ok(ctx, t: int) -> bool:
    a = ctx.spec.arch
    return a.heads % t == 0 and (a.kv_heads % t == 0 or t % a.kv_heads == 0)


def regroup(dim, title, min_seq=0):
    def make(ctx):
        p = ctx.sc.parallel
        if not ctx.transformer or p.data < 2 or p.data % 2 or (ctx.sc.seq_len or 0) < min_seq:
            return None
        new = getattr(p, dim) * 2
        if dim == "tensor" and not _heads_ok(ctx, new):
            return None
        if dim == "pipeline" and new > ctx.spec.arch.total_layers:
            return None
        return (f"{title}: {dim} {getattr(p, dim)} -> {new} (data {p.data} -> {p.data // 2})",
                ctx.par(**{dim: new, "data": p.data // 2}))
    return make


def _tp(ctx) -> bool:
    return ctx.sc.parallel.tensor > 1


# ---- the catalogue ----------------------------------------------------------------------------

LEVERS: tuple[Lever, ...] = (
    Lever("mixed-precision", ("precision",), "fp32-to-mixed", mixed_precision),
    Lever("pure-16bit", ("precision",), "pure-16bit", pure_16bit),
    Lever("half-precision", ("precision",), "fp32-to-mixed", half_precision),
    Lever("weights-int8", ("precision",), "weights-int8", weights("int8", "int8 weights")),
    Lever("weights-fp8", ("precision",), "weights-fp8", weights("fp8", "fp8 weights")),
    Lever("weights-int4", ("precision",), "weights-int4",
          weights("int4", "int4 weights (GPTQ / AWQ)")),
    Lever("weights-nf4", ("precision",), "weights-nf4", weights("nf4", "NF4 weights")),
    Lever("checkpointing-selective", ("checkpointing",), "selective-recompute",
          ckpt("selective")),
    Lever("checkpointing-full", ("checkpointing",), "full-recompute", ckpt("full")),
    Lever("fused-attention", ("attention",), "fused-attention", fused_attention),
    Lever("micro-batch", ("batch",), "smaller-micro-batch", micro_batch(False)),
    Lever("micro-batch-1", ("batch",), "smaller-micro-batch", micro_batch(True), "micro-batch"),
    Lever("smaller-batch", ("batch",), "smaller-batch", smaller_batch),
    Lever("chunked-loss", ("opt:chunked-loss",), "chunked-loss",
          _option("chunked-loss", "chunked cross-entropy (no whole fp32 logits)",
                  lambda c: c.training)),
    Lever("compile", ("opt:compile",), "compile",
          _option("compile", "torch.compile (fused elementwise chains)")),
    Lever("expandable-segments", ("opt:expandable",), "expandable-segments",
          _option("expandable-segments", "expandable_segments allocator (no per-tensor 2 MiB rounding)")),
    Lever("fused-optimizer", ("opt:fused",), "fused-optimizer",
          _option("fused-optimizer", "fused AdamW (no foreach temporaries)",
                  lambda c: c.training and c.sc.optimizer in ADAM)),
    Lever("optimizer-in-backward", ("opt:oib",), "optimizer-in-backward",
          _option("optimizer-in-backward", "optimizer step in backward (gradients freed as "
                  "they are used)", oib_ok)),
    Lever("float8-linears", ("opt:float8",), "weights-fp8",
          _option("float8-linears", "float8 training of the linear layers (torchao)",
                  lambda c: c.task == "train" and c.supports("fp8"))),
    Lever("adamw-8bit", ("optimizer",), "adamw-8bit",
          optimizer("adamw-8bit", "8-bit AdamW (bitsandbytes)")),
    Lever("paged-adamw-8bit", ("optimizer",), "paged-adamw-8bit",
          optimizer("paged-adamw-8bit", "paged 8-bit AdamW (states in unified memory)",
                    ADAM + ("adamw-8bit",))),
    Lever("adafactor", ("optimizer",), "adafactor", optimizer("adafactor", "Adafactor "
          "(factored second moments, no first moment)", families=TRANSFORMER_FAMILIES)),
    Lever("lion", ("optimizer",), "lion", optimizer("lion", "Lion (one state per parameter)")),
    Lever("sgd-momentum", ("optimizer",), "sgd-momentum",
          optimizer("sgd-momentum", "SGD with momentum", families=("cnn",))),
    Lever("lora", ("task",), "lora", to_task("lora", "LoRA adapters on a frozen 16-bit base")),
    Lever("qlora", ("task",), "qlora", to_task("qlora", "QLoRA (LoRA on an NF4 base)")),
    Lever("zero-1", ("zero",), "zero", zero(1), "zero"),
    Lever("zero-2", ("zero",), "zero", zero(2), "zero"),
    Lever("zero-3", ("zero",), "zero", zero(3), "zero"),
    Lever("tensor-parallel", ("layout",), "tensor-parallel",
          regroup("tensor", "tensor parallelism")),
    Lever("pipeline-parallel", ("layout",), "pipeline-parallel",
          regroup("pipeline", "pipeline parallelism")),
    Lever("context-parallel", ("layout",), "context-parallel",
          regroup("context", "context parallelism", min_seq=8192)),
    Lever("sequence-parallel", ("opt:sp",), "tensor-parallel",
          _option("sequence-parallel", "sequence parallelism (norms and dropout split over "
                  "the tensor group)", _tp)),
    Lever("loss-parallel", ("opt:lp",), "tensor-parallel",
          _option("loss-parallel", "loss parallelism (logits stay sharded)", _tp)),
    Lever("offload-optimizer", ("off:optimizer",), "offload",
          _offload("optimizer", "optimizer states in CPU memory (ZeRO-Offload)",
                   when=lambda c: c.training)),
    Lever("offload-params", ("off:params", "zero"), "offload",
          _offload("params", "parameters in CPU memory, streamed in per layer",
                   extra=lambda c: c.par(zero=3) if c.training else {})),
    Lever("offload-activations", ("off:activations", "checkpointing"), "offload",
          _offload("activations", "checkpointed activations in pinned CPU memory",
                   extra=lambda c: {"checkpointing": "full"}, when=lambda c: c.training)),
    Lever("offload-gradients", ("off:gradients",), "offload",
          _offload("gradients", "gradients to CPU memory as they are produced",
                   when=lambda c: c.training)),
    Lever("model-cpu-offload", ("off:model",), "model-offload",
          _offload("model", "model CPU offload (one component on the GPU at a time)")),
    Lever("vae-tiling", ("opt:vae-tiling",), "vae-tiling",
          _option("vae-tiling", "VAE tiling (decode in tiles)")),
    Lever("vae-slicing", ("opt:vae-slicing",), "vae-slicing",
          _option("vae-slicing", "VAE slicing (decode one image at a time)")),
    Lever("layerwise-casting", ("precision", "opt:layerwise"), "layerwise-casting",
          layerwise_fp8),
    Lever("text-encoders-16bit", ("precision.text",), "fp32-to-mixed", text_encoders_16bit),
    Lever("quantise-text-encoder", ("precision.text",), "weights-int8", quantise_t5),
    Lever("kv-cache-fp8", ("serving.kv",), "kv-cache-fp8",
          serving("kv_cache_dtype", "fp8 KV cache", lambda c, sv: "fp8")),
    Lever("max-model-len", ("serving.len",), "job-change",
          serving("max_model_len", lambda v: f"max_model_len -> {v:,}",
                  lambda c, sv: sv.max_model_len // 2 if sv.max_model_len >= 2048 else None)),
    Lever("fewer-seqs", ("serving.seqs",), "job-change",
          serving("max_num_seqs", lambda v: f"max_num_seqs -> {v}",
                  lambda c, sv: sv.max_num_seqs // 2 if sv.max_num_seqs >= 2 else None)),
    Lever("gpu-memory-utilization", ("serving.util",), "job-change",
          serving("gpu_memory_utilization", lambda v: f"gpu_memory_utilization -> {v}",
                  fitting_utilisation)),
    Lever("cuda-graphs-off", ("serving.graphs",), "cuda-graphs-off",
          serving("cuda_graphs", "no CUDA graphs (enforce_eager)", lambda c, sv: False)),
    Lever("dynamic-cache", ("opt:cache",), "dynamic-cache",
          _option("dynamic-cache", "HF DynamicCache (KV grown in place)",
                  lambda c: c.task == "generate")),
    Lever("smaller-resolution", ("resolution",), "job-change", smaller_resolution),
    Lever("array-half-precision", ("dtype",), "half-precision-arrays", array_dtype),
    Lever("fewer-copies", ("copies",), "job-change", fewer_copies),
    Lever("fft-in-place", ("fft",), "fft-in-place", fft_in_place),
    Lever("msaa", ("msaa",), "render-format",
          render("msaa", lambda a, b: f"MSAA {a}x -> {b}x",
                 lambda v: v // 2 if v and v > 1 else None)),
    Lever("swapchain", ("swapchain",), "render-format",
          render("swapchain_images", lambda a, b: f"{a} -> {b} swapchain images",
                 lambda v: v - 1 if v and v > 2 else None)),
    Lever("render-format", ("formats",), "render-format",
          render("render_targets", lambda a, b: "RGBA32F targets in RGBA16F", formats_down)),
)
BY_ID = {lv.id: lv for lv in LEVERS}
