"""The Scenario: one plan (workload, how it runs, on what GPU), validated and normalised.

Attribute names are the contract keys of `shared/SCENARIO.md` (the key table, `keys.py`,
says what each takes). `Scenario.from_dict` rejects unknown keys, wrong types and
out-of-range values with one ScenarioError naming the key (dotted for nested keys);
`to_dict` gives the normalised form (defaults filled in, None omitted) and round-trips
through `from_dict`; `to_query` / `from_query` do the same through a URL query string.
Workload-specific keys live in `Scenario.extra` and are emitted flat by `to_dict`.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..vocab import TRAINING_TASKS
from . import query as _query
from ..errors import ScenarioError
from .build import given_keys
from .collect import ScenarioErrors, given_only, resolved_fields
from . import keys as K
from .keys import EXTRA_NAMES
from .parts import LoraConfig, ParallelConfig, ServingConfig
from .resolve import resolve_architecture, resolve_model

__all__ = ["Scenario", "resolve", "without_refused"]


@dataclass(frozen=True)
class Scenario:
    """One plan. Attribute names are the contract keys; build with `from_dict`."""

    model: str | None = None
    architecture: dict | None = None
    task: str = "train"
    batch_size: int = 1
    seq_len: int | None = None
    new_tokens: int | None = None
    target_len: int | None = None
    text_len: int | None = None
    guidance: bool | None = None
    resolution: tuple[int, ...] | None = None
    frames: int | None = None
    steps: int | None = None
    precision: str | dict = "bf16-mixed"
    optimizer: str = "adamw"
    gradient_accumulation: int = 1
    checkpointing: str = "none"
    attention: str | None = "sdpa"
    lora: LoraConfig | None = None
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    offload: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    serving: ServingConfig | None = None
    stack: str | None = None
    gpu: str | None = None
    safety_margin: float | int | None = None
    extra: dict = field(default_factory=dict)
    # the keys the scenario was given (dotted for nested ones; `build.given_keys`), the others
    # derived; None: built directly, every value counts as given
    given: frozenset | None = field(default=None, compare=False, repr=False)

    def __getattr__(self, name: str):
        """A key of the table that no field above holds (a row added to the table) is read
        from `extra`, like the workload keys."""
        extra = self.__dict__.get("extra")
        if extra is not None and name in extra:
            return extra[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    # -- building --
    @classmethod
    def from_dict(cls, d: Any, *, base_dir: str | Path | None = None) -> "Scenario":
        """Validate and normalise a scenario dict (see module docstring)."""
        return cls(**resolved_fields(d, base_dir=Path(base_dir) if base_dir else None),
                   given=given_keys(d))

    def to_dict(self) -> dict:
        """Normalised JSON: contract keys in contract order, None omitted, extra keys last."""
        out: dict[str, Any] = {}
        for k in K.CONTRACT_KEYS:
            v = getattr(self, k, None)
            if v is None:
                continue
            if isinstance(v, (LoraConfig, ParallelConfig, ServingConfig)):
                v = v.to_dict()
            elif isinstance(v, tuple):
                v = list(v)
            elif isinstance(v, dict):
                v = json.loads(json.dumps(v))
            out[k] = v
        for k, v in self.extra.items():
            out[k] = v
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def to_query(self) -> str:
        """Compact URL query string (only what differs from the task's defaults)."""
        return _query.to_query(self)

    @classmethod
    def from_query(cls, q: str) -> "Scenario":
        return cls.from_dict(_query.parse_query(q, EXTRA_NAMES))

    def replace(self, **changes) -> "Scenario":
        """The scenario of the given keys with `changes` applied, resolved again (`resolve`):
        what was derived (the GPU's precision, the stack's optimizer, the task's defaults, the
        serving couplings) is derived again from the new values. A change names a key as
        `from_dict` takes it; None un-gives it (it is derived again); a nested object (lora,
        parallel, serving, a precision object) replaces the given one whole (merge its given
        sub-keys first to keep them: `given_dict()`). A given key the new scenario refuses
        (an optimizer on an inference task, a seq_len beyond the new model's positions, LoRA
        targets the new model lacks) is dropped and derived, never one asked for, nor the
        model, architecture or task. A scenario built directly counts every value as given."""
        known = K.CONTRACT_KEYS + K.EXTRA_NAMES
        for k in changes:
            if k not in known:
                raise ScenarioError(k, "unknown key")
        d = self.given_dict()
        if "model" in changes or "architecture" in changes:
            d.pop("model", None)
            d.pop("architecture", None)
        d = {k: v for k, v in {**d, **changes}.items() if v is not None}
        return _resolve_dropping(type(self), d, frozenset(changes))

    def given_dict(self) -> dict:
        """The values given (objects holding their given sub-keys only); everything when the
        scenario was built directly."""
        d = self.to_dict()
        if self.given is None:
            return d
        out = {}
        for k, v in d.items():
            if isinstance(v, dict) and k in ("lora", "parallel", "serving"):
                sub = {s: x for s, x in v.items() if f"{k}.{s}" in self.given}
                if sub or k in self.given:
                    out[k] = sub
            elif k in self.given:
                out[k] = v
        return out

    # -- reading --
    @functools.cached_property
    def spec(self):
        """The ModelSpec (catalog entry or inline architecture); None for model-less tasks."""
        if self.model:
            return resolve_model(self.model)[1]
        if self.architecture is not None:
            return resolve_architecture(self.architecture, None)[1]
        return None

    @property
    def family(self) -> str | None:
        return self.spec.family if self.spec is not None else None

    @property
    def is_training(self) -> bool:
        return self.task in TRAINING_TASKS

    def precision_for(self, component: str = "default") -> str:
        """Precision of a pipeline component (`default` for anything not named)."""
        if isinstance(self.precision, str):
            return self.precision
        return self.precision.get(component, self.precision["default"])


_KEPT = ("model", "architecture", "task")   # never dropped by `replace`


def _refused_entries(d: dict, errors, asked: frozenset) -> dict:
    """`d` less the given entries the errors name that were not asked for (a sub-key of
    lora / parallel / serving alone when the error names it); `d` itself when none."""
    out = d
    for key, _ in errors:
        top = key.split("[")[0].split(".")[0]
        if top in asked or top in _KEPT or top not in out:
            continue
        sub = key.split("[")[0].partition(".")[2]
        obj = out[top]
        if sub and top in ("lora", "parallel", "serving") and isinstance(obj, dict) \
                and sub in obj and len(obj) > 1:
            out = {**out, top: {s: v for s, v in obj.items() if s != sub}}
        else:
            out = {k: v for k, v in out.items() if k != top}
    return out


def _settle(cls, d: dict, asked: frozenset, gpu: str | None = None):
    """(Scenario, d, None) of `d` (on `gpu` when given), without the given entries it refuses
    that were not `asked` for (each pass names what it refuses, so until it resolves);
    (None, d, ScenarioErrors) when what is left still does not resolve."""
    while True:
        try:
            return cls.from_dict(d if gpu is None else {**d, "gpu": gpu}), d, None
        except ScenarioErrors as exc:
            rest = _refused_entries(d, exc.errors, asked)
            if rest is d:
                return None, d, exc
            d = rest


def _resolve_dropping(cls, d: dict, asked: frozenset) -> "Scenario":
    """`cls.from_dict(d)` without the refused given entries not `asked` for (`_settle`); the
    pass's ScenarioErrors when the rest does not resolve either."""
    sc, _, exc = _settle(cls, d, asked)
    if sc is None:
        raise exc
    return sc


def without_refused(given: dict, keep=(), gpu: str | None = None) -> dict:
    """The given keys (a draft: nested, `resolve`'s shape) less the entries the pass refuses
    on `gpu`, except those in `keep` and the model, architecture and task: what a page keeps
    when the model changes (a LoRA target, a seq_len or a stack the new model does not take
    goes; a value it takes stays). The same rule as `Scenario.replace`."""
    return _settle(Scenario, given_only(given), frozenset(keep), gpu)[1]


def resolve(given: Any, gpu: str | None = None, *, base_dir: str | Path | None = None) -> Scenario:
    """The one pass: the Scenario of the values `given` (a scenario dict, nested keys as
    objects; None and "" are not given) on `gpu` (when given, it replaces the
    dict's), every other value derived from the key table's rows (defaults, the serving
    couplings, vLLM's max_num_batched_tokens, precision by GPU, seq_len by the model's
    positions, the model's own sizes). Raises `ScenarioErrors` naming every problem; the
    Scenario remembers which keys were given (`Scenario.given`)."""
    d = given_only(given)
    if gpu is not None and isinstance(d, dict):
        d = {**d, "gpu": gpu}
    return Scenario.from_dict(d, base_dir=base_dir)
