"""The key table: every scenario key once, with its type, range or choices, unit, the tasks and
model families that take it, its default (or how it is defaulted) and a one-line doc.

Validation and normalisation (`build.py`), the URL query string (`query.py`), the CLI flags
(`cli_flags()`), the docs page of keys (`markdown()`, docs/scenario-keys.md) and the UI's form
(`form.py`) are derived from it. Contract keys (`shared/SCENARIO.md`) come in contract order;
nested keys are dotted (`parallel.tensor`, `lora.rank`, `serving.kv_cache_dtype`); the
workload-specific keys (render, volume, array, video) are `extra` and live in
`Scenario.extra`.
"""
from __future__ import annotations

import re
from typing import Any, Callable, NamedTuple

from ..catalog.stacks import names as stack_names
from ..catalog.stacks import read_stack
from ..parallel import ParallelConfig
from ..vocab import (ATTENTION, CHECKPOINTING, DIFFUSION_FAMILIES, KV_CACHE_DTYPES, LORA_TASKS,
                     MODELLESS_TASKS, OPTIMIZERS, PRECISIONS, TASKS, TRAINING_TASKS,
                     TRANSFORMER_FAMILIES, VISION_FAMILIES)
from . import extra as X
from . import inference_keys as IK
from .multimodal_keys import MULTIMODAL_KEYS
from .parallel_keys import PARALLEL_KEYS
from .rules import (OFFLOAD, OPTIONS, SERVE_MAX_MODEL_LEN, SERVE_MAX_NUM_SEQS,
                    read_safety_margin, vllm_batched_tokens)
from .schema import KINDS, NO_MODEL, Key

LIMIT = 1 << 30              # sanity bound for counts (tokens, batch)
BIG = 1 << 20                # frames, steps, ranks, pixels per side
MODEL_TASKS = tuple(t for t in TASKS if t not in MODELLESS_TASKS)


def _k(name, kind, label, doc, **kw) -> Key:
    return Key(name, kind, label, doc, **kw)


def _follows(name):
    """serve: the key follows `serving.<name>` (the couplings batch_size <-> max_num_seqs and
    seq_len <-> max_model_len: each defaults to the other)."""
    return lambda v: v.get(f"serving.{name}") if v.get("task") == "serve" else None


_TR, _VI, _DI = TRANSFORMER_FAMILIES, VISION_FAMILIES, DIFFUSION_FAMILIES
_PIXELS = _VI + _DI + (NO_MODEL,)
_P = ParallelConfig()
_RANKS = dict(kind="int", lo=1, hi=BIG, unit="GPUs", shown_tasks=MODEL_TASKS)

CONTRACT = (
    _k("model", "choice", "Model", "catalog id (Hugging Face repo id; org optional when "
       "unique)", tasks=MODEL_TASKS, default_doc="none: `model` or `architecture` is required, "
       "except for render, volume, array"),
    _k("architecture", "object", "Architecture", "instead of `model`: a config.json object, "
       "or {\"params\": 7e9} for a size-only decoder", tasks=MODEL_TASKS, default_doc="none"),
    _k("task", "choice", "Task", "what the job does", choices=TASKS,
       default_doc="denoise for a diffusion pipeline, train for any other model; required "
       "without a model"),
    _k("batch_size", "int", "Batch size", "micro-batch per GPU (sequences, images, frames or "
       "requests)", lo=1, hi=LIMIT, shown_tasks=tuple(t for t in TASKS if t not in
                                                     ("render", "array", "load")),
       default=1, default_doc="1; serve: serving.max_num_seqs (256)", flag="--batch-size",
       derive=_follows("max_num_seqs")),
    _k("seq_len", "int", "Sequence length", "tokens per sequence; for generate the prompt",
       unit="tokens", lo=1, hi=LIMIT, families=_TR, where="transformer models",
       shown_tasks=TRAINING_TASKS + ("forward", "generate", "serve"),
       default_doc="min(2048, positions); generate: min(512, positions / 2); serve: "
       "serving.max_model_len", derive=_follows("max_model_len")),
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
       "array fp32, else bf16; fp16 for bf16 on a GPU without bf16 (compute capability < 8.0)"),
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
       shown_tasks=MODEL_TASKS, default=[]),
    _k("options", "multi", "Options", "framework switches that change memory",
       choices=tuple(OPTIONS), default=[]),
    _k("serving", "object", "Serving engine", "serve: the engine's KV pool and limits",
       tasks=("serve",), where="task 'serve'", default_doc="serve: the serving.* defaults"),
    _k("stack", "choice", "Software", "the software that runs the job: NAME or NAME@VERSION "
       "(a release such as 0.4, or a month such as 2025-06); names: " + ", ".join(
           stack_names()) + "; decides which framework memory mechanisms apply "
       "(app/vramplan/catalog/data/stacks.toml, each with its source)", parse=read_stack,
       shown_tasks=MODEL_TASKS, default_doc="pytorch (a plain loop: no framework mechanism; "
       "omitted from the normalised scenario)"),
    _k("gpu", "choice", "GPU", "hardware-database id", default_doc="none (an estimate needs "
       "one)"),
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


