"""The workload families vramplan estimates, listed explicitly: the one table of which model
family takes which task, and of the keys each family's models decide. `vramplan.scenario`
validates against it; `dispatch.py` holds the matching footprint functions.

Adding a family: a folder `workloads/<name>/` with `family.py` (a `FAMILY`) and its footprint,
one line here and one in `dispatch.py`.
"""
from __future__ import annotations

from .array.family import FAMILY as ARRAY
from .diffusion.family import FAMILY as DIFFUSION
from .family import Family
from .graphics.family import FAMILY as GRAPHICS
from .transformer.family import FAMILY as TRANSFORMER
from .vision.family import FAMILY as VISION
from .volume.family import FAMILY as VOLUME

FAMILIES: tuple[Family, ...] = (TRANSFORMER, VISION, DIFFUSION, VOLUME, GRAPHICS, ARRAY)

__all__ = ["FAMILIES", "families", "family_tasks", "family_defaults", "model_free_tasks",
           "family_of", "declaration_for_task", "unknown_lora_targets"]


def families() -> tuple[str, ...]:
    """The catalog model families some workload estimates."""
    return tuple(f for fam in FAMILIES for f in fam.families)


def family_of(model_family: str) -> Family | None:
    """The declaration that estimates a catalog family (None if none does)."""
    return next((fam for fam in FAMILIES if model_family in fam.families), None)


def declaration_for_task(task: str) -> Family | None:
    """The declaration of a model-free task (None for tasks that need a model)."""
    return next((fam for fam in FAMILIES if task in fam.model_free_tasks), None)


def family_tasks(family: str | None) -> tuple[str, ...]:
    """The tasks the footprint of `family` handles (() if none does). None: the model-free
    tasks (`volume`, `render`, `array`)."""
    if family is None:
        return model_free_tasks()
    fam = family_of(family)
    return tuple(fam.tasks.get(family, ())) if fam is not None else ()


def model_free_tasks() -> tuple[str, ...]:
    return tuple(t for fam in FAMILIES for t in fam.model_free_tasks)


def family_defaults(task: str, spec) -> dict:
    """The keys `spec`'s family fills from its catalog config for `task` (JSON values; {} for
    families whose defaults are the task's, e.g. transformers). spec None: a model-free task."""
    fam = (declaration_for_task(task) if spec is None
           else family_of(getattr(spec, "family", None) or ""))
    return dict(fam.defaults(task, spec) or {}) if fam is not None else {}


def unknown_lora_targets(spec, targets) -> tuple[list, tuple]:
    """(the `lora.targets` names `spec`'s footprint would adapt nothing for, the valid names);
    ([], ()) for a family that declares no LoRA targets."""
    fam = family_of(getattr(spec, "family", None) or "")
    if fam is None or fam.lora_targets is None:
        return [], ()
    return fam.lora_targets(spec, tuple(targets))
