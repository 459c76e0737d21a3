"""Workload families. Each module registers the model families and tasks it handles.

`footprint(scenario, spec, device)` dispatches on the model's family (or, for tasks without a
model such as `render`, `volume` and `array`, on the task).

The registrations are also the one table of what a model family supports: `supports` names the
tasks a family's footprint handles (`family_tasks`, read by `vramplan.scenario.valid_tasks` and
by `Scenario.from_dict`, which rejects any other task), and `defaults` is the family's hook
`fn(task, spec) -> dict` that fills the contract keys a model's catalog config decides
(resolution, steps, frames, text_len, guidance) when a scenario leaves them out
(`family_defaults`).
"""
from __future__ import annotations

import importlib
from typing import Callable

from .base import COMPONENTS, Footprint

__all__ = ["COMPONENTS", "Footprint", "register", "handler_for", "footprint", "family_tasks",
           "family_defaults", "model_free_tasks", "families"]

_BY_FAMILY: dict[str, Callable] = {}
_BY_TASK: dict[str, Callable] = {}
_FAMILY_TASKS: dict[str, tuple[str, ...]] = {}
_FAMILY_DEFAULTS: dict[str, Callable] = {}
_TASK_DEFAULTS: dict[str, Callable] = {}
_MODULES = ["transformer", "vision", "diffusion", "volume", "graphics", "array", "video"]
_loaded = False


def register(*, families: tuple[str, ...] = (), tasks: tuple[str, ...] = (),
             supports: tuple[str, ...] | dict[str, tuple[str, ...]] = (),
             defaults: Callable | None = None):
    """Decorator: `@register(families=("cnn",), supports=("train", "forward", "load"))` makes a
    function the footprint of those families for those tasks (`supports` may map each family
    to its own tasks); `defaults=fn(task, spec) -> dict` fills the family's model-given keys.
    `tasks=("render",)` registers a model-less task (its `defaults(task, None)` fills keys such
    as the default resolution)."""
    def deco(fn):
        for f in families:
            _BY_FAMILY[f] = fn
            _FAMILY_TASKS[f] = tuple(supports.get(f, ()) if isinstance(supports, dict)
                                     else supports)
            if defaults is not None:
                _FAMILY_DEFAULTS[f] = defaults
        for t in tasks:
            _BY_TASK[t] = fn
            if defaults is not None:
                _TASK_DEFAULTS[t] = defaults
        return fn
    return deco


def _load() -> None:
    global _loaded
    if _loaded:
        return
    for name in _MODULES:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    _loaded = True


def handler_for(family: str | None, task: str) -> Callable | None:
    _load()
    if task in _BY_TASK:
        return _BY_TASK[task]
    if task not in _FAMILY_TASKS.get(family or "", ()):
        return None
    return _BY_FAMILY.get(family or "")


def families() -> tuple[str, ...]:
    """The model families some workload module estimates."""
    _load()
    return tuple(_BY_FAMILY)


def family_tasks(family: str | None) -> tuple[str, ...]:
    """The tasks the footprint of `family` handles (in registration order; () if none does).
    `None`: the model-less tasks (`render`, `volume`, `array`)."""
    _load()
    if family is None:
        return tuple(_BY_TASK)
    return _FAMILY_TASKS.get(family, ())


def model_free_tasks() -> tuple[str, ...]:
    return family_tasks(None)


def family_defaults(task: str, spec) -> dict:
    """The keys `spec`'s family fills from its catalog config for `task` (JSON values; {} for
    families without a hook, e.g. transformers, whose defaults are the task's)."""
    _load()
    if spec is None:
        fn = _TASK_DEFAULTS.get(task)
    else:
        fn = _FAMILY_DEFAULTS.get(getattr(spec, "family", None) or "")
    return dict(fn(task, spec) or {}) if fn is not None else {}


def footprint(scenario, spec, device) -> Footprint:
    from ..errors import ScenarioError
    fam = getattr(spec, "family", None)
    fn = handler_for(fam, scenario.task)
    if fn is None:
        ok = family_tasks(fam) if fam is not None else ()
        raise ScenarioError("task", f"task '{scenario.task}' is not supported for model family "
                                    f"'{fam}'" + (f"; valid tasks: {', '.join(ok)}" if ok
                                                  else ""))
    return fn(scenario, spec, device)
