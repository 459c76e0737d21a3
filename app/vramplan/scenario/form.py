"""A draft's form: which fields apply to a possibly incomplete or invalid scenario dict (what a
UI holds), with which choices and defaults; every problem of the draft by key; the scenario it
makes. Derived from the key table (`keys.py`), the task rules (`rules.py`) and the workload
registry (which tasks a family takes, the keys its models decide), never by trying
validations.

    fields({"model": "resnet50"})       # no seq_len, no attention, no lora.*; resolution 224 x 224
    check({"model": "gpt2", "batch_size": 0, "bogus": 1})   # {"batch_size": ..., "bogus": ...}
    normalise(draft) -> (Scenario | None, {key: message})

A draft may hold nested keys as objects (`{"parallel": {"gpus": 8}}`) or dotted
(`{"parallel.gpus": 8}`); None and "" mean "not given".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..catalog import list_models
from ..catalog.stacks import choices as stack_choices
from ..errors import ScenarioError
from ..hardware import default_db
from ..readers import read_obj
from ..vocab import TASKS, TRAINING_TASKS
from .build import (check_known, fields_of, model_of, read_precision, refuse_inapplicable,
                    refuse_non_neutral, task_of)
from .keys import BY_NAME, CONTRACT, EXTRA, EXTRA_DEFAULTS, subkeys, sub_names
from .model import Scenario
from .resolve import resolve_gpu
from .schema import Key
from .rules import (default_task, max_positions, model_given, offload_choices, option_choices,
                    position_limit, precisions_for, supported_tasks, task_defaults)

__all__ = ["Field", "fields", "check", "normalise", "fold"]

_OBJECTS = ("lora", "parallel", "serving")


@dataclass(frozen=True)
class Field:
    """One field of a draft's form. `choices`: for this draft (None: free); `default`: what
    the scenario holds when the field is left empty; `value`: the draft's (None: not given)."""
    key: str
    label: str
    kind: str
    choices: tuple | None
    default: Any
    value: Any
    unit: str | None
    doc: str
    min: float | None
    max: float | None


def fold(draft: dict) -> dict:
    """The draft as a scenario dict: dotted keys of lora / parallel / serving / precision into
    their objects, None and "" dropped."""
    items = [(str(k), v) for k, v in (draft or {}).items() if v is not None and v != ""]
    out: dict = {k: v for k, v in items if "." not in k}
    for k, v in items:
        top, _, sub = k.partition(".")
        if not sub:
            continue
        if top not in _OBJECTS + ("precision",):
            out[k] = v                        # not a nested key: from_dict names it
            continue
        cur = out.get(top)
        if not isinstance(cur, dict):
            cur = {"default": cur} if top == "precision" and isinstance(cur, str) else {}
        out[top] = {**cur, sub: v}
    return out


def _get(d: dict, name: str):
    top, _, sub = name.partition(".")
    v = d.get(top)
    if not sub:
        return v
    return v.get(sub) if isinstance(v, dict) else None


