"""How a workload family declares itself: the model families and tasks it estimates and the
scenario keys its catalog config decides. Data and one small function, nothing else: the
scenario (an earlier stage than the footprints) validates against these declarations."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


def _no_defaults(task: str, spec) -> dict:
    return {}


@dataclass(frozen=True)
class Family:
    """One workload family (a folder of `vramplan.workloads`).

    name: the folder; families: the catalog families it estimates; tasks: {family: tasks};
    model_free_tasks: tasks without a model it estimates (render, volume, array);
    defaults: fn(task, spec) -> the contract keys the model decides (JSON values; spec is None
    for a model-free task);
    lora_targets: fn(spec, targets) -> (the names its footprint would adapt nothing for, the
    valid names), None where the family takes no `lora` (the scenario refuses the unknown
    ones: they would silently give a plan without those adapters)."""

    name: str
    families: tuple[str, ...] = ()
    tasks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    model_free_tasks: tuple[str, ...] = ()
    defaults: Callable[[str, object], dict] = _no_defaults
    lora_targets: Callable[[object, tuple], tuple[list, tuple]] | None = None
