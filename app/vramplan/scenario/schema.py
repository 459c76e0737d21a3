"""One row of the key table (`keys.py`): a scenario key's type, range or choices, unit, the
tasks and model families that take it, its default and doc, and how a value is read (the
typed readers of `vramplan.readers`, each failure naming the key)."""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ScenarioError
from ..readers import (read_bool, read_choice, read_int, read_names, read_num, read_size)

KINDS = ("int", "number", "bool", "choice", "multi", "size", "resolution", "object")
NO_MODEL = "no-model"        # the family token of the model-less tasks (render, volume, array)
_UNSET = object()


def _n(x) -> str:
    """A number for the docs: 1000000 not 1e+06, 0.9 as is."""
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass(frozen=True)
class Key:
    """One scenario key. `tasks` / `families` (None: all; NO_MODEL: the model-less tasks) say
    where it is accepted (elsewhere it is refused, unless it holds `neutral`); `shown_tasks` /
    `shown_families` narrow that to where a workload reads it (the form's fields);
    `model_given`: the model's family decides its default (shown where it does); `derive`:
    the default computed from the other values (dotted keys, plus 'task' and '_positions',
    the model's positions), None where this row does not derive it (`keys.derive`)."""
    name: str
    kind: str
    label: str
    doc: str
    unit: str | None = None
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    choices: tuple | None = None
    tasks: tuple[str, ...] | None = None
    families: tuple[str, ...] | None = None
    where: str | None = None
    neutral: Any = _UNSET
    shown_tasks: tuple[str, ...] | None = None
    shown_families: tuple[str, ...] | None = None
    model_given: bool = False
    default: Any = None
    by_task: dict | None = None
    default_doc: str | None = None
    extra: bool = False
    parse: Callable[[Any], Any] | None = None
    whole_floats: bool = False
    as_float: bool = False
    fold_case: bool = False
    flag: str | None = None
    derive: Callable[[dict], Any] | None = None
    shown_for: Callable[[Any], bool] | None = None   # the form shows it for these models only
    # this draft's choices / (lo, hi) where they depend on it (the model's tasks, the task's
    # precisions, the positions): f(ctx), ctx the one pass as a form reads it
    # (`resolution.Resolution`: .task, .family, .spec, .given); None: `choices` / lo, hi
    choices_of: Callable[[Any], tuple | None] | None = None
    bounds_of: Callable[[Any], tuple] | None = None
    # how the pass as a form reads the row, where it differs from the others (ctx as above):
    # `seeds`: the other keys' defaults read its value (model, task, stack, gpu: given, its
    # default is its own row's, not derived from the others); `kept`: what the plan is (model,
    # architecture, task), never dropped from a draft; `before_task`: shown while no task is
    # known; `shows_if(ctx)`: shown only then; `default_of(ctx)`: its value when left empty
    seeds: bool = False
    kept: bool = False
    # `plain(sc, v)`: this key changed alone to `v` in the resolved `sc`, as the rules
    # between keys that read it see it: True (no rule moves or refuses anything: the pass
    # gives the field alone, once its row reads `v` and the rows' `derive` stay, which
    # `scenario.variants` checks), the pass's ScenarioError (it refuses `v`, by the same
    # check), None (the pass decides); None for the row: every value runs the pass
    # (tests/test_scenario_plain.py holds the answers to the pass's)
    plain: Callable[[Any, Any], Any] | None = None
    before_task: bool = False
    shows_if: Callable[[Any], bool] | None = None
    default_of: Callable[[Any], Any] | None = None

    @property
    def parent(self) -> str | None:
        return self.name.split(".")[0] if "." in self.name else None

    @property
    def has_neutral(self) -> bool:
        return self.neutral is not _UNSET

    def applies(self, task: str, family: str | None) -> bool:
        """Accepted for this task and model family (None: no model)."""
        return ((self.tasks is None or task in self.tasks) and
                (self.families is None or (family or NO_MODEL) in self.families))

    def shown(self, task: str, family: str | None) -> bool:
        """Read by the workload of this task and family (a form shows it)."""
        return (self.applies(task, family) and
                (self.shown_tasks is None or task in self.shown_tasks) and
                (self.shown_families is None or (family or NO_MODEL) in self.shown_families))

    def refusal(self, task: str, family: str | None) -> ScenarioError:
        where = self.where or ("task " + " / ".join(self.tasks or ()))
        fam = f", model family '{family}'" if family else ""
        return ScenarioError(self.name, f"applies to {where} only (task '{task}'{fam})")

    def default_for(self, task: str):
        """The static default of this key for a task (a fresh copy); None: decided elsewhere
        (by the task's rules, the model, or other keys: see `default_doc`)."""
        v = self.by_task.get(task) if self.by_task is not None else self.default
        return copy.deepcopy(v)

    def read(self, v: Any) -> Any:
        """The value normalised, or ScenarioError naming the key (types and ranges only)."""
        if self.parse is not None:
            return self.parse(v)
        k = self.name
        if self.kind == "int":
            return read_int(k, v, int(self.lo), None if self.hi is None else int(self.hi),
                            whole_floats=self.whole_floats)
        if self.kind == "number":
            return read_num(k, v, self.lo, self.hi, lo_open=self.lo_open, as_float=self.as_float)
        if self.kind == "bool":
            return read_bool(k, v)
        if self.kind == "choice":
            return read_choice(k, v, self.choices, fold_case=self.fold_case)
        if self.kind == "multi":
            return read_names(k, v, self.choices)
        if self.kind == "size":
            return read_size(k, v)
        if self.kind == "resolution":
            if not isinstance(v, (list, tuple)) or len(v) not in (2, 3):
                raise ScenarioError(k, f"must be [h, w] or [d, h, w], got {v!r}")
            return tuple(read_int(k, x, int(self.lo), int(self.hi)) for x in v)
        raise ScenarioError(k, "is an object; read by the scenario's builder")



    # -- words for the docs page and the CLI help --
    def type_text(self) -> str:
        """'int 1-8', 'int >= 1', 'number (0, 1]', 'one of ...', 'list of ...'."""
        if self.kind == "int" and self.choices is None:
            if self.hi is None or self.hi >= 1 << 20:
                return f"int >= {_n(self.lo)}"
            return f"int {_n(self.lo)}-{_n(self.hi)}"
        if self.kind == "number":
            return f"number {'(' if self.lo_open else '['}{_n(self.lo)}, {_n(self.hi)}]"
        if self.kind == "choice" and self.choices:
            return "one of " + ", ".join(f"`{c}`" for c in self.choices)
        if self.kind == "multi":
            return "list of " + (", ".join(f"`{c}`" for c in self.choices) if self.choices
                                 else "names")
        return {"choice": "str", "resolution": "[h, w] or [d, h, w]",
                "size": "size (bytes or '2 GiB')"}.get(self.kind, self.kind)

    def applies_text(self) -> str:
        """Where the key is taken, in words ('all', 'task render', 'diffusion pipelines')."""
        if self.where:
            return self.where
        if self.tasks is None and self.families is None:
            return "all"
        parts = []
        if self.tasks is not None:
            parts.append(("task " if len(self.tasks) == 1 else "tasks ") + ", ".join(self.tasks))
        if self.families is not None:
            parts.append("families " + ", ".join(self.families))
        return "; ".join(parts)

    def default_text(self, task: str | None = None) -> str:
        """The default in words (for one task, where it depends on the task)."""
        if self.default_doc:
            return self.default_doc
        if self.by_task:
            if task is None:
                return "; ".join(f"{t}: {v}" for t, v in self.by_task.items())
            v = self.by_task.get(task)
            return "none (not read)" if v is None else _words(v)
        return "none" if self.default is None else _words(self.default)


def _words(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, dict)):
        return "`" + json.dumps(v, separators=(",", ":")) + "`"
    return f"`{v}`" if isinstance(v, str) else _n(v)