class _Draft:
    """What the draft's model and task are, as far as they can be read (no validation)."""

    def __init__(self, draft: dict):
        self.d = fold(draft)
        try:
            _, _, self.spec = model_of(self.d, None)
        except ScenarioError:
            self.spec = None
        self.family = self.spec.family if self.spec is not None else None
        task = self.d.get("task")
        ok = supported_tasks(self.family) if self.spec is not None else TASKS
        self.task = task if task in ok else default_task(self.spec)
        self.maxpos = max_positions(self.spec)
        self.given = model_given(self.task, self.spec) if self.task else {}

    def defaults(self) -> dict:
        """{key: default} for this draft (dotted for nested keys)."""
        t, d = self.task, self.d
        out = {k.name: k.default_for(t) for k in CONTRACT if k.default is not None}
        gpu = d.get("gpu") if isinstance(d.get("gpu"), str) else None
        out.update({"task": t, **task_defaults(t, self.family, self.maxpos, gpu), **self.given})
        if self.family == "encoder-decoder" and t in TRAINING_TASKS + ("forward",):
            out["target_len"] = d.get("seq_len") or out.get("seq_len")
        for k in subkeys("lora") + subkeys("parallel") + subkeys("serving"):
            out[k.name] = k.default_for(t)
        sv = d.get("serving") if isinstance(d.get("serving"), dict) else {}
        if t == "serve":
            out["batch_size"] = sv.get("max_num_seqs") or out["batch_size"]
            out["seq_len"] = sv.get("max_model_len") or self.maxpos or 4096
            mml = sv.get("max_model_len") or d.get("seq_len") or self.maxpos or 4096
            out["serving.max_num_seqs"] = d.get("batch_size") or 256
            out["serving.max_model_len"] = mml
            out["serving.max_num_batched_tokens"] = (max(2048, min(mml, 8192))
                                                     if isinstance(mml, int) else None)
        out.update(EXTRA_DEFAULTS(t))
        return out

    def shows(self, k: Key) -> bool:
        t, fam = self.task, self.family
        if k.name == "model":
            return (t is None or k.applies(t, fam)) and "architecture" not in self.d
        if k.name == "architecture":
            return "architecture" in self.d and (t is None or k.applies(t, fam))
        if k.name in ("task", "gpu"):
            return True
        if t is None:
            return False
        if k.parent and not BY_NAME[k.parent].applies(t, fam):
            return False
        if not k.shown(t, fam):
            return False
        return not k.model_given or k.name in self.given

    def choices(self, k: Key) -> tuple | None:
        t, fam = self.task, self.family
        if k.name == "task":
            return supported_tasks(fam) if self.spec is not None or self.d.get("model") is None \
                and self.d.get("architecture") is None else TASKS
        if k.name == "precision":
            return precisions_for(t)
        if k.name == "options":
            return option_choices(t, fam)
        if k.name == "offload":
            return offload_choices(t, fam)
        if k.name == "model":
            return tuple(m.id for m in list_models())
        if k.name == "gpu":
            return tuple(dev.id for dev in default_db().devices)
        if k.name == "stack":                 # the stacks that run this family and task
            return stack_choices(fam, t)
        return tuple(k.choices) if k.choices is not None else None

    def bounds(self, k: Key) -> tuple:
        hi = k.hi
        lim = position_limit(self.spec) if k.name == "seq_len" else None
        if lim is not None:
            hi = lim[0]
        return k.lo, hi


def fields(draft: dict) -> list[Field]:
    """The fields that apply to this draft's model family and task, in table order (an
    object key's dotted fields in its place; the workload keys last)."""
    s = _Draft(draft)
    dflt = s.defaults() if s.task else {}
    out = []
    for top in CONTRACT + EXTRA:
        for k in (subkeys(top.name) or (top,)):
            if not s.shows(k):
                continue
            choices = s.choices(k)
            if k.kind == "multi" and choices == ():
                continue                      # nothing this workload reads
            lo, hi = s.bounds(k)
            out.append(Field(k.name, k.label, k.kind, choices, dflt.get(k.name),
                             _get(s.d, k.name), k.unit, k.doc, lo, hi))
    return out


def _message(exc: ScenarioError) -> str:
    return str(exc).removeprefix(f"scenario key '{exc.key}': ")


def check(draft: dict) -> dict[str, str]:
    """Every problem of the draft by key ({} when it makes a scenario): unknown keys, each
    value's type and range, keys the task or family does not take, then the rules between
    keys (the first one found, as `Scenario.from_dict` reports it)."""
    if not isinstance(draft, dict):
        return {"scenario": f"must be a JSON object, got {type(draft).__name__}"}
    d, errors = fold(draft), {}

    def note(fn, *args):
        try:
            return fn(*args)
        except ScenarioError as exc:
            errors.setdefault(exc.key, _message(exc))
            return None

    for k in d:
        note(check_known, {k: None})
    known = {k: v for k, v in d.items() if k not in errors}
    spec = task = None
    got = note(model_of, known, None)
    if got is not None:
        spec = got[2]
        task = note(task_of, known, spec)
    family = spec.family if spec is not None else None
    if task is not None:
        for k in known:
            note(refuse_inapplicable, {k: known[k]}, task, family)
    for name, v in known.items():
        if name in errors or name in ("model", "architecture", "task"):
            continue
        if name == "precision":
            t = task or "forward"               # forward takes every precision
            note(read_precision, v, t, task_defaults(t, family, None)["precision"])
        elif name in _OBJECTS:
            if note(read_obj, name, v, sub_names(name)) is not None:
                for sub, sv in v.items():
                    note(BY_NAME[f"{name}.{sub}"].read, sv)
        elif name == "gpu":
            note(resolve_gpu, v)
        elif note(BY_NAME[name].read, v) is not None and task is not None:
            note(refuse_non_neutral, name, BY_NAME[name].read(v), task, family)
    if not errors:
        note(fields_of, d)
    return errors


def normalise(draft: dict) -> tuple[Scenario | None, dict[str, str]]:
    """(the Scenario the draft makes, {}) or (None, every problem by key)."""
    errors = check(draft)
    if errors:
        return None, errors
    return Scenario.from_dict(fold(draft)), {}
