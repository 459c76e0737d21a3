"""Scenario validation and normalisation: a dict in, a Scenario out, or one ScenarioError.

Order matters for the messages: unknown keys first, then the task and the model (the model's
family decides which keys apply), then each key in contract order.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from . import safejson
from .errors import ScenarioError, VramplanError, closest
from .vocab import TRANSFORMER_FAMILIES
from ._scenario_rules import (ATTENTION, CHECKPOINTING, LORA_TASKS, MODELLESS_TASKS, OFFLOAD,
                              OPTIMIZERS, OPTIONS, PRECISIONS, QUANTISED, TASKS, TRAINING_TASKS,
                              task_defaults)

TRANSFORMER = TRANSFORMER_FAMILIES
_LIMIT = 1 << 30   # sanity bound for counts (tokens, steps, frames, batch)


def supported_tasks(family: str | None) -> tuple[str, ...]:
    """The tasks a model family supports, in TASKS order: the workload registrations' table
    (`vramplan.workloads.family_tasks`); family None: the model-less tasks."""
    from .workloads.registry import family_tasks
    ok = set(family_tasks(family))
    return tuple(t for t in TASKS if t in ok)


def _default_task(spec) -> str:
    if spec is None:
        raise ScenarioError("task", f"is required when there is no model; one of "
                                    f"{', '.join(TASKS)}")
    ok = supported_tasks(spec.family)
    for task in ("denoise", "train"):      # a pipeline samples; any other model trains
        if task in ok:
            return task
    return ok[0] if ok else "train"


def _check_task_family(task: str, spec) -> None:
    """A task the model's family does not support is refused here, naming the valid ones."""
    if task in MODELLESS_TASKS or spec is None:
        return
    from .workloads.registry import families
    ok = supported_tasks(spec.family)
    if task in ok:
        return
    fam = spec.family
    if not ok:
        raise ScenarioError("task", f"no workload module estimates model family '{fam}' "
                                    f"('{spec.id}')")
    where = [f for f in families() if task in supported_tasks(f)]
    hint = f" ('{task}' is for {', '.join(where)} models)" if where else ""
    raise ScenarioError("task", f"'{task}' is not supported for {fam} models ('{spec.id}'); "
                                f"valid tasks: {', '.join(ok)}{hint}")


def model_defaults(task: str, spec) -> dict:
    """Keys the model's catalog config decides (resolution, steps, frames, text_len, guidance),
    from its family's defaults hook (`vramplan.workloads.family_defaults`); for the model-less
    tasks (spec None) the task's own hook (e.g. render's default resolution); JSON values."""
    from .workloads.registry import family_defaults
    return family_defaults(task, spec)


def _precision(v: Any, task: str, default: str):
    from .scenario import _enum
    if isinstance(v, str):
        p = _enum("precision", v, PRECISIONS)
    elif isinstance(v, dict):
        if not v:
            raise ScenarioError("precision", "an object needs at least 'default' or one "
                                             "component")
        out = {}
        for comp, pv in v.items():
            if not isinstance(comp, str) or not comp.replace("_", "").replace("-", "").isalnum():
                raise ScenarioError("precision", f"component names are identifiers, got {comp!r}")
            out[comp] = _enum(f"precision.{comp}", pv, PRECISIONS)
        out.setdefault("default", default)
        p = {"default": out.pop("default"), **dict(sorted(out.items()))}
        if len(p) == 1:
            p = p["default"]
    else:
        raise ScenarioError("precision", f"must be a string (one of {', '.join(PRECISIONS)}) or "
                                         f"an object of component -> precision; got {v!r}")
    base = p if isinstance(p, str) else p["default"]
    key = "precision" if isinstance(p, str) else "precision.default"
    if task == "train" and base in QUANTISED:
        raise ScenarioError(key, f"'{base}' is a weight format for inference or QLoRA bases; "
                                 f"task 'train' needs fp32, tf32, fp16, bf16, fp16-mixed or "
                                 f"bf16-mixed")
    if task == "qlora" and base not in QUANTISED:
        raise ScenarioError(key, f"task 'qlora' needs a quantised base (nf4, int4, int8 or fp8), "
                                 f"got '{base}'; use task 'lora' for a {base} base")
    return p


