"""Real-time rendering (task `render`, no model): the resolution a plan gets when it names
none."""
from __future__ import annotations

from ..family import Family

DEFAULT_RESOLUTION = (1080, 1920)


def scenario_defaults(task: str, spec) -> dict:
    """The resolution a plan gets when it names none (shown in the normalised scenario)."""
    return {"resolution": list(DEFAULT_RESOLUTION)}


FAMILY = Family(name="graphics", model_free_tasks=("render",), defaults=scenario_defaults)
