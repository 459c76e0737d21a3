"""Scenario + model + device -> the workload's Footprint: the footprint function of each
family declared in `registry.py`."""
from __future__ import annotations

from ..catalog import stacks
from ..errors import ScenarioError
from ..vocab import LOW_PRECISION_TRAINING
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

# family declaration name -> the device traits its footprint reads, by task ("*": every other
# task): DeviceTraits fields, or the runtime's answers of (scenario, device) named in
# sweep/engine.py DERIVED (legacy_stack: only "pre-Ampere software?" of the compute capability).
# The sweep computes one footprint per distinct answer of these, so a footprint that starts to
# read another trait says so here (tests/test_sweep.py: the sweep equals `estimate` on every
# GPU of the database, family by family). Notes (plan_warnings) read more; numbers never do.
DEVICE_TRAITS = {
    "transformer": {"serve": ("legacy_stack", "cuda_context_bytes", "nccl_bytes",
                              "usable_bytes"),            # the KV pool: usable less the rest
                    "*": ("legacy_stack",)},
    "vision": {"train": ("legacy_stack",), "*": ()},      # torch 1.x softmax when training
    "diffusion": {"*": ()},
    "graphics": {"*": ("bandwidth_gbs", "achievable_bandwidth_fraction")},   # frames per s
    "array": {"*": ()},
    "volume": {"*": ()},            # + the network's training traits when it names one
}


def _declaration(scenario, spec):
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
    return decl


def device_traits(scenario, spec) -> tuple[str, ...]:
    """The device traits the footprint of `scenario` / `spec` reads (DEVICE_TRAITS)."""
    decl = _declaration(scenario, spec)
    table = DEVICE_TRAITS[decl.name]
    out = table.get(scenario.task, table["*"])
    net = registry.family_of(spec.family) if spec is not None else None
    if decl.name == "volume" and net is not None:   # _volume: the network trained on patches
        net_table = DEVICE_TRAITS[net.name]
        out = tuple(dict.fromkeys(out + net_table.get("train", net_table["*"])))
    return out


def _low_precision_training(scenario, family: str) -> None:
    """MXFP8 / NVFP4 training (precisions `mxfp8-train`, `nvfp4-train`) is modelled for the
    transformer families' task train (workloads/transformer/lowp_training.py)."""
    prec = scenario.precision if isinstance(scenario.precision, str) else None
    if prec in LOW_PRECISION_TRAINING and (family != "transformer" or scenario.task != "train"):
        raise ScenarioError("precision", f"'{prec}' is a training recipe (torchao / torchtitan "
                                         "low-precision linears), modelled for task 'train' of "
                                         "transformer models; here take e.g. bf16")


def footprint(scenario, spec, device) -> Footprint:
    """The footprint of `scenario` (a Scenario) for model `spec` (None for model-free tasks)
    on `device`; ScenarioError('task', ...) when the family does not take the task."""
    decl = _declaration(scenario, spec)
    _low_precision_training(scenario, decl.name)
    fp = FOOTPRINTS[decl.name](scenario, spec, device)
    if getattr(scenario, "stack", None):   # a stack named: say which and what it applied
        st = stacks.of(scenario)
        fp.notes.insert(0, st.resolution_note())
        fp.stack = stack_mechanisms.section(st, fp.notes)
    return fp
