"""Scenario validation and normalisation: a dict in, the Scenario's fields out, or one
ScenarioError naming the key. Types, ranges, choices and which tasks and model families take
a key are read from the key table (`keys.py`); the defaults by task from `rules.py`.

Order matters for the messages: unknown keys first, then the model and the task (the model's
family decides which keys apply), then the keys the task or family does not take, then each
value in contract order, then the rules between keys.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..catalog.stacks import default_optimizer as stack_optimizer
from ..errors import ScenarioError, closest
from ..readers import read_choice, read_json, read_obj
from ..vocab import MODELLESS_TASKS, TRAINING_TASKS, TRANSFORMER_FAMILIES
from ..workloads.registry import unknown_lora_targets
from . import keys as K
from .keys import (BY_NAME, CONTRACT_KEYS, EXTRA, EXTRA_DEFAULTS, EXTRA_NAMES, derive, key,
                   sub_names)
from .parallel_keys import check_layout
from .parts import LoraConfig, ParallelConfig, ServingConfig
from .multimodal_keys import check_images
from .inference_keys import check_offload_experts
from .resolve import resolve_architecture, resolve_gpu, resolve_model
from .rules import (default_task, max_positions, model_given,
                    positions_error, precisions_for, stack_allows, supported_tasks,
                    task_defaults, task_hint)

__all__ = ["fields_of", "given_keys", "read_precision", "read_lora", "check_lora_targets",
           "read_parallel",
           "read_serving", "check_known", "model_of", "task_of", "refuse_inapplicable",
           "refuse_non_neutral", "KNOWN"]

KNOWN = CONTRACT_KEYS + EXTRA_NAMES


def _known() -> tuple[str, ...]:
    """Every key name of the table, read when asked (a row added to the table is known)."""
    return K.CONTRACT_KEYS + K.EXTRA_NAMES


def given_keys(d: Any) -> frozenset:
    """The keys a scenario dict gives (not None): top-level names, and `lora.rank` and the
    like for the sub-keys of lora / parallel / serving given as objects or dotted."""
    out = set()
    for k, v in (d.items() if isinstance(d, dict) else ()):
        if v is None or v == "":
            continue
        top = str(k).split(".")[0]
        out.add(str(k) if top in _OBJECTS else top)
        if top in _OBJECTS and isinstance(v, dict):
            out.update(f"{top}.{s}" for s, x in v.items() if x is not None)
    return frozenset(out)


_OBJECTS = ("lora", "parallel", "serving")


def check_known(d: dict) -> None:
    known = _known()
    for k in d:
        if k not in known:
            hint = closest(str(k), list(known), 3)
            raise ScenarioError(str(k), "unknown key" + (f"; did you mean {', '.join(hint)}?"
                                                        if hint else ""))


def model_of(d: dict, base_dir: Path | None):
    """(model id, architecture dict, ModelSpec), each None when not given."""
    if d.get("model") is not None and d.get("architecture") is not None:
        raise ScenarioError("architecture", "give either 'model' or 'architecture', not both")
    if d.get("model") is not None:
        model, spec = resolve_model(d["model"])
        return model, None, spec
    if d.get("architecture") is not None:
        arch, spec = resolve_architecture(d["architecture"], base_dir)
        return None, arch, spec
    return None, None, None


def task_of(d: dict, spec) -> str:
    """The scenario's task, checked against the model (or its absence) and the model's family
    (`rules.supported_tasks`: the workload registry's table)."""
    task = d.get("task")
    if task is None:
        task = default_task(spec)
        if task is None:
            raise ScenarioError("task", f"is required when there is no model; one of "
                                        f"{', '.join(key('task').choices)}")
    task = key("task").read(task)
    if task in MODELLESS_TASKS and spec is not None:
        raise ScenarioError("model" if d.get("model") is not None else "architecture",
                            f"task '{task}' takes no model")
    if task not in MODELLESS_TASKS and spec is None:
        raise ScenarioError("model", f"task '{task}' needs a 'model' (catalog id) or an "
                                     f"'architecture'")
    if spec is not None and task not in supported_tasks(spec.family):
        ok = supported_tasks(spec.family)
        if not ok:
            raise ScenarioError("task", f"no workload module estimates model family "
                                        f"'{spec.family}' ('{spec.id}')")
        raise ScenarioError("task", f"'{task}' is not supported for {spec.family} models "
                                    f"('{spec.id}'); valid tasks: {', '.join(ok)}"
                                    f"{task_hint(task)}")
    return task


def refuse_inapplicable(d: dict, task: str, family: str | None) -> None:
    """A key the task or model family does not take is refused (one that takes a neutral
    value elsewhere, such as optimizer 'none', is checked with its value)."""
    for name in _known():
        k = BY_NAME[name]
        if (d.get(name) is not None and name not in ("model", "architecture")
                and not k.has_neutral and not k.applies(task, family)):
            raise k.refusal(task, family)


def refuse_non_neutral(name: str, value: Any, task: str, family: str | None) -> None:
    """A key that takes only its neutral value where it does not apply (optimizer 'none',
    gradient_accumulation 1, checkpointing 'none' on the tasks that do not train)."""
    k = BY_NAME[name]
    if k.has_neutral and not k.applies(task, family) and value != k.neutral:
        raise ScenarioError(name, f"task '{task}' does not train; {name} must be "
                                  f"{k.neutral!r} (got {value!r})")


def read_precision(v: Any, task: str, default: str):
    k = key("precision")
    if isinstance(v, str):
        p = k.read(v)
    elif isinstance(v, dict):
        if not v:
            raise ScenarioError("precision", "an object needs at least 'default' or one "
                                             "component")
        out = {}
        for comp, pv in v.items():
            if not isinstance(comp, str) or not comp.replace("_", "").replace("-", "").isalnum():
                raise ScenarioError("precision", f"component names are identifiers, got {comp!r}")
            out[comp] = read_choice(f"precision.{comp}", pv, k.choices)
        out.setdefault("default", default)
        p = {"default": out.pop("default"), **dict(sorted(out.items()))}
        if len(p) == 1:
            p = p["default"]
    else:
        raise ScenarioError("precision", f"must be a string (one of {', '.join(k.choices)}) or "
                                         f"an object of component -> precision; got {v!r}")
    base = p if isinstance(p, str) else p["default"]
    name = "precision" if isinstance(p, str) else "precision.default"
    if base not in precisions_for(task):
        if task == "train":
            raise ScenarioError(name, f"'{base}' is a weight format for inference or QLoRA "
                                      f"bases; task 'train' needs "
                                      f"{', '.join(precisions_for(task)[:-1])} or "
                                      f"{precisions_for(task)[-1]}")
        if task == "qlora":
            raise ScenarioError(name, f"task 'qlora' needs a quantised base (nf4, int4, int8 or "
                                      f"fp8), got '{base}'; use task 'lora' for a {base} base")
        raise ScenarioError(name, f"task '{task}' takes {', '.join(precisions_for(task))}; "
                                  f"got '{base}'")
    return p


def _sub(parent: str, d: dict, name: str, default):
    return key(f"{parent}.{name}").read(d.get(name, default))


def read_lora(v: Any) -> LoraConfig:
    d = read_obj("lora", v, sub_names("lora"))
    targets = _sub("lora", d, "targets", list(LoraConfig.targets))
    if not targets:
        raise ScenarioError("lora.targets", "must name at least one module")
    return LoraConfig(rank=_sub("lora", d, "rank", LoraConfig.rank),
                      alpha=_sub("lora", d, "alpha", LoraConfig.alpha), targets=targets,
                      dropout=_sub("lora", d, "dropout", LoraConfig.dropout))


def check_lora_targets(spec, targets) -> None:
    """Refuse target names the model's workload would match to no module (they would silently
    give a plan without those adapters), naming the valid ones (the family's declaration,
    `vramplan.workloads.registry.unknown_lora_targets`)."""
    bad, valid = unknown_lora_targets(spec, targets)
    if bad:
        names = ", ".join(repr(str(b)[:60]) for b in bad)
        raise ScenarioError("lora.targets", f"{names} "
                            f"{'is not a module name' if len(bad) == 1 else 'are not module names'}"
                            f" of {spec.id} ({spec.family}); valid: {', '.join(valid)}")


def read_parallel(v: Any) -> ParallelConfig:
    """gpus == data * tensor * pipeline * context; with gpus but no data, data is derived
    (must divide); with neither, data is 1."""
    d = read_obj("parallel", v, sub_names("parallel"))
    t, p, c = (_sub("parallel", d, k, 1) for k in ("tensor", "pipeline", "context"))
    zero = _sub("parallel", d, "zero", 0)
    model = t * p * c
    gpus = key("parallel.gpus").read(d["gpus"]) if "gpus" in d else None
    data = key("parallel.data").read(d["data"]) if "data" in d else None
    if data is None:
        if gpus is None:
            data = 1
        elif gpus % model:
            raise ScenarioError("parallel.gpus", f"{gpus} is not a multiple of tensor * "
                                f"pipeline * context = {model}")
        else:
            data = gpus // model
    if gpus is None:
        gpus = data * model
    if gpus != data * model:
        raise ScenarioError("parallel.gpus", f"{gpus} != data * tensor * pipeline * context "
                            f"= {data} * {t} * {p} * {c} = {data * model}")
    ev = {k: _sub("parallel", d, k, 1) for k in ("expert", "virtual_stages")}
    return ParallelConfig(gpus=gpus, data=data, tensor=t, pipeline=p, context=c, zero=zero,
                          **ev)   # expert / virtual_stages rules: parallel_keys.check_layout


def read_serving(v: Any, values: dict) -> ServingConfig:
    """The engine: the serving.* values given, the others derived by their rows
    (`keys.derive`) from them and from `values` (the given batch_size / seq_len, 'task',
    '_positions')."""
    d = read_obj("serving", v, sub_names("serving"))
    got = {f"serving.{k}": _sub("serving", d, k, None) for k in sub_names("serving") if k in d}
    full = derive({**values, **got})
    return ServingConfig(**{k: full.get(f"serving.{k}", key(f"serving.{k}").default)
                            for k in ServingConfig.KEYS})


def _serve_fields(d: dict, f: dict, maxpos: int | None, spec):
    """serve's engine (ServingConfig) and its couplings (`keys.derive`: batch_size <->
    max_num_seqs, seq_len <-> max_model_len; `f` is updated), seq_len at most max_model_len,
    max_model_len at most the model's positions."""
    given_bs, given_sl = d.get("batch_size") is not None, d.get("seq_len") is not None
    values = {"task": "serve", "_positions": maxpos,
              "batch_size": f["batch_size"] if given_bs else None,
              "seq_len": f["seq_len"] if given_sl else None}
    serving = read_serving(d.get("serving") or {}, values)
    if not given_bs:
        f["batch_size"] = serving.max_num_seqs
    if not given_sl:
        f["seq_len"] = serving.max_model_len
    if f["seq_len"] > serving.max_model_len:
        raise ScenarioError("seq_len", f"{f['seq_len']} exceeds serving.max_model_len "
                                       f"{serving.max_model_len}")
    err = positions_error(spec, serving.max_model_len, "seq_len" if given_sl and
                          serving.max_model_len == f["seq_len"] else "serving.max_model_len")
    if err is not None:
        raise err
    return serving


def fields_of(d: Any, *, base_dir: Path | None = None) -> dict:
    """The normalised field values of `Scenario(**fields)` for a scenario dict."""
    if not isinstance(d, dict):
        raise ScenarioError("scenario", f"must be a JSON object, got {type(d).__name__}")
    check_known(d)
    for k, v in d.items():  # NaN / infinity / 3,000-deep values anywhere: refused by name
        if isinstance(v, (dict, list, tuple, float)):
            read_json(k, v)

    model, arch, spec = model_of(d, base_dir)
    task = task_of(d, spec)
    family = spec.family if spec is not None else None
    refuse_inapplicable(d, task, family)
    maxpos = max_positions(spec)
    gpu = resolve_gpu(d["gpu"]) if d.get("gpu") is not None else None
    defaults = task_defaults(task, family, maxpos, gpu)
    # what the model decides (native resolution, pipeline steps, ...) under what was given;
    # read and checked like given values
    src = {**model_given(task, spec), **{k: v for k, v in d.items() if v is not None}}

    def get(name):
        v = src.get(name)
        return defaults.get(name) if v is None else BY_NAME[name].read(v)

    f: dict[str, Any] = {"model": model, "architecture": arch, "task": task}
    for name in ("batch_size", "seq_len", "new_tokens", "target_len", "text_len", "guidance",
                 "resolution", "frames", "steps"):
        f[name] = get(name)
    if (family == "encoder-decoder" and f["target_len"] is None
            and task in TRAINING_TASKS + ("forward",)):
        f["target_len"] = f["seq_len"]
    if family in TRANSFORMER_FAMILIES and f["seq_len"]:
        # an encoder-decoder's new tokens are the decoder's, outside the encoder's positions
        new = f["new_tokens"] if family != "encoder-decoder" else 0
        what = "seq_len + new_tokens" if new else "seq_len"
        err = positions_error(spec, f["seq_len"] + (new or 0), what)
        if err is not None:
            raise err

    defaults["precision"] = model_given(task, spec).get("precision", defaults["precision"])
    f["precision"] = read_precision(d["precision"], task, defaults["precision"]) \
        if d.get("precision") is not None else defaults["precision"]
    stack = BY_NAME["stack"].read(d["stack"]) if d.get("stack") is not None else None
    if task in TRAINING_TASKS and stack_optimizer(stack):   # e.g. Unsloth's adamw_8bit
        defaults["optimizer"] = stack_optimizer(stack)
    for name in ("optimizer", "gradient_accumulation", "checkpointing"):
        f[name] = get(name)
        refuse_non_neutral(name, f[name], task, family)
    f["attention"] = get("attention")
    f["lora"] = (read_lora(d["lora"]) if d.get("lora") is not None
                 else LoraConfig() if task in ("lora", "qlora") else None)
    if f["lora"] is not None and spec is not None:
        check_lora_targets(spec, f["lora"].targets)
    f["parallel"] = read_parallel(d["parallel"]) if d.get("parallel") is not None \
        else ParallelConfig()
    check_layout(f["parallel"], spec, task, f["gradient_accumulation"])
    for name in ("offload", "options"):
        f[name] = BY_NAME[name].read(d[name]) if d.get(name) is not None else ()
    f["serving"] = None
    if task == "serve":
        f["serving"] = _serve_fields(d, f, maxpos, spec)
    f["stack"] = BY_NAME["stack"].read(d["stack"]) if d.get("stack") is not None else None
    if "tiled-mlp" in f["options"] and not stack_allows("tiled-mlp", f["stack"]):
        raise ScenarioError("options", "'tiled-mlp' is Unsloth's tiled MLP (unsloth-zoo "
                            "2025-11 on): it needs stack 'unsloth' (2025-11 or later), got "
                            f"{f['stack'] or 'pytorch'!r}")
    f["safety_margin"] = (BY_NAME["safety_margin"].read(d["safety_margin"])
                          if d.get("safety_margin") is not None else None)
    f["gpu"] = gpu

    extra = {k.name: k.read(d[k.name]) for k in EXTRA if d.get(k.name) is not None}
    for name, v in EXTRA_DEFAULTS(task).items():
        if name not in extra and v is not None:
            extra[name] = v
    for k in K.CONTRACT:   # a row no line above reads by name: its value, else its default
        if k.name not in f:
            v = d.get(k.name)
            v = k.read(v) if v is not None else k.default_for(task) if k.applies(task, family) \
                else None
            if v is not None:
                extra[k.name] = v
    f["extra"] = extra
    # images / image_size against the model and, with their tokens, its positions
    check_images(spec, extra, f["seq_len"], f["new_tokens"] or 0)
    if spec is not None and extra.get("offload_experts"):   # routed experts, that many layers
        check_offload_experts(spec.arch, extra["offload_experts"])
    return f
