"""What the measuring functions build: the normalised Scenario and its model's ModelSpec, fitted
to the families the tracer's modules build (tracing/). Plain Python: no torch here.

Trace (`trace.py`), the GPU measurement (`live/cuda.py`) and the torchrun ranks
(`live/distributed.py`) all start from these two, so that they build the same module from the
same numbers the estimate reads (the Scenario's defaults, the catalog's `TransformerArch`).
"""
from __future__ import annotations

import dataclasses
import re

from ..catalog import ModelSpec
from ..errors import ScenarioError
from ..scenario import Scenario

FAMILIES = ("decoder", "encoder", "vit", "cnn", "unet")
"""the catalog families trace can build (decoder: Llama / Mistral / Qwen2 / GPT-2 / OPT / BigCode
style; encoder: BERT / RoBERTa style; cnn: ResNet; vit; unet)"""
TASKS = ("train", "lora", "forward", "generate")
"""the tasks trace runs (tracing/jobs.py reads this)"""
_RESNET_DEPTHS = {18: ((2, 2, 2, 2), "basic"), 34: ((3, 4, 6, 3), "basic"),
                  50: ((3, 4, 6, 3), "bottleneck"), 101: ((3, 4, 23, 3), "bottleneck"),
                  152: ((3, 8, 36, 3), "bottleneck")}


def scenario_of(scenario):
    """A Scenario from a Scenario or a scenario dict (validated and normalised)."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, dict):
        return Scenario.from_dict(scenario)
    raise ScenarioError("scenario", f"expected a Scenario or a dict, got {type(scenario).__name__}")


def spec_of(scenario, spec=None) -> ModelSpec:
    """The ModelSpec to build: the scenario's model (catalog id or inline architecture), or
    `spec` (a ModelSpec, or a `(family, config)` pair that skips the catalog), fitted."""
    if spec is None:
        spec = scenario.spec
        if spec is None:
            raise ScenarioError("model", "give 'model' (a catalog id) or 'architecture'")
    elif isinstance(spec, tuple):
        family, config = spec
        spec = ModelSpec(id=family, family=family, config=dict(config),
                         source="given to trace (spec=)")
    return fit(spec)


def fit(spec: ModelSpec) -> ModelSpec:
    """`spec` as the tracer's modules build it (a ResNet's depths from its id when the config
    gives only a depth), or a ScenarioError naming the families trace builds."""
    if spec.family in ("decoder", "encoder", "vit", "unet"):
        return spec
    config = spec.config
    if spec.family == "cnn":
        if config.get("depths") or isinstance(config.get("layers"), (list, tuple)):
            return spec
        depth = config.get("depth")
        if depth is None:
            m = re.search(r"resnet-?(\d+)", spec.id.lower())
            depth = int(m.group(1)) if m else None
        if depth in _RESNET_DEPTHS:
            d, blk = _RESNET_DEPTHS[int(depth)]
            return dataclasses.replace(spec, config={**config, "depths": d, "layer_type": blk})
    raise ScenarioError("model", f"trace cannot build '{spec.id}' (family '{spec.family}'); it "
                                 f"builds these families: decoder (Llama/Mistral/Qwen2/GPT-2/OPT "
                                 f"style), encoder (BERT style), vit, cnn (ResNet), unet")


def check_task(scn) -> None:
    """The tasks trace does not run, refused naming why."""
    if scn.task == "qlora":
        raise ScenarioError("task", "trace cannot run qlora (4-bit NF4 kernels need bitsandbytes "
                                    "on a GPU); trace 'lora' at bf16 for the adapter part")
    if scn.task not in TASKS:
        raise ScenarioError("task", f"trace runs tasks {', '.join(TASKS)}; not '{scn.task}'")


def check_arch(arch) -> None:
    """The transformer shapes the tracer's modules cannot build, refused naming why."""
    if arch.mla:
        raise ScenarioError("model", "trace cannot build multi-head latent attention (MLA)")
    if arch.is_moe:
        raise ScenarioError("model", "trace cannot build mixture-of-experts decoders yet")
    if arch.kind == "encoder-decoder":
        raise ScenarioError("model", "trace cannot build encoder-decoder models (T5) yet")


def check(scenario) -> ModelSpec:
    """What `trace` would build for `scenario`, without torch: the fitted ModelSpec, or the
    ScenarioError trace would raise for its task, family or architecture (a page asks this
    before it offers a trace)."""
    scn = scenario_of(scenario)
    check_task(scn)
    spec = spec_of(scn)
    if spec.family in ("decoder", "encoder"):
        check_arch(spec.arch)
    return spec