def _x(name, kind, label, doc, tasks, **kw) -> Key:
    return Key(name, kind, label, doc, tasks=tasks, extra=True, whole_floats=True,
               as_float=True, fold_case=True, **kw)


_R, _VOL, _ARR = ("render",), ("volume",), ("array",)
EXTRA = (
    _x("render_targets", "object", "Render targets", "targets of the frame: [{\"format\", "
       "\"count\" (1-16), \"name\", \"scale\" (0-4 per side), \"msaa\" (bool)}]; several "
       "colour targets = a G-buffer", _R, parse=X.render_targets,
       default=X.render_targets([{"name": "color", "format": "rgba8"},
                                 {"name": "depth", "format": "d32f"}])),
    _x("msaa", "choice", "MSAA", "samples per pixel", _R, choices=X.MSAA_SAMPLES,
       parse=X.msaa, default=1, unit="samples"),
    _x("swapchain_images", "int", "Swapchain images", "presentable 8-bit images (also the MSAA "
       "resolve target)", _R, lo=1, hi=8, default=3, unit="images"),
    _x("frames_in_flight", "int", "Frames in flight", "CPU-GPU frames in flight (per-frame "
       "upload buffers are part of geometry_budget)", _R, lo=1, hi=8, default=2,
       unit="frames"),
    _x("texture_budget", "size", "Texture budget", "resident textures", _R, default=0,
       unit="bytes"),
    _x("geometry_budget", "size", "Geometry budget", "vertex / index / acceleration-structure "
       "buffers", _R, default=0, unit="bytes"),
    _x("fps", "number", "Frame rate", "target frame rate for the bandwidth need", _R, lo=0.0,
       hi=1000.0, lo_open=True, default=60.0, unit="frames/s"),
    _x("overdraw", "number", "Overdraw", "fragments shaded per pixel in the geometry pass", _R,
       lo=1.0, hi=50.0, default=2.0),
    _x("texture_bytes_per_pixel", "number", "Texture bytes per fragment", "texture bytes "
       "fetched from DRAM per fragment", _R, lo=0.0, hi=1024.0, default=16.0, unit="bytes"),
    _x("channels", "int", "Channels", "values per voxel", _VOL, lo=1, hi=4096, default=1),
    _x("dtype", "choice", "Data type", "element type of the voxels", ("volume", "array"),
       choices=tuple(X.ARRAY_DTYPES), by_task={"volume": "float32"}, shown_tasks=_VOL),
    _x("copies", "int", "Copies", "volumes (or every array) resident at once: input, working, "
       "output...", ("volume", "array"), lo=1, hi=64, by_task={"volume": 3, "array": 1},
       unit="copies"),
    _x("patch", "resolution", "Patch", "[d, h, w] training patch of a 3-D network given as "
       "model (no model is accepted for volume yet: no effect)", _VOL, parse=X.patch,
       shown_tasks=(), unit="voxels"),
    _x("arrays", "object", "Arrays", "[{\"name\" (unique), \"shape\" (1-8 ints), \"dtype\" "
       "(default float32), \"count\" (default 1)}]", _ARR, parse=X.arrays, default=[],
       unit="elements"),
    _x("work_buffers", "object", "Work buffers", "{\"fft\": none | in-place | out-of-place, "
       "\"fft_dtype\", \"solver\": none | cg | bicgstab | gmres, \"restart\", "
       "\"solver_dtype\"} over the largest array / one volume", ("array", "volume"),
       parse=X.work_buffers, default=X.work_buffers({})),
    _x("video", "object", "Video sessions", "NVENC/NVDEC sessions {\"mode\", \"codec\", "
       "\"streams\", \"format\", \"surfaces\", \"lookahead\", \"bframes\"}; the frame is "
       "`resolution`", _R, parse=X.video),
    # inference on decoders (issue 21.5): speculative decoding and layers / experts in host
    # memory (scenario/inference_keys.py; workloads/transformer/speculative.py, offload_inference.py)
    _x("speculative", "object", "Speculative decoding", "{\"method\": draft_model | eagle | "
       "eagle3 | mtp | ngram, \"model\" (draft_model: the draft's catalog id), "
       "\"num_speculative_tokens\"} as vLLM's speculative_config: the proposer's weights, its "
       "KV cache and the verify step's extra tokens", ("generate", "serve"),
       families=("decoder",), where="decoders, tasks generate / serve",
       parse=IK.read_speculative, default_doc="none (no speculation)"),
    _x("offload_layers", "int", "Layers in host memory", "decoder layers whose weights stay in "
       "CPU memory (accelerate device_map 'cpu' for the last N layers), copied to the GPU for "
       "their forward", ("generate",), families=("decoder",),
       where="decoders, task generate", lo=0, hi=BIG, unit="layers", default_doc="0"),
    _x("offload_experts", "int", "MoE layers' experts in host memory", "MoE layers whose "
       "routed experts stay in CPU memory (llama.cpp --n-cpu-moe N: the first N); the GPU "
       "reads the experts a step routes to over the host link", ("generate",),
       families=("decoder",), where="MoE decoders, task generate", lo=0, hi=BIG,
       unit="layers", default_doc="0"),
) + MULTIMODAL_KEYS   # images, image_size (scenario/multimodal_keys.py)

