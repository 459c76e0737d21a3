"""Every problem of a scenario dict at once: `ScenarioErrors` (a ScenarioError holding a list of
(key, message), its text all of them, each naming its key) and `resolved_fields(d)`, the one
pass that reads a scenario dict (`build.fields_of`: the given values read, the others derived
from the key table's rows) after checking each given value on its own, so that every bad value
is named, not only the first.

A draft (what a page holds) is a scenario dict of the given keys, nested keys as objects
(`{"parallel": {"gpus": 8}}`); `given_only` drops its empty entries (None and "" mean "not
given").
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ScenarioError
from ..readers import read_json, read_obj
from .build import (check_known, fields_of, model_of, read_precision, refuse_inapplicable,
                    refuse_non_neutral, task_of)
from .keys import BY_NAME, sub_names
from .resolve import resolve_gpu
from .rules import task_defaults

__all__ = ["ScenarioErrors", "given_only", "problems", "resolved_fields", "message_of"]

_OBJECTS = ("lora", "parallel", "serving")


class ScenarioErrors(ScenarioError):
    """Every problem of a scenario: `errors` is a list of (key, message); `key` names the
    first (a caller that catches ScenarioError sees it as before); the text is each one as
    "scenario key 'k': message", joined by '; '."""

    def __init__(self, errors: list[tuple[str, str]]):
        if not errors:
            raise ValueError("ScenarioErrors needs at least one (key, message)")
        self.errors = list(errors)
        super().__init__(*self.errors[0])
        self.args = ("; ".join(f"scenario key '{k}': {m}" for k, m in self.errors),)

    def by_key(self) -> dict[str, str]:
        """{key: message}, the first message of each key."""
        out: dict[str, str] = {}
        for k, m in self.errors:
            out.setdefault(k, m)
        return out


def message_of(exc: ScenarioError) -> str:
    """A ScenarioError's message without its "scenario key 'k': " prefix."""
    if isinstance(exc, ScenarioErrors):
        return exc.errors[0][1]
    return getattr(exc, "message", None) or str(exc).removeprefix(f"scenario key '{exc.key}': ")


def given_only(d: Any) -> Any:
    """A scenario dict without the entries that are not given: None and "" at the top and
    inside lora / parallel / serving (a page's empty field). Nothing is renamed or moved."""
    if not isinstance(d, dict):
        return d
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and k in _OBJECTS:
            v = {s: x for s, x in v.items() if x is not None and x != ""}
        if v is not None and v != "":
            out[k] = v
    return out


def _value_problems(known: dict, task: str | None, family: str | None, note) -> None:
    """Each given value read on its own (type, range, choices; the neutral-only keys)."""
    for name, v in known.items():
        if name in ("model", "architecture", "task"):
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


def problems(d: Any, base_dir: Path | None = None) -> list[tuple[str, str]]:
    """Every problem found by reading each key on its own: unknown keys, the model and the
    task, keys the task or family does not take, each value's type and range ([] when none;
    the rules between keys are `fields_of`'s)."""
    if not isinstance(d, dict):
        return [("scenario", f"must be a JSON object, got {type(d).__name__}")]
    errors: list[tuple[str, str]] = []
    named: set[str] = set()

    def note(fn, *args):
        try:
            return fn(*args)
        except ScenarioError as exc:
            for k, m in (exc.errors if isinstance(exc, ScenarioErrors)
                         else [(exc.key, message_of(exc))]):
                if k not in named:
                    named.add(k)
                    errors.append((k, m))
            return None

    for k, v in d.items():
        note(check_known, {k: None})
        if k not in named and isinstance(v, (dict, list, tuple, float)):
            note(read_json, k, v)     # NaN / infinity / 3,000-deep values: refused by name
    known = {k: v for k, v in d.items() if k not in named}
    spec = task = None
    got = note(model_of, known, base_dir)
    if got is not None:
        spec = got[2]
        task = note(task_of, known, spec)
    family = spec.family if spec is not None else None
    if task is not None:
        for k in known:
            note(refuse_inapplicable, {k: known[k]}, task, family)
    _value_problems({k: v for k, v in known.items() if k not in named}, task, family, note)
    return errors


def resolved_fields(d: Any, *, base_dir: Path | None = None) -> dict:
    """The Scenario's fields of a scenario dict, or ScenarioErrors naming every problem."""
    errors = problems(d, base_dir)
    if errors:
        raise ScenarioErrors(errors)
    try:
        return fields_of(d, base_dir=base_dir)
    except ScenarioErrors:
        raise
    except ScenarioError as exc:
        raise ScenarioErrors([(exc.key, message_of(exc))]) from None
