"""The key table's rows of the contract keys (`shared/SCENARIO.md`, in contract order) and
of their dotted sub-keys (lora.*, serving.*, parallel.*): type, range or choices, unit, the
tasks and families that take each, its default (or its derivation) and a one-line doc. Read
through `scenario.keys` (the table, its look-ups, the docs page and the CLI flags)."""
from __future__ import annotations

from ..catalog import list_models
from ..catalog.stacks import choices as stack_choices
from ..catalog.stacks import names as stack_names
from ..catalog.stacks import read_stack
from ..errors import ScenarioError
from ..hardware import default_db
from ..parallel import ParallelConfig
from ..vocab import (ATTENTION, CHECKPOINTING, DIFFUSION_FAMILIES, KV_CACHE_DTYPES, LORA_TASKS,
                     MODELLESS_TASKS, OPTIMIZERS, PRECISIONS, TASKS, TRAINING_TASKS,
                     TRANSFORMER_FAMILIES, VISION_FAMILIES)
from .parallel_keys import PARALLEL_KEYS
from .rules import (OFFLOAD, OPTIONS, SERVE_MAX_MODEL_LEN, SERVE_MAX_NUM_SEQS,
                    offload_choices, option_choices, position_limit, positions_error,
                    precisions_for, read_safety_margin, supported_tasks, vllm_batched_tokens)
from .schema import NO_MODEL, Key

__all__ = ["CONTRACT", "NESTED", "LIMIT", "BIG", "MODEL_TASKS"]

LIMIT = 1 << 30              # sanity bound for counts (tokens, batch)
BIG = 1 << 20                # frames, steps, ranks, pixels per side
MODEL_TASKS = tuple(t for t in TASKS if t not in MODELLESS_TASKS)


def _k(name, kind, label, doc, **kw) -> Key:
    return Key(name, kind, label, doc, **kw)


def _follows(name):
    """serve: the key follows `serving.<name>` (the couplings batch_size <-> max_num_seqs and
    seq_len <-> max_model_len: each defaults to the other)."""
    return lambda v: v.get(f"serving.{name}") if v.get("task") == "serve" else None


def _task_choices(r) -> tuple:
    """The tasks of the model given (the workload registry's table); the model-less ones
    when no model is given; every task while the model given cannot be read."""
    d = r.given if isinstance(r.given, dict) else {}
    if r.spec is None and (d.get("model") is not None or d.get("architecture") is not None):
        return TASKS
    return supported_tasks(r.family)


def _positions(r) -> tuple:
    """seq_len's bounds: 1 to the model's positions (`rules.position_limit`), else LIMIT."""
    lim = position_limit(r.spec)
    return 1, lim[0] if lim is not None else LIMIT


def _seq_len_alone(sc, v: int):
    """seq_len changed alone to `v` in a decoder's resolved plan (`schema.Key.plain`), by the
    rules between keys that read it (build.fields_of): the positions hold seq_len +
    new_tokens (`rules.positions_error`, the pass's check: its error where they do not), and
    with images their tokens too (`multimodal_keys.check_images`: its error where it names
    seq_len; where it names images the pass would drop them: it decides). None for other
    families and for serve (an encoder-decoder's target_len and serve's engine limits follow
    seq_len: the pass decides)."""
    from .multimodal_keys import check_images
    if sc.family != "decoder" or sc.task == "serve":
        return None
    new = sc.new_tokens or 0
    err = positions_error(sc.spec, v + new, "seq_len + new_tokens" if new else "seq_len")
    if err is not None:
        return err
    try:
        check_images(sc.spec, sc.extra, v, sc.new_tokens or 0)
    except ScenarioError as exc:
        return exc if exc.key == "seq_len" else None
    return True


_TR, _VI, _DI = TRANSFORMER_FAMILIES, VISION_FAMILIES, DIFFUSION_FAMILIES
_PIXELS = _VI + _DI + (NO_MODEL,)
_P = ParallelConfig()
_RANKS = dict(kind="int", lo=1, hi=BIG, unit="GPUs", shown_tasks=MODEL_TASKS)

