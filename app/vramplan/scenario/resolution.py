"""The one pass as a form reads it: `Resolution(given, gpu)` resolves the given keys once
(`Scenario.from_dict`: every problem at once) and says, per row of the key table, whether the
key applies to this model and task, its choices and bounds (each row's own `choices_of` /
`bounds_of`), the value given and the value it takes when left empty (read from the resolved
scenario, so every derivation the pass makes, the rows' `derive` couplings, precision by GPU,
seq_len by positions, the model's own sizes, a stack's optimizer, shows as it is).
`form.fields` / `form.check` are views of it.

`given` is the given keys as the scenario takes them, nested (`{"lora": {"rank": 32}}`, the
shape of `Scenario.given_dict()`, a scenario file and `parse_query`); a page edits one key by
its dotted name with `with_path` / `without_path`.

    r = Resolution({"model": "gpt2", "lora": {"rank": 32}, "task": "lora"}, "nvidia-h100-sxm")
    r.scenario, r.by_key(), [row.key.name for row in r.rows()]
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import ScenarioError
from ..vocab import TASKS
from . import keys as K
from .build import model_of
from .collect import ScenarioErrors, given_only, message_of
from .keys import BY_NAME, derive, subkeys
from .model import Scenario, _refused_entries
from .rules import default_task, max_positions, model_given, supported_tasks
from .schema import Key

__all__ = ["Resolution", "Row", "get_path", "with_path", "without_path", "entry_of", "entries"]

OBJECTS = ("lora", "parallel", "serving", "precision")   # keys whose sub-keys are dotted


# ---- a nested key by its dotted name ----------------------------------------------------------

def get_path(d: dict, name: str) -> Any:
    """The value at a dotted name (`lora.rank` -> d["lora"]["rank"]); None when absent."""
    top, _, sub = name.partition(".")
    v = (d or {}).get(top)
    if not sub:
        return v
    return v.get(sub) if isinstance(v, dict) else None


def with_path(d: dict, name: str, value: Any) -> dict:
    """A copy of `d` with `name` set (None, "" and [] clear it, an emptied object goes)."""
    if value is None or value == "" or value == []:
        return without_path(d, name)
    top, _, sub = name.partition(".")
    out = dict(d or {})
    if not sub or top not in OBJECTS:
        out[name] = value
        return out
    cur = out.get(top)
    if not isinstance(cur, dict):     # a precision string becomes the object's default
        cur = {"default": cur} if top == "precision" and isinstance(cur, str) else {}
    out[top] = {**cur, sub: value}
    return out


def without_path(d: dict, name: str) -> dict:
    top, _, sub = name.partition(".")
    out = dict(d or {})
    if sub and isinstance(out.get(top), dict):
        rest = {k: v for k, v in out[top].items() if k != sub}
        if rest:
            out[top] = rest
        else:
            out.pop(top)
    elif not sub or top not in OBJECTS:
        out.pop(name, None)
    return out


def entry_of(error_key: str, given: dict) -> str | None:
    """The given entry (dotted name) an error's key names ('arrays[0].shape' -> 'arrays',
    'lora.rank' -> 'lora.rank', 'precision.vae' -> 'precision'); None: nothing given there."""
    top = error_key.split("[")[0].split(".")[0]
    head = error_key.split("[")[0]
    if head != top and get_path(given, head) is not None and top in OBJECTS[:3]:
        return head
    return top if top in (given or {}) else None


_SEEDS: dict[str, dict | None] = {}   # the seed's scenario dict by the seed's JSON text


def _seed_names() -> tuple[str, ...]:
    """The keys the other keys' defaults read (their rows' `seeds`: model, task, stack, gpu)."""
    return tuple(k.name for k in K.KEYS if k.seeds)


def _kept(name: str) -> bool:
    """A dotted name whose row says what the plan is (`kept`: model, architecture, task)."""
    k = BY_NAME.get(name.split(".")[0])
    return k is not None and k.kept


def _seed_values(seed: dict) -> dict | None:
    """The scenario dict of the seed keys alone (what every other key defaults to), kept for
    the next edit of the same model, task, stack and GPU."""
    try:
        text = json.dumps(seed, sort_keys=True)
    except (TypeError, ValueError):
        return None
    if text not in _SEEDS:
        if len(_SEEDS) >= 64:
            _SEEDS.clear()
        try:
            _SEEDS[text] = Scenario.from_dict(seed).to_dict()
        except ScenarioError:
            _SEEDS[text] = None
    return _SEEDS[text]


@dataclass(frozen=True)
class Row:
    """One key as this draft takes it: choices (None: free), bounds, the value given (None:
    not given) and `default`, the value it takes when left empty (read when asked: a given
    key's default needs the seed's scenario, which only a field's placeholder shows)."""
    key: Key
    choices: tuple | None
    lo: float | None
    hi: float | None
    value: Any
    resolution: Any = field(default=None, repr=False, compare=False)

    @property
    def default(self) -> Any:
        r = self.resolution
        return r.default(self.key.name) if r is not None and r.task else None


class Resolution:
    """The given keys resolved once on `gpu` (None: the dict's own `gpu`, if any): `scenario`
    (None with problems), `errors` ((key, message) pairs, every one), `usable` (the scenario
    of the given keys less the ones named in errors: what a page shows meanwhile), the model
    and task as far as they can be read, and `rows()` (the keys that apply)."""

    def __init__(self, given: Any, gpu: str | None = None, known: tuple | None = None):
        self.given = given_only(given)
        self.gpu = gpu
        self._tried: list[tuple[dict, tuple]] = []   # (given keys, their pass) by `_without_bad`
        self.scenario, self.errors = known if known is not None else self._resolve(self.given)
        self.errors = list(self.errors)
        self._rest = self._without_bad() if self.errors else None
        d = self.given if isinstance(self.given, dict) else {}
        if self.scenario is not None:
            self.spec, self.task = self.scenario.spec, self.scenario.task
        else:                          # read leniently: the form still shows the fields
            try:
                self.spec = model_of(d, None)[2]
            except ScenarioError:
                self.spec = None
            fam = self.spec.family if self.spec is not None else None
            ok = supported_tasks(fam) if self.spec is not None else TASKS
            self.task = d.get("task") if d.get("task") in ok else default_task(self.spec)
        self.family = self.spec.family if self.spec is not None else None
        self.maxpos = max_positions(self.spec)
        self.model_decides = model_given(self.task, self.spec) if self.task else {}
        self._defaults: dict[str, Any] = {}

    def _on_gpu(self, d: Any) -> Any:
        """`d` on the pass's `gpu` (when given, it replaces the dict's, as `resolve`)."""
        return {**d, "gpu": self.gpu} if self.gpu is not None and isinstance(d, dict) else d

    def _resolve(self, d: Any) -> tuple[Scenario | None, list[tuple[str, str]]]:
        d = self._on_gpu(d)
        try:
            return Scenario.from_dict(d), []
        except ScenarioErrors as exc:
            return None, list(exc.errors)
        except ScenarioError as exc:
            return None, [(exc.key, message_of(exc))]

    def by_key(self) -> dict[str, str]:
        """{key: message}, the first message of each key ({} when the scenario resolves)."""
        out: dict[str, str] = {}
        for k, m in self.errors:
            out.setdefault(k, m)
        return out

    def _without_bad(self) -> Scenario | None:
        """The scenario of the given keys less those the errors name (again while new errors
        name given keys); None when nothing resolves. Each round's errors that name another
        given entry join `errors`: a value the rules between keys refuse (seq_len beyond the
        model's positions) is named beside a value refused on its own (batch_size -1), not
        only once that one is mended (the pass checks the rules between keys only when every
        value reads)."""
        if not isinstance(self.given, dict):
            return None
        d, errors = self.given, self.errors
        named = {k for k, _m in self.errors}
        for _ in range(len(d) + 1):
            drop = {entry_of(k, d) for k, _m in errors} - {None}
            if not drop:
                return None
            for name in drop:
                d = without_path(d, name)
            sc, errors = self._resolve(d)
            self._tried.append((d, (sc, list(errors))))
            new = [(k, m) for k, m in errors
                   if k not in named and entry_of(k, self.given) is not None]
            self.errors += new
            named.update(k for k, _m in new)
            if sc is not None:
                return sc
        return None

    @property
    def usable(self) -> Scenario | None:
        """The scenario, else the scenario of the given keys less those the errors name
        (again while new errors name given keys); None when nothing resolves."""
        return self.scenario if self.scenario is not None else self._rest

    @functools.cached_property
    def _values(self) -> dict | None:
        return self.usable.to_dict() if self.usable is not None else None

    def _seed(self) -> dict | None:
        d = self.given if isinstance(self.given, dict) else {}
        return _seed_values(self._on_gpu({k: d[k] for k in _seed_names() if k in d}))

    def default(self, name: str) -> Any:
        """The value key `name` takes when left empty: the resolved scenario's where it is not
        given; where it is, its row's derivation from the other given keys, else what the
        model, task, stack and GPU alone give it."""
        if name not in self._defaults:
            self._defaults[name] = self._default(name)
        return self._defaults[name]

    def _default(self, name: str) -> Any:
        k = BY_NAME[name]
        if k.default_of is not None:                 # the row's own (task: the pass's task)
            return k.default_of(self)
        values = self._values
        if get_path(self.given, name) is not None and not k.seeds:
            if k.derive is not None:
                others = {x.name: get_path(self.given, x.name) for x in K.DERIVED
                          if x.name != name and get_path(self.given, x.name) is not None}
                v = derive({"task": self.task, "_positions": self.maxpos, **others}).get(name)
                if v is not None:
                    return v
            values = self._seed()
        if values is None:
            return k.default_for(self.task) if self.task else None
        return get_path(values, name)

    # ---- which keys apply, with which choices and bounds ------------------------------------
    def shows(self, k: Key) -> bool:
        """The form shows the row: its `shows_if`, then while no task is known its
        `before_task`, else where the task and family take it and a workload reads it (the
        model's own keys where the model decides them)."""
        t, fam = self.task, self.family
        if k.shows_if is not None and not k.shows_if(self):
            return False
        if t is None:
            return k.before_task
        if k.parent and not BY_NAME[k.parent].applies(t, fam):
            return False
        if not k.shown(t, fam):
            return False
        if k.shown_for is not None and not k.shown_for(self.spec):   # e.g. MoE models only
            return False
        return not k.model_given or k.name in self.model_decides

    def choices(self, k: Key) -> tuple | None:
        """The key's choices for this draft: its row's `choices_of` (the model's tasks, the
        task's precisions, the stacks of this family and task...), else its fixed choices."""
        if k.choices_of is not None:
            return k.choices_of(self)
        return tuple(k.choices) if k.choices is not None else None

    def bounds(self, k: Key) -> tuple:
        """(lo, hi): its row's `bounds_of` (seq_len: the model's positions), else the row's."""
        return k.bounds_of(self) if k.bounds_of is not None else (k.lo, k.hi)

    def rows(self) -> list[Row]:
        """The keys that apply to this model and task, in table order (an object key's
        dotted keys in its place; the workload keys last)."""
        out = []
        for top in K.CONTRACT + K.EXTRA:
            for k in (subkeys(top.name) or (top,)):
                if not self.shows(k):
                    continue
                choices = self.choices(k)
                if k.kind == "multi" and choices == ():
                    continue                  # nothing this workload reads
                lo, hi = self.bounds(k)
                out.append(Row(k, choices, lo, hi, get_path(self.given, k.name), self))
        return out

    def kept(self) -> "Resolution":
        """The pass of the given keys less the entries this model and task do not take (no
        row shows them) and those the pass refuses (`Scenario.replace`'s rule, the model,
        architecture and task kept): what a page keeps of its draft when the model changes.
        `self` when nothing goes, so the common switch runs this one pass; again after each
        round that drops something (the pass names one rule between keys at a time)."""
        r = self
        for _ in range(len(entries(self.given or {})) + 1):
            if not isinstance(r.given, dict):
                return r
            shown = {row.key.name for row in r.rows()}
            d = r.given
            for name in entries(d):
                if not _kept(name) and name not in shown:
                    d = without_path(d, name)
            d = _refused_entries(d, r.errors, frozenset())
            if d == r.given:
                return r
            known = next((res for tried, res in r._tried if tried == d), None)
            r = Resolution(d, self.gpu, known)     # a pass `_without_bad` made is not rerun
        return r

    def minimal(self) -> dict:
        """The given keys less those the pass derives to the same scenario without them (a
        hand-written link's `parallel.data` equal to what `parallel.gpus` gives, a downloaded
        plan's every value): what a page keeps as given when it opens a link or a plan, so
        later edits move the rest. The given keys as they are when they do not resolve."""
        if self.scenario is None or not isinstance(self.given, dict):
            return self.given
        d = self.given
        for name in reversed(entries(d)):
            if _kept(name):
                continue
            trial = without_path(d, name)
            if self._resolve(trial)[0] == self.scenario:
                d = trial
        return d


def entries(d: dict) -> list[str]:
    """The dotted names of a draft's given entries (`lora.rank`, `batch_size`, ...)."""
    out = []
    for k, v in (d or {}).items():
        if k in OBJECTS[:3] and isinstance(v, dict) and v:
            out += [f"{k}.{s}" for s in v]
        else:
            out.append(k)
    return out