def build(cls, d: Any, *, base_dir: Path | None = None):
    from . import scenario as S
    if not isinstance(d, dict):
        raise ScenarioError("scenario", f"must be a JSON object, got {type(d).__name__}")
    extra_validators = S.extra_keys()
    known = S.CONTRACT_KEYS + tuple(extra_validators)
    for k in d:
        if k not in known:
            hint = closest(str(k), list(known), 3)
            raise ScenarioError(str(k), "unknown key" + (f"; did you mean {', '.join(hint)}?"
                                                        if hint else ""))

    for k, v in d.items():  # NaN / infinity / 3,000-deep values anywhere: refused by name
        if isinstance(v, (dict, list, tuple, float)):
            try:
                safejson.check_value(v, k)
            except VramplanError as exc:
                raise ScenarioError(k, str(exc).removeprefix(f"{k}: ")) from None

    # -- model ---------------------------------------------------------------------------------
    model = arch = spec = None
    if d.get("model") is not None and d.get("architecture") is not None:
        raise ScenarioError("architecture", "give either 'model' or 'architecture', not both")
    if d.get("model") is not None:
        model, spec = S._resolve_model(d["model"])
    elif d.get("architecture") is not None:
        arch, spec = S._resolve_architecture(d["architecture"], base_dir)

    task = d.get("task")
    task = S._enum("task", task, TASKS) if task is not None else _default_task(spec)
    if task in MODELLESS_TASKS and spec is not None:
        raise ScenarioError("model" if model else "architecture",
                            f"task '{task}' takes no model")
    if task not in MODELLESS_TASKS and spec is None:
        raise ScenarioError("model", f"task '{task}' needs a 'model' (catalog id) or an "
                                     f"'architecture'")
    family = spec.family if spec is not None else None
    _check_task_family(task, spec)
    transformer = family in TRANSFORMER
    arch_info = spec.arch if transformer else None
    maxpos = arch_info.max_positions if arch_info is not None else None
    defaults = task_defaults(task, family, maxpos)
    # what the model decides (native resolution, pipeline steps, ...) under what was given;
    # read and checked like given values
    src = {**model_defaults(task, spec), **{k: v for k, v in d.items() if v is not None}}

    def get(key, reader, *args):
        v = src.get(key)
        return defaults.get(key) if v is None else reader(key, v, *args)

    def only(key: str, ok: bool, where: str) -> None:
        if d.get(key) is not None and not ok:
            raise ScenarioError(key, f"applies to {where} only (task '{task}', model family "
                                     f"'{family}')")

    # -- sizes ---------------------------------------------------------------------------------
    only("seq_len", transformer, "transformer models")
    only("new_tokens", transformer and task == "generate", "task 'generate'")
    only("target_len", family == "encoder-decoder" and task != "generate",
         "encoder-decoder models (train/forward; for generate use new_tokens)")
    for k in ("resolution", "frames"):
        only(k, not transformer, "image, video, volume and diffusion workloads")
    for k in ("text_len", "guidance", "steps"):
        only(k, family == "diffusion", "diffusion pipelines")
    only("serving", task == "serve", "task 'serve'")
    only("lora", task in LORA_TASKS,
         "tasks " + ", ".join(LORA_TASKS) + " (use task 'lora' to train adapters)")

    batch_size = get("batch_size", S._int, 1, _LIMIT)
    seq_len = get("seq_len", S._int, 1, _LIMIT)
    new_tokens = get("new_tokens", S._int, 0, _LIMIT)
    target_len = get("target_len", S._int, 1, _LIMIT)
    if family == "encoder-decoder" and target_len is None and task in TRAINING_TASKS + ("forward",):
        target_len = seq_len
    text_len = get("text_len", S._int, 1, _LIMIT)
    guidance = get("guidance", S._bool)
    resolution = None
    if src.get("resolution") is not None:
        r = src["resolution"]
        if not isinstance(r, (list, tuple)) or len(r) not in (2, 3):
            raise ScenarioError("resolution", f"must be [h, w] or [d, h, w], got {r!r}")
        resolution = tuple(S._int("resolution", x, 1, 1 << 20) for x in r)
    frames = get("frames", S._int, 1, 1 << 20)
    steps = get("steps", S._int, 1, 1 << 20)

    if arch_info is not None and arch_info.learned_positions and seq_len is not None:
        total = seq_len + (new_tokens or 0)
        if total > maxpos:
            what = "seq_len + new_tokens" if new_tokens else "seq_len"
            raise ScenarioError("seq_len", f"{what} = {total} exceeds the {maxpos} positions "
                                           f"'{spec.id}' has (learned position embeddings)")

    # -- how it runs ---------------------------------------------------------------------------
    precision = _precision(d["precision"], task, defaults["precision"]) \
        if d.get("precision") is not None else defaults["precision"]
    optimizer = get("optimizer", S._enum, OPTIMIZERS)
    grad_acc = get("gradient_accumulation", S._int, 1, 1 << 20)
    checkpointing = get("checkpointing", S._enum, CHECKPOINTING)
    if task not in TRAINING_TASKS:
        for key, val, neutral in (("optimizer", optimizer, "none"),
                                  ("gradient_accumulation", grad_acc, 1),
                                  ("checkpointing", checkpointing, "none")):
            if val != neutral:
                raise ScenarioError(key, f"task '{task}' does not train; {key} must be "
                                         f"{neutral!r} (got {val!r})")
    attention = get("attention", S._enum, ATTENTION)

    lora = None
    if d.get("lora") is not None:
        lora = S.LoraConfig.from_dict(d["lora"])
    elif task in ("lora", "qlora"):
        lora = S.LoraConfig()

    parallel = S.ParallelConfig.from_dict(d["parallel"]) if d.get("parallel") is not None \
        else S.ParallelConfig()
    offload = S._names("offload", d["offload"], tuple(OFFLOAD)) \
        if d.get("offload") is not None else ()
    options = S._names("options", d["options"], tuple(OPTIONS)) \
        if d.get("options") is not None else ()

    serving = None
    if task == "serve":
        sv = d.get("serving") or {}
        if not isinstance(sv, dict):
            S._obj("serving", sv, S.ServingConfig.KEYS)
        given_bs = d.get("batch_size") is not None
        given_sl = d.get("seq_len") is not None
        serving = S.ServingConfig.from_dict(
            sv, max_num_seqs=batch_size if given_bs else defaults["batch_size"],
            max_model_len=seq_len if given_sl else (maxpos or 4096))
        if not given_bs:
            batch_size = serving.max_num_seqs
        if not given_sl:
            seq_len = serving.max_model_len
        if seq_len > serving.max_model_len:
            raise ScenarioError("seq_len", f"{seq_len} exceeds serving.max_model_len "
                                           f"{serving.max_model_len}")

    gpu = S._resolve_gpu(d["gpu"]) if d.get("gpu") is not None else None

    # -- workload-specific keys ----------------------------------------------------------------
    extra = {}
    key_tasks = getattr(S._extra_module(), "KEY_TASKS", {}) or {}
    for k, fn in extra_validators.items():
        if d.get(k) is not None:
            if key_tasks.get(k) and task not in key_tasks[k]:
                raise ScenarioError(k, f"applies to task {' / '.join(key_tasks[k])}, not "
                                       f"'{task}'")
            extra[k] = fn(d[k])
    if extra_validators:
        fill = S._extra_defaults(task, spec)
        for k, v in fill.items():
            if k in extra_validators and k not in extra and v is not None:
                extra[k] = v
        # contract keys a workload module may default (image size, steps, ...)
        resolution = resolution or (tuple(fill["resolution"]) if fill.get("resolution") else None)
        frames = frames if frames is not None else fill.get("frames")
        steps = steps if steps is not None else fill.get("steps")
        text_len = text_len if text_len is not None else fill.get("text_len")
        guidance = guidance if guidance is not None else fill.get("guidance")

    return cls(model=model, architecture=arch, task=task, batch_size=batch_size,
               seq_len=seq_len, new_tokens=new_tokens, target_len=target_len, text_len=text_len,
               guidance=guidance, resolution=resolution, frames=frames, steps=steps,
               precision=precision, optimizer=optimizer, gradient_accumulation=grad_acc,
               checkpointing=checkpointing, attention=attention, lora=lora, parallel=parallel,
               offload=offload, options=options, serving=serving, gpu=gpu, extra=extra)


