"""Scenario + model + device -> the workload's Footprint: the footprint function of each
family declared in `registry.py`."""
from __future__ import annotations

from ..catalog import stacks
from ..errors import ScenarioError
from . import registry, stack_mechanisms
from .array import footprint as array
from .base import Footprint
from .diffusion import footprint as diffusion
from .graphics import footprint as graphics
from .transformer import footprint as transformer
from .vision import footprint as vision
from .volume import footprint as volume

# family declaration name -> its footprint function (one line per family)
FOOTPRINTS = {
    "transformer": transformer.footprint,
    "vision": vision.footprint,
    "diffusion": diffusion.footprint,
    "graphics": graphics.footprint,
    "array": array.footprint,
}


def _volume(scenario, spec, device) -> Footprint:
    # a volume plan may train a 3-D network on patches: that part is the network's family
    return volume.footprint(scenario, spec, device, network=footprint)


FOOTPRINTS["volume"] = _volume


def footprint(scenario, spec, device) -> Footprint:
    """The footprint of `scenario` (a Scenario) for model `spec` (None for model-free tasks)
    on `device`; ScenarioError('task', ...) when the family does not take the task."""
    model_family = getattr(spec, "family", None)
    decl = registry.declaration_for_task(scenario.task)
    if decl is None and model_family is not None and \
            scenario.task in registry.family_tasks(model_family):
        decl = registry.family_of(model_family)
    if decl is None:
        ok = registry.family_tasks(model_family) if model_family is not None else ()
        raise ScenarioError("task", f"task '{scenario.task}' is not supported for model family "
                                    f"'{model_family}'" + (f"; valid tasks: {', '.join(ok)}"
                                                           if ok else ""))
    fp = FOOTPRINTS[decl.name](scenario, spec, device)
    if getattr(scenario, "stack", None):   # a stack named: say which and what it applied
        st = stacks.of(scenario)
        fp.notes.insert(0, st.resolution_note())
        fp.stack = stack_mechanisms.section(st, fp.notes)
    return fp
