"""The scenario: one plan (a workload, how it runs, on what GPU), validated and normalised.

The keys are the contract of `shared/SCENARIO.md`; every key is one row of the key table
(`keys.py`), from which validation (`build.py`), the URL query string (`query.py`), the CLI
flags (`keys.cli_flags()`), the docs page of keys (docs/scenario-keys.md) and the UI's form
(`form.py`: which fields apply to a draft, with which choices) are derived.

Modules: `keys` (the table), `model` (Scenario), `parts` (lora / parallel / serving),
`build` (validation + normalisation), `collect` (every problem at once: ScenarioErrors;
`model.resolve(given, gpu)`, the one pass), `rules` (vocabulary, defaults by task, what a model
family takes), `extra` (workload-specific values), `resolve` (model / gpu ids), `query`
(URL), `files` (scenario files), `resolution` (the pass as a form reads it), `form` (a
draft's fields: a view of it).
"""
from __future__ import annotations

from .files import PLAN_VERSION, load_scenarios, plan_document, save_plan  # noqa: F401
from .keys import CONTRACT_KEYS, EXTRA_KEYS
from .collect import ScenarioErrors
from .model import Scenario, resolve
from .parts import LoraConfig, ParallelConfig, ServingConfig
from .rules import (ATTENTION, CHECKPOINTING, KV_CACHE_DTYPES, MODELLESS_TASKS,  # noqa: F401
                    OFFLOAD, OPTIMIZERS, OPTIONS, PRECISION_BYTES, PRECISIONS, QUANTISED, TASKS,
                    TRAINING_TASKS, model_defaults, valid_tasks)

__all__ = ["Scenario", "resolve", "ScenarioErrors", "LoraConfig", "ParallelConfig", "ServingConfig", "load_scenarios",
           "valid_tasks", "model_defaults",
           "TASKS", "PRECISIONS", "OPTIMIZERS", "CHECKPOINTING", "ATTENTION", "OPTIONS",
           "OFFLOAD", "KV_CACHE_DTYPES", "CONTRACT_KEYS", "extra_keys", "save_plan",
           "plan_document", "PLAN_VERSION"]


def extra_keys() -> dict:
    """Workload-specific keys: {name: validator(value) -> normalised value}."""
    return dict(EXTRA_KEYS)