CONTRACT = (
    _k("model", "choice", "Model", "catalog id (Hugging Face repo id; org optional when "
       "unique)", tasks=MODEL_TASKS, default_doc="none: `model` or `architecture` is required, "
       "except for render, volume, array",
       choices_of=lambda r: tuple(m.id for m in list_models()), seeds=True, kept=True,
       before_task=True, shows_if=lambda r: "architecture" not in (r.given or {})),
    _k("architecture", "object", "Architecture", "instead of `model`: a config.json object, "
       "or {\"params\": 7e9} for a size-only decoder", tasks=MODEL_TASKS, default_doc="none",
       seeds=True, kept=True, before_task=True,
       shows_if=lambda r: "architecture" in (r.given or {})),
    _k("task", "choice", "Task", "what the job does", choices=TASKS,
       default_doc="denoise for a diffusion pipeline, train for any other model; required "
       "without a model",
       choices_of=_task_choices, seeds=True, kept=True, before_task=True,
       default_of=lambda r: r.task),
    _k("batch_size", "int", "Batch size", "micro-batch per GPU (sequences, images, frames or "
       "requests)", lo=1, hi=LIMIT, shown_tasks=tuple(t for t in TASKS if t not in
                                                     ("render", "array", "load")),
       default=1, default_doc="1; serve: serving.max_num_seqs (256)", flag="--batch-size",
       derive=_follows("max_num_seqs"), plain=lambda sc, v: True),   # no rule reads it
    _k("seq_len", "int", "Sequence length", "tokens per sequence; for generate the prompt",
       unit="tokens", lo=1, hi=LIMIT, families=_TR, where="transformer models",
       shown_tasks=TRAINING_TASKS + ("forward", "generate", "serve"),
       default_doc="min(2048, positions); generate: min(512, positions / 2); serve: "
       "serving.max_model_len", derive=_follows("max_model_len"),
       bounds_of=_positions, plain=_seq_len_alone),
    _k("new_tokens", "int", "New tokens", "generate: tokens produced after the prompt",
       unit="tokens", lo=0, hi=LIMIT, families=_TR, tasks=("generate",),
       where="task 'generate'", default_doc="256"),
    _k("target_len", "int", "Target length", "encoder-decoder models: decoder tokens per "
       "sequence", unit="tokens", lo=1, hi=LIMIT, families=("encoder-decoder",),
       tasks=tuple(t for t in TASKS if t != "generate"),
       where="encoder-decoder models (train/forward; for generate use new_tokens)",
       shown_tasks=TRAINING_TASKS + ("forward",), default_doc="seq_len"),
    _k("text_len", "int", "Prompt tokens", "diffusion: prompt tokens given to the text "
       "encoders", unit="tokens", lo=1, hi=LIMIT, families=_DI, where="diffusion pipelines",
       model_given=True, default_doc="the model's (its text encoder's max length)"),
    _k("guidance", "bool", "Classifier-free guidance", "diffusion: CFG doubles the denoiser "
       "batch", families=_DI, where="diffusion pipelines", model_given=True,
       default_doc="the model's: true where the pipeline uses CFG (sampling tasks)"),
    _k("resolution", "resolution", "Resolution", "pixels or voxels of one input / frame / "
       "image: [h, w] or [d, h, w]", unit="pixels", lo=1, hi=BIG, families=_PIXELS,
       where="image, video, volume and diffusion workloads", model_given=True,
       default_doc="the model's native size; render 1080 x 1920, volume 512^3"),
    _k("frames", "int", "Frames", "video frames", unit="frames", lo=1, hi=BIG,
       families=_PIXELS, where="image, video, volume and diffusion workloads",
       model_given=True, default_doc="the model's (video pipelines)"),
    _k("steps", "int", "Steps", "denoising steps", unit="steps", lo=1, hi=BIG, families=_DI,
       where="diffusion pipelines", model_given=True,
       default_doc="the model's (sampling tasks)"),
    _k("precision", "choice", "Precision", "number format of weights and compute; or an "
       "object of pipeline component -> format with `default`", choices=PRECISIONS,
       shown_tasks=MODEL_TASKS, default_doc="train bf16-mixed, qlora nf4, render / volume / "
       "array fp32, else bf16; fp16 for bf16 on a GPU without bf16 (compute capability < 8.0)",
       choices_of=lambda r: precisions_for(r.task)),
    _k("optimizer", "choice", "Optimizer", "optimizer whose states are held", choices=OPTIMIZERS,
       tasks=TRAINING_TASKS, neutral="none", default_doc="adamw (training; unsloth "
       ">= 2025-02: adamw-8bit, its trainer default), else none"),
    _k("gradient_accumulation", "int", "Grad. accumulation", "micro-batches per optimizer step",
       unit="micro-batches", lo=1, hi=BIG, tasks=TRAINING_TASKS, neutral=1, default=1),
    _k("checkpointing", "choice", "Checkpointing", "activation recomputation",
       choices=CHECKPOINTING, tasks=TRAINING_TASKS, neutral="none", default="none"),
    _k("attention", "choice", "Attention", "eager materialises the score matrix; sdpa / flash "
       "do not", choices=ATTENTION, shown_families=_TR + _DI, default="sdpa",
       shown_tasks=tuple(t for t in TASKS if t != "load"),
       default_doc="sdpa; none for render, volume, array"),
    _k("lora", "object", "LoRA", "adapters: rank, alpha, target modules, dropout",
       tasks=LORA_TASKS, where="tasks " + ", ".join(LORA_TASKS) + " (use task 'lora' to "
       "train adapters)", default_doc="lora / qlora: the lora.* defaults; else none"),
    _k("parallel", "object", "Parallelism", "gpus = data x tensor x pipeline x context; ZeRO "
       "stage", default_doc="one GPU"),
    _k("offload", "multi", "Offload", "what lives in CPU memory", choices=tuple(OFFLOAD),
       shown_tasks=MODEL_TASKS, default=[],
       choices_of=lambda r: offload_choices(r.task, r.family)),
    _k("options", "multi", "Options", "framework switches that change memory",
       choices=tuple(OPTIONS), default=[],
       choices_of=lambda r: option_choices(r.task, r.family, r.given.get("stack")
                                           if isinstance(r.given, dict) else None)),
    _k("serving", "object", "Serving engine", "serve: the engine's KV pool and limits",
       tasks=("serve",), where="task 'serve'", default_doc="serve: the serving.* defaults"),
    _k("stack", "choice", "Software", "the software that runs the job: NAME or NAME@VERSION "
       "(a release such as 0.4, or a month such as 2025-06); names: " + ", ".join(
           stack_names()) + "; decides which framework memory mechanisms apply "
       "(app/vramplan/catalog/data/stacks.toml, each with its source)", parse=read_stack,
       shown_tasks=MODEL_TASKS, default_doc="pytorch (a plain loop: no framework mechanism; "
       "omitted from the normalised scenario)",
       choices_of=lambda r: stack_choices(r.family, r.task), seeds=True),
    _k("gpu", "choice", "GPU", "hardware-database id", default_doc="none (an estimate needs "
       "one)",
       choices_of=lambda r: tuple(dev.id for dev in default_db().devices), seeds=True,
       before_task=True),
    # the project's additions, after the contract's keys
    _k("safety_margin", "size", "Safety margin", "memory kept free: the limit that fits, max "
       "batch and the advisor compare device used with is usable memory less this; a share "
       "of usable memory (0.05 or '5%', below 50%) or a size ('2 GiB')",
       parse=read_safety_margin, flag="--safety-margin",
       default_doc="0: device used already counts the CUDA context, allocator slack and "
       "non-torch memory, and usable memory leaves out the driver's and ECC's share "
       "(scenario.rules.DEFAULT_SAFETY_MARGIN); omitted from the normalised scenario"),
)