# keys a task decides; on a task change they are re-defaulted when they held the old default
_TASK_SCOPED = ("batch_size", "seq_len", "new_tokens", "target_len", "precision", "optimizer",
                "gradient_accumulation", "checkpointing", "attention", "lora", "serving")


def replace_dict(sc, changes: dict) -> dict:
    """The dict Scenario.replace validates: the scenario with `changes`, where a task change
    drops values that were the old task's defaults or that the new task does not take."""
    from . import scenario as S
    for k in changes:
        if k not in S.CONTRACT_KEYS and k not in S.extra_keys():
            raise ScenarioError(k, "unknown key")
    base = sc.to_dict()
    if "model" in changes or "architecture" in changes:
        base.pop("model", None)
        base.pop("architecture", None)
    new_task = changes.get("task", sc.task)
    if new_task != sc.task or "model" in changes or "architecture" in changes:
        spec = sc.spec
        fam = spec.family if spec is not None else None
        maxpos = spec.arch.max_positions if spec is not None and fam in TRANSFORMER else None
        old = task_defaults(sc.task, fam, maxpos)
        old["lora"] = S.LoraConfig().to_dict() if sc.task in ("lora", "qlora") else None
        old["target_len"] = base.get("seq_len")
        old_extra = {**S._extra_defaults(sc.task, spec), **model_defaults(sc.task, spec)}
        for k, v in old_extra.items():
            if k in base and k not in changes and base[k] == v:
                del base[k]
        for k in _TASK_SCOPED:
            if k in base and k not in changes and (base[k] == old.get(k) or k == "serving"):
                del base[k]
    merged = {**base, **{k: v for k, v in changes.items()}}
    merged = {k: v for k, v in merged.items() if v is not None}
    # drop values the new task rejects (never the ones asked for)
    for _ in range(len(merged)):
        try:
            S.Scenario.from_dict(merged)
            break
        except ScenarioError as exc:
            k = exc.key.split(".")[0]
            if k in changes or k not in merged or k in ("model", "architecture", "gpu", "task"):
                raise
            del merged[k]
    return merged