KEYS: tuple[Key, ...] = CONTRACT + NESTED + EXTRA
BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}
CONTRACT_KEYS: tuple[str, ...] = tuple(k.name for k in CONTRACT)
EXTRA_NAMES: tuple[str, ...] = tuple(k.name for k in EXTRA)
assert not set(CONTRACT_KEYS) & set(EXTRA_NAMES) and all(k.kind in KINDS for k in KEYS)


def key(name: str) -> Key:
    return BY_NAME[name]


def subkeys(parent: str) -> tuple[Key, ...]:
    """The dotted keys of an object key (`lora` -> lora.rank, lora.alpha, ...)."""
    return tuple(k for k in NESTED if k.parent == parent)


def sub_names(parent: str) -> tuple[str, ...]:
    return tuple(k.name.split(".", 1)[1] for k in subkeys(parent))


def keys_for(task: str, family: str | None) -> tuple[Key, ...]:
    """The keys a scenario of this task and model family accepts (nested ones included)."""
    return tuple(k for k in KEYS if k.applies(task, family) and
                 (k.parent is None or BY_NAME[k.parent].applies(task, family)))


DERIVED: tuple[Key, ...] = tuple(k for k in KEYS if k.derive is not None)


def derive(values: dict) -> dict:
    """`values` (dotted keys; 'task', '_positions') with every missing key whose row derives
    it from others filled in, until nothing changes: the serving couplings (batch_size <->
    serving.max_num_seqs, seq_len <-> serving.max_model_len: each defaults to the other)
    and vLLM's max_num_batched_tokens. The one place these rules are written."""
    out = dict(values)
    for _ in range(len(DERIVED)):
        moved = False
        for k in DERIVED:
            if out.get(k.name) is None:
                v = k.derive(out)
                if v is not None:
                    out[k.name], moved = v, True
        if not moved:
            break
    return out


# ---- the workload-specific keys as plain tables --------------------------------------------

EXTRA_KEYS: dict[str, Callable[[Any], Any]] = {k.name: k.read for k in EXTRA}
KEY_TASKS: dict[str, tuple[str, ...]] = {k.name: k.tasks for k in EXTRA}


def EXTRA_DEFAULTS(task: str) -> dict:  # noqa: N802 (the name the workloads know)
    """Defaults of the workload keys a task reads (a fresh copy; empty for other tasks);
    None where a key has no default (`video`, `patch`)."""
    return {k.name: k.default_for(task) for k in EXTRA if task in k.tasks}


def normalise_extra(d: dict, task: str) -> dict:
    """Validate the workload keys present in `d` (other keys are ignored) and return the
    task's defaults updated with the normalised values; a key the task does not read is
    refused."""
    out = EXTRA_DEFAULTS(task)
    for k, v in d.items():
        if k in EXTRA_KEYS:
            if task not in KEY_TASKS[k]:
                raise BY_NAME[k].refusal(task, None)
            out[k] = EXTRA_KEYS[k](v)
    return out


# ---- the docs page (docs/scenario-keys.md) ---------------------------------------------------

_DOC_HEAD = """# Scenario keys

Generated from the key table `vramplan.scenario.keys` (`keys.markdown()`); a test checks that
this file equals it. Edit the table, then run `.venv/bin/python -c "from vramplan.scenario.keys
import markdown; print(markdown(), end='')" > docs/scenario-keys.md`.

The contract keys (`shared/SCENARIO.md`) keep their names and meanings; the rules between keys
(defaults by task, serve's linked limits, parallel products) are in `docs/scenario.md`. A key
given where it does not apply is refused, naming it. Nested keys are dotted. "the model's":
the model family's defaults hook (`vramplan.workloads.registry.family_defaults`) reads the
catalog entry.
"""

