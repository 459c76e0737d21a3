"""A draft's form: a view of the one pass (`resolution.Resolution`, `Scenario.from_dict`): which
keys apply to a possibly incomplete or invalid draft, with which choices, bounds and the value
each takes when left empty, every problem of the draft by key, and the scenario it makes. No
rule of its own: the pass reads the key table (`keys.py`), the task rules (`rules.py`) and the
workload registry, and the defaults are what the resolved scenario holds.

    fields({"model": "resnet50"})       # no seq_len, no attention, no lora.*; resolution 224 x 224
    check({"model": "gpt2", "batch_size": 0, "bogus": 1})   # {"batch_size": ..., "bogus": ...}
    normalise(draft, gpu) -> (Scenario | None, {key: message})
    view(draft, gpu)                    # the pass itself: .scenario, .usable, .rows(), .by_key()

A draft is the given keys as the scenario takes them: nested keys as objects
(`{"lora": {"rank": 32}}`, `resolution.with_path(draft, "lora.rank", 32)`); None and "" mean
"not given".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .model import Scenario
from .resolution import Resolution, Row

__all__ = ["Field", "fields", "check", "normalise", "view", "view_fields"]


@dataclass(frozen=True)
class Field:
    """One field of a draft's form. `choices`: for this draft (None: free); `default`: what
    the scenario holds when the field is left empty (the pass's row); `value`: the draft's
    (None: not given)."""
    key: str
    label: str
    kind: str
    choices: tuple | None
    value: Any
    unit: str | None
    doc: str
    min: float | None
    max: float | None
    row: Row | None = field(default=None, repr=False, compare=False)

    @property
    def default(self) -> Any:
        return self.row.default if self.row is not None else None


def view(draft: Any, gpu: str | None = None) -> Resolution:
    """The draft resolved once on `gpu` (None: the draft's own `gpu`)."""
    return Resolution(draft, gpu)


def field_of(row: Row) -> Field:
    k = row.key
    return Field(k.name, k.label, k.kind, row.choices, row.value, k.unit, k.doc, row.lo, row.hi,
                 row)


def fields(draft: Any, gpu: str | None = None) -> list[Field]:
    """The fields that apply to this draft's model family and task, in table order (an
    object key's dotted fields in its place; the workload keys last)."""
    return [field_of(r) for r in view(draft, gpu).rows()]


def check(draft: Any, gpu: str | None = None) -> dict[str, str]:
    """Every problem of the draft by key ({} when it makes a scenario): unknown keys, each
    value's type and range, keys the task or family does not take, then the rules between
    keys (also those among the values that read, beside the values refused on their own):
    the errors of the one pass."""
    return view(draft, gpu).by_key()


def normalise(draft: Any, gpu: str | None = None) -> tuple[Scenario | None, dict[str, str]]:
    """(the Scenario the draft makes, {}) or (None, every problem by key): one pass."""
    r = view(draft, gpu)
    return r.scenario, r.by_key()


def view_fields(r: Resolution) -> list[Field]:
    """The fields of a pass already made (`view(draft, gpu)`)."""
    return [field_of(row) for row in r.rows()]
