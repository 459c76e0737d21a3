"""Workload families. Each module registers the model families and tasks it handles.

`footprint(scenario, spec, device)` dispatches on the model's family (or, for tasks without a
model such as `render`, `volume` and `array`, on the task).
"""
from __future__ import annotations

import importlib
from typing import Callable

from .base import COMPONENTS, Footprint

__all__ = ["COMPONENTS", "Footprint", "register", "handler_for", "footprint"]

_BY_FAMILY: dict[str, Callable] = {}
_BY_TASK: dict[str, Callable] = {}
_MODULES = ["transformer", "vision", "diffusion", "volume", "graphics", "array", "video"]
_loaded = False


def register(*, families: tuple[str, ...] = (), tasks: tuple[str, ...] = ()):
    """Decorator: `@register(families=("decoder",))` makes a function the footprint of a family;
    `tasks=("render",)` for model-less tasks."""
    def deco(fn):
        for f in families:
            _BY_FAMILY[f] = fn
        for t in tasks:
            _BY_TASK[t] = fn
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
    return _BY_FAMILY.get(family or "")


def footprint(scenario, spec, device) -> Footprint:
    from ..errors import ScenarioError
    fam = getattr(spec, "family", None)
    fn = handler_for(fam, scenario.task)
    if fn is None:
        raise ScenarioError("task", f"task '{scenario.task}' is not supported for model family "
                                    f"'{fam}'")
    return fn(scenario, spec, device)