NESTED = (
    _k("lora.rank", "int", "LoRA rank", "adapter rank r", lo=1, hi=65536, default=8,
       tasks=LORA_TASKS, shown_tasks=("lora", "qlora"), flag="--lora-rank"),
    _k("lora.alpha", "number", "LoRA alpha", "scaling alpha", lo=0, hi=1e6, lo_open=True,
       default=16, tasks=LORA_TASKS, shown_tasks=("lora", "qlora")),
    _k("lora.targets", "multi", "LoRA targets", "module names adapted (the model's linear "
       "layers)", default=["q_proj", "v_proj"], tasks=LORA_TASKS,
       shown_tasks=("lora", "qlora")),
    _k("lora.dropout", "number", "LoRA dropout", "adapter-input dropout (PEFT keeps a dropped "
       "copy of each adapted input when > 0)", lo=0, hi=0.999, default=0.0, tasks=LORA_TASKS,
       shown_tasks=("lora", "qlora")),
    _k("parallel.gpus", doc="GPUs in the job", label="GPUs", default=_P.gpus,
       default_doc="data x tensor x pipeline x context", flag="--gpus", **_RANKS),
    _k("parallel.data", doc="data-parallel ranks", label="Data parallel", default=_P.data,
       default_doc="gpus / (tensor x pipeline x context)", flag="--data", **_RANKS),
    _k("parallel.tensor", doc="tensor-parallel ranks", label="Tensor parallel",
       default=_P.tensor, flag="--tensor", **_RANKS),
    _k("parallel.pipeline", doc="pipeline stages", label="Pipeline parallel",
       default=_P.pipeline, flag="--pipeline", **_RANKS),
    _k("parallel.context", doc="context-parallel ranks", label="Context parallel",
       default=_P.context, flag="--context", **_RANKS),
    _k("parallel.zero", "int", "ZeRO / FSDP stage", "ZeRO stage over the data-parallel group: "
       "3 = FSDP full shard, 2 = FSDP shard-grad-op", lo=0, hi=3, default=_P.zero,
       shown_tasks=MODEL_TASKS, flag="--zero"),
    _k("serving.gpu_memory_utilization", "number", "GPU memory utilisation", "share of GPU "
       "memory the engine may take (weights, activations, KV pool)", lo=0, hi=1, lo_open=True,
       as_float=True, default=0.9, tasks=("serve",)),
    _k("serving.max_num_seqs", "int", "Max sequences", "concurrent requests", lo=1, hi=BIG,
       tasks=("serve",), unit="requests", default_doc="batch_size, else 256",
       derive=lambda v: v.get("batch_size") or SERVE_MAX_NUM_SEQS),
    _k("serving.max_model_len", "int", "Max model length", "tokens per sequence the pool "
       "holds", lo=1, hi=1 << 24, unit="tokens", tasks=("serve",),
       default_doc="seq_len, else the model's positions",
       derive=lambda v: v.get("seq_len") or v.get("_positions") or SERVE_MAX_MODEL_LEN),
    _k("serving.max_num_batched_tokens", "int", "Max batched tokens", "tokens in the engine's "
       "profile / prefill batch (sizes the activation peak)", lo=1, hi=1 << 24, unit="tokens",
       tasks=("serve",), default_doc="max(2048, min(max_model_len, 8192))",
       derive=lambda v: vllm_batched_tokens(v.get("serving.max_model_len"))),
    _k("serving.kv_cache_dtype", "choice", "KV cache dtype", "auto: the model's precision",
       choices=KV_CACHE_DTYPES, default="auto", tasks=("serve",)),
    _k("serving.cuda_graphs", "bool", "CUDA graphs", "captured decode graphs (their memory)",
       default=True, tasks=("serve",)),
) + PARALLEL_KEYS   # parallel.expert, parallel.virtual_stages (scenario/parallel_keys.py)
