"""Vision models (CNNs, ViTs, detection, segmentation, U-Nets) as a workload family: the tasks
they take and the scenario key their catalog config decides (the native resolution)."""
from __future__ import annotations

from ...vocab import VISION_FAMILIES
from ..family import Family

TASKS = ("train", "forward", "load")


def native_resolution(cfg: dict) -> tuple:
    """The model's native input size: its catalog config's `resolution` (224 x 224 where a
    config has none)."""
    return tuple(int(r) for r in cfg.get("resolution", (224, 224)))


def scenario_defaults(task: str, spec) -> dict:
    """What a scenario leaves out and the model decides: the native resolution, every task."""
    return {"resolution": list(native_resolution(spec.config))}


FAMILY = Family(name="vision", families=VISION_FAMILIES,
                tasks={f: TASKS for f in VISION_FAMILIES}, defaults=scenario_defaults)
