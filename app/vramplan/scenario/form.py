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
from ..vocab import TASKS, TRAINING_TASKS
from .build import model_of
from .collect import ScenarioErrors, fold
from . import keys as K
from .keys import BY_NAME, DERIVED, EXTRA_DEFAULTS, derive, subkeys
from .model import Scenario, resolve
from .schema import Key
from .rules import (default_task, max_positions, model_given, offload_choices, option_choices,
                    position_limit, precisions_for, supported_tasks, task_defaults)

__all__ = ["Field", "fields", "check", "normalise", "fold"]

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
        out = {k.name: k.default_for(t) for k in K.CONTRACT if k.default is not None}
        gpu = d.get("gpu") if isinstance(d.get("gpu"), str) else None
        out.update({"task": t, **task_defaults(t, self.family, self.maxpos, gpu), **self.given})
        if self.family == "encoder-decoder" and t in TRAINING_TASKS + ("forward",):
            out["target_len"] = d.get("seq_len") or out.get("seq_len")
        for k in subkeys("lora") + subkeys("parallel") + subkeys("serving"):
            out[k.name] = k.default_for(t)
        # a derived key's default: what its row derives from the other values given
        given = {k.name: _get(d, k.name) for k in DERIVED}
        for k in DERIVED:
            others = {x: v for x, v in given.items() if x != k.name and v is not None}
            v = derive({"task": t, "_positions": self.maxpos, **others}).get(k.name)
            if v is not None:
                out[k.name] = v
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
    for top in K.CONTRACT + K.EXTRA:
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


def check(draft: dict) -> dict[str, str]:
    """Every problem of the draft by key ({} when it makes a scenario): unknown keys, each
    value's type and range, keys the task or family does not take, then the rules between
    keys (the first one found): the errors of `resolve`, the one pass."""
    return normalise(draft)[1]


def normalise(draft: dict, gpu: str | None = None) -> tuple[Scenario | None, dict[str, str]]:
    """(the Scenario the draft makes, {}) or (None, every problem by key): one `resolve`."""
    try:
        return resolve(draft, gpu), {}
    except ScenarioErrors as exc:
        return None, exc.by_key()