_DOC_EXTRA = """## Workload-specific keys

The contract lets the project add keys for workloads it does not name. They are validated by
the table (each refuses a wrong type, value or range naming the key, dotted for nested parts:
`render_targets[1].format`), defaulted by task, stored in `Scenario.extra` and written flat by
`to_dict`. Sizes are bytes (int) or a size string with an explicit unit (`"2 GiB"`,
`"500MB"`). Diffusion pipelines need no new keys: `text_len`, `guidance`, `resolution`,
`frames`, `steps`, per-component `precision`, `offload: ["model"]` and the options carry them.
Video is a key of `render` rather than a task because the contract's task list is fixed and
video surfaces, like render targets, are driver allocations (no caching allocator).
"""


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(rows, applies: bool = True, task: str | None = None) -> list[str]:
    head = ["key", "type", "default", "meaning", "unit"]
    if applies:
        head.insert(2, "applies to")
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for k in rows:
        cells = [f"`{k.name}`", k.type_text(), k.default_text(task), k.doc, k.unit or "-"]
        if applies:
            cells.insert(2, k.applies_text())
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return out


def markdown() -> str:
    """docs/scenario-keys.md: every key of the table."""
    lines = [_DOC_HEAD, "## Contract keys", ""] + _table(CONTRACT)
    lines += ["", "## Nested keys", ""] + _table(NESTED)
    lines += ["", _DOC_EXTRA]
    for task in MODELLESS_TASKS:
        lines += [f"### task `{task}`", ""]
        lines += _table([k for k in EXTRA if task in k.tasks], applies=False, task=task) + [""]
    inference = [k for k in EXTRA if not set(k.tasks) & set(MODELLESS_TASKS)]
    if inference:   # workload keys of model tasks (speculative decoding, inference offload)
        lines += ["### model tasks", ""] + _table(inference) + [""]
    return "\n".join(lines).rstrip() + "\n"


# ---- CLI flags -------------------------------------------------------------------------------

class Flag(NamedTuple):
    """One command-line flag of a scalar key: `type` is int, float, str, bool (a
    --flag / --no-flag switch) or a parser of text (resolution: '1024x1024')."""
    flag: str
    dest: str
    type: Any
    choices: tuple | None
    help: str


def parse_resolution(text: str) -> list[int]:
    """'1024x1024', '1024,1024', '64x128x128' -> [ints] (ValueError otherwise)."""
    parts = [p for p in re.split(r"[x×*,\s]+", str(text).strip().lower()) if p]
    if len(parts) not in (2, 3):
        raise ValueError(f"not HxW or DxHxW: {text!r}")
    return [int(p) for p in parts]


_FLAG_TYPES = {"int": int, "number": float, "bool": bool, "choice": str, "size": str,
               "resolution": parse_resolution}


def flag_of(k: Key) -> str:
    return k.flag or "--" + k.name.replace(".", "-").replace("_", "-")


def cli_flags() -> list[Flag]:
    """A flag for every scalar key of the table (objects and lists have none), in table
    order: (flag, dest, type, choices, help). `scenario_from_flags` maps parsed values back."""
    out = []
    for k in KEYS:
        if k.kind not in _FLAG_TYPES or k.shown_tasks == ():
            continue
        choices = tuple(k.choices) if k.choices else None
        if choices is None and k.kind == "int" and k.lo is not None and k.hi is not None \
                and k.hi - k.lo <= 8:  # a small integer range reads best as choices (zero 0-3)
            choices = tuple(range(int(k.lo), int(k.hi) + 1))
        typ = int if choices and isinstance(choices[0], int) else _FLAG_TYPES[k.kind]
        flag = flag_of(k)
        dflt = k.default_text()
        where = k.applies_text()
        help_ = k.doc + ("" if where == "all" else f" ({where})") + \
            ("" if dflt == "none" else f"; default {dflt.replace('`', '')}")
        out.append(Flag(flag, flag[2:].replace("-", "_"), typ, choices, help_.replace("%", "%%")))
    return out


def scenario_from_flags(values: dict) -> dict:
    """{dest: value} of parsed flags (None: not given) -> the scenario dict they spell,
    nested keys as objects (`--lora-rank 16` -> {"lora": {"rank": 16}})."""
    by_dest = {f.dest: k for f, k in zip(cli_flags(), (k for k in KEYS
                                                       if k.kind in _FLAG_TYPES and
                                                       k.shown_tasks != ()))}
    d: dict = {}
    for dest, v in values.items():
        if v is None or dest not in by_dest:
            continue
        name = by_dest[dest].name
        if "." in name:
            top, sub = name.split(".", 1)
            d.setdefault(top, {})[sub] = v
        else:
            d[name] = v
    return d


