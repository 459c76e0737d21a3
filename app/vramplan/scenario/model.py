"""The Scenario: one plan (workload, how it runs, on what GPU), validated and normalised.

The keys are the contract of `shared/SCENARIO.md`; `docs/scenario.md` documents every key, the
defaults by task and the query-string form. `Scenario.from_dict` rejects unknown keys, wrong
types and out-of-range values with one ScenarioError naming the key (dotted for nested keys:
`parallel.tensor`, `lora.rank`, `serving.gpu_memory_utilization`); bools are never ints.
`to_dict` gives the normalised form (defaults filled in, None omitted) and round-trips through
`from_dict`; `to_query` / `from_query` do the same through a URL query string.

Workload-specific keys come from `vramplan.scenario_extra.EXTRA_KEYS` (optional module): each
maps a key to a validator `fn(value) -> normalised value`; accepted values live in
`Scenario.extra` and are emitted flat by `to_dict`.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import ScenarioError, UnknownIdError, VramplanError
from . import safejson
from ._scenario_rules import (ATTENTION, CHECKPOINTING, KV_CACHE_DTYPES, MODELLESS_TASKS,  # noqa: F401
                              OFFLOAD, OPTIMIZERS, OPTIONS, PRECISION_BYTES, PRECISIONS,
                              QUANTISED, TASKS, TRAINING_TASKS, task_defaults)
from . import _scenario_query as _query

__all__ = ["Scenario", "LoraConfig", "ParallelConfig", "ServingConfig", "load_scenarios",
           "valid_tasks", "model_defaults",
           "TASKS", "PRECISIONS", "OPTIMIZERS", "CHECKPOINTING", "ATTENTION", "OPTIONS",
           "OFFLOAD", "KV_CACHE_DTYPES", "CONTRACT_KEYS", "extra_keys"]

MAX_SCENARIO_FILE_BYTES = 10_000_000  # 10 MB: thousands of plans; larger is not a scenario file

CONTRACT_KEYS = ("model", "architecture", "task", "batch_size", "seq_len", "new_tokens",
                 "target_len", "text_len", "guidance", "resolution", "frames", "steps",
                 "precision", "optimizer", "gradient_accumulation", "checkpointing", "attention",
                 "lora", "parallel", "offload", "options", "serving", "gpu")


# ---- small typed readers: each failure names the key ----------------------------------------

def _int(key: str, v: Any, lo: int = 1, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ScenarioError(key, f"must be an integer, got {v!r}")
    if v < lo or (hi is not None and v > hi):
        rng = f"between {lo} and {hi}" if hi is not None else f">= {lo}"
        raise ScenarioError(key, f"must be {rng}, got {v}")
    return v


def _num(key: str, v: Any, lo: float, hi: float, lo_open: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        raise ScenarioError(key, f"must be a number, got {v!r}")
    if v < lo or v > hi or (lo_open and v == lo):
        raise ScenarioError(key, f"must be {'>' if lo_open else '>='} {lo} and <= {hi}, got {v}")
    return v


def _bool(key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ScenarioError(key, f"must be true or false, got {v!r}")
    return v


def _enum(key: str, v: Any, allowed) -> str:
    if not isinstance(v, str):
        raise ScenarioError(key, f"must be a string, one of {', '.join(allowed)}; got {v!r}")
    if v not in allowed:
        raise ScenarioError(key, f"'{v}' is not one of {', '.join(allowed)}")
    return v


def _names(key: str, v: Any, allowed=None) -> tuple[str, ...]:
    if not isinstance(v, (list, tuple)):
        raise ScenarioError(key, f"must be a list of strings, got {v!r}")
    out = []
    for x in v:
        if not isinstance(x, str) or not x.strip():
            raise ScenarioError(key, f"must be a list of non-empty strings, got {x!r} in it")
        if allowed is not None and x not in allowed:
            raise ScenarioError(key, f"'{x}' is not one of {', '.join(allowed)}")
        out.append(x)
    return tuple(sorted(set(out))) if allowed is not None else tuple(dict.fromkeys(out))


def _obj(key: str, v: Any, known: tuple[str, ...]) -> dict:
    if not isinstance(v, dict):
        raise ScenarioError(key, f"must be an object with keys {', '.join(known)}; got {v!r}")
    for k in v:
        if k not in known:
            raise ScenarioError(f"{key}.{k}", f"unknown key; {key} takes {', '.join(known)}")
    return v


# ---- nested configs --------------------------------------------------------------------------

@dataclass(frozen=True)
class LoraConfig:
    """LoRA adapters: rank r, scaling alpha, the module names adapted, adapter-input dropout
    (PEFT keeps a dropped copy of each adapted input when dropout > 0)."""
    rank: int = 8
    alpha: float = 16
    targets: tuple[str, ...] = ("q_proj", "v_proj")
    dropout: float = 0.0

    @classmethod
    def from_dict(cls, v: Any) -> "LoraConfig":
        d = _obj("lora", v, ("rank", "alpha", "targets", "dropout"))
        targets = _names("lora.targets", d.get("targets", list(cls.targets)))
        if not targets:
            raise ScenarioError("lora.targets", "must name at least one module")
        return cls(rank=_int("lora.rank", d.get("rank", cls.rank), 1, 65536),
                   alpha=_num("lora.alpha", d.get("alpha", cls.alpha), 0, 1e6, lo_open=True),
                   targets=targets,
                   dropout=_num("lora.dropout", d.get("dropout", 0.0), 0, 0.999))

    def to_dict(self) -> dict:
        return {"rank": self.rank, "alpha": self.alpha, "targets": list(self.targets),
                "dropout": self.dropout}


@dataclass(frozen=True)
class ParallelConfig:
    """How the job is spread: gpus == data * tensor * pipeline * context; `zero` 0-3 is the
    ZeRO stage over the data-parallel group (FSDP full shard = 3, shard-grad-op = 2)."""
    gpus: int = 1
    data: int = 1
    tensor: int = 1
    pipeline: int = 1
    context: int = 1
    zero: int = 0

    @classmethod
    def from_dict(cls, v: Any) -> "ParallelConfig":
        d = _obj("parallel", v, ("gpus", "data", "tensor", "pipeline", "context", "zero"))
        big = 1 << 20
        t, p, c = (_int(f"parallel.{k}", d.get(k, 1), 1, big)
                   for k in ("tensor", "pipeline", "context"))
        zero = _int("parallel.zero", d.get("zero", 0), 0, 3)
        model = t * p * c
        gpus = _int("parallel.gpus", d["gpus"], 1, big) if "gpus" in d else None
        data = _int("parallel.data", d["data"], 1, big) if "data" in d else None
        if data is None:
            if gpus is None:
                data = 1
            elif gpus % model:
                raise ScenarioError("parallel.gpus", f"{gpus} is not a multiple of tensor * "
                                    f"pipeline * context = {model}")
            else:
                data = gpus // model
        if gpus is None:
            gpus = data * model
        if gpus != data * model:
            raise ScenarioError("parallel.gpus", f"{gpus} != data * tensor * pipeline * context "
                                f"= {data} * {t} * {p} * {c} = {data * model}")
        return cls(gpus=gpus, data=data, tensor=t, pipeline=p, context=c, zero=zero)

    @property
    def shard_group(self) -> int:
        """Ranks over which ZeRO / FSDP shards model states (data x context)."""
        return max(1, self.data * self.context)

    @property
    def multi_gpu(self) -> bool:
        return max(self.gpus, self.data * self.tensor * self.pipeline * self.context) > 1

    @property
    def model_parallel(self) -> int:
        return self.tensor * self.pipeline * self.context

    def to_dict(self) -> dict:
        return {k.name: getattr(self, k.name) for k in fields(self)}


@dataclass(frozen=True)
class ServingConfig:
    """A serving engine (vLLM-like) that pre-allocates a KV pool: the pool is
    gpu_memory_utilization x GPU memory less weights, activations and overheads."""
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int = 256
    max_model_len: int = 4096
    max_num_batched_tokens: int = 8192
    kv_cache_dtype: str = "auto"
    cuda_graphs: bool = True

    KEYS = ("gpu_memory_utilization", "max_num_seqs", "max_model_len", "max_num_batched_tokens",
            "kv_cache_dtype", "cuda_graphs")

    @classmethod
    def from_dict(cls, v: Any, *, max_num_seqs: int, max_model_len: int) -> "ServingConfig":
        d = _obj("serving", v, cls.KEYS)
        mml = _int("serving.max_model_len", d.get("max_model_len", max_model_len), 1, 1 << 24)
        return cls(
            gpu_memory_utilization=float(_num("serving.gpu_memory_utilization",
                                              d.get("gpu_memory_utilization", 0.9), 0, 1,
                                              lo_open=True)),
            max_num_seqs=_int("serving.max_num_seqs", d.get("max_num_seqs", max_num_seqs),
                              1, 1 << 20),
            max_model_len=mml,
            max_num_batched_tokens=_int("serving.max_num_batched_tokens",
                                        d.get("max_num_batched_tokens",
                                              max(2048, min(mml, 8192))), 1, 1 << 24),
            kv_cache_dtype=_enum("serving.kv_cache_dtype", d.get("kv_cache_dtype", "auto"),
                                 KV_CACHE_DTYPES),
            cuda_graphs=_bool("serving.cuda_graphs", d.get("cuda_graphs", True)))

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.KEYS}


# ---- workload-specific keys (optional module) ------------------------------------------------

def _extra_module():
    try:
        return importlib.import_module("vramplan.scenario_extra")
    except ModuleNotFoundError as exc:
        if exc.name != "vramplan.scenario_extra":
            raise
        return None


def extra_keys() -> dict:
    """Workload-specific keys: {name: validator} from vramplan.scenario_extra (or {})."""
    mod = _extra_module()
    keys = dict(getattr(mod, "EXTRA_KEYS", {}) or {}) if mod else {}
    return {k: v for k, v in keys.items() if k not in CONTRACT_KEYS}


def _extra_defaults(task: str, spec) -> dict:
    fn = getattr(_extra_module(), "EXTRA_DEFAULTS", None)
    if fn is None:
        return {}
    try:
        n = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        n = 1
    out = fn(task, spec) if n >= 2 else fn(task)
    return dict(out or {})


# ---- what a model supports -------------------------------------------------------------------

def _spec_of(model_or_spec):
    """A ModelSpec from a catalog id (str), an inline architecture (dict) or a ModelSpec."""
    if isinstance(model_or_spec, str):
        return _resolve_model(model_or_spec)[1]
    if isinstance(model_or_spec, dict):
        return _resolve_architecture(model_or_spec, None)[1]
    if not hasattr(model_or_spec, "family"):
        raise ScenarioError("model", f"expected a catalog id, an architecture object or a "
                                     f"ModelSpec, got {type(model_or_spec).__name__}")
    return model_or_spec


def valid_tasks(model_or_spec=None) -> tuple[str, ...]:
    """The tasks `Scenario.from_dict` accepts for a model (a catalog id, an inline
    `architecture` dict or a ModelSpec), in TASKS order, from the workload modules' table
    (`vramplan.workloads.family_tasks`). None: the model-less tasks (render, volume, array).
    An unknown id raises ScenarioError('model', ...) listing the closest ids."""
    from ._scenario_build import supported_tasks
    if model_or_spec is None:
        return supported_tasks(None)
    return supported_tasks(_spec_of(model_or_spec).family)


def model_defaults(model_or_spec, task: str | None = None) -> dict:
    """The keys a model's catalog config decides when a scenario leaves them out (native
    `resolution`, pipeline `steps` / `frames` / `text_len` / `guidance`), as `to_dict` shows
    them, for `task` (default: the model's default task). {} for transformers."""
    from ._scenario_build import _default_task, model_defaults as _defaults
    spec = _spec_of(model_or_spec)
    return _defaults(task if task is not None else _default_task(spec), spec)


# ---- the Scenario ----------------------------------------------------------------------------

def _resolve_model(name: Any):
    from .catalog import AmbiguousModelError, default_catalog
    if not isinstance(name, str) or not name.strip():
        raise ScenarioError("model", f"must be a catalog id (a string), got {name!r}")
    try:
        cat = default_catalog()
        return cat.resolve(name), cat.get(name)
    except (UnknownIdError, AmbiguousModelError) as exc:
        raise ScenarioError("model", str(exc)) from None


def _resolve_architecture(arch: Any, base_dir: Path | None):
    """(normalised architecture dict, ModelSpec). A string is a path to a config.json only in
    a scenario file (`base_dir` is its folder): links, uploads and the API's dicts never name
    a file on the server."""
    from .catalog import spec_from_architecture
    if isinstance(arch, str):
        if base_dir is None:
            raise ScenarioError("architecture", "must be a JSON object (the keys of a "
                                                "config.json); a file path is accepted only "
                                                "inside a scenario file or by the CLI")
        path = Path(arch)
        if not path.is_absolute():
            path = base_dir / path
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ScenarioError("architecture", f"cannot read config file '{path}': "
                                                f"{exc.strerror or exc}") from None
        try:
            arch = safejson.loads(data, f"config file '{path}'")
        except VramplanError as exc:
            raise ScenarioError("architecture", str(exc)) from None
    try:
        safejson.check_value(arch, "architecture")
    except VramplanError as exc:
        raise ScenarioError("architecture", str(exc).removeprefix("architecture: ")) from None
    spec = spec_from_architecture(arch)
    return json.loads(json.dumps(arch)), spec


def _resolve_gpu(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ScenarioError("gpu", f"must be a hardware-database id (a string), got {name!r}")
    try:
        from .hardware import get_gpu
    except ModuleNotFoundError as exc:
        if exc.name != "vramplan.hardware":
            raise
        return name.strip().lower()  # hardware database not installed: keep the id as given
    try:
        return get_gpu(name.strip()).id
    except UnknownIdError as exc:
        raise ScenarioError("gpu", str(exc)) from None


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
    gpu: str | None = None
    extra: dict = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    # -- building --
    @classmethod
    def from_dict(cls, d: Any, *, base_dir: str | Path | None = None) -> "Scenario":
        """Validate and normalise a scenario dict (see module docstring)."""
        from ._scenario_build import build
        return build(cls, d, base_dir=Path(base_dir) if base_dir else None)

    def to_dict(self) -> dict:
        """Normalised JSON: contract keys in contract order, None omitted, extra keys last."""
        out: dict[str, Any] = {}
        for k in CONTRACT_KEYS:
            v = getattr(self, k)
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
        return cls.from_dict(_query.parse_query(q, extra_keys()))

    def replace(self, **changes) -> "Scenario":
        """A re-validated copy with `changes` applied (keys as in from_dict). When the task
        changes, values that were the old task's defaults, or that the new task does not take,
        are dropped and re-defaulted."""
        from ._scenario_build import replace_dict
        return Scenario.from_dict(replace_dict(self, changes))

    # -- reading --
    @functools.cached_property
    def spec(self):
        """The ModelSpec (catalog entry or inline architecture); None for model-less tasks."""
        if self.model:
            return _resolve_model(self.model)[1]
        if self.architecture is not None:
            return _resolve_architecture(self.architecture, None)[1]
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


# ---- files -----------------------------------------------------------------------------------

def _one_object(line: str) -> bool:
    """Is this line a whole JSON object by itself (the first line of a JSON Lines file)?"""
    try:
        return isinstance(safejson.loads(line, "line"), dict)
    except VramplanError:
        return False


def load_scenarios(path: str | Path) -> list:
    """Read one JSON object, a JSON array of objects, or JSON Lines (one object a line; blank
    lines skipped). Returns a list holding a Scenario or, for a rejected scenario, its
    ScenarioError (not raised). A file that cannot be read as scenarios (missing, a folder,
    binary, empty, truncated, not JSON, NaN / 1e999, nested too deep, over 10 MB) raises
    VramplanError naming the file and the line."""
    path = Path(path)
    what = f"scenario file '{path}'"
    try:
        if path.is_dir():
            raise VramplanError(f"{what} is a folder, not a file")
        data = path.read_bytes()
    except OSError as exc:
        raise VramplanError(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > MAX_SCENARIO_FILE_BYTES:
        raise VramplanError(f"{what} is {len(data):,} bytes, more than the "
                            f"{MAX_SCENARIO_FILE_BYTES:,} accepted")
    text = safejson.decode_text(data, what)
    if not text.strip():
        raise VramplanError(f"{what} is empty")
    lines = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(lines) > 1 and _one_object(lines[0][1]):  # JSON Lines
        docs = []
        for i, line in lines:  # a broken line is reported in its place, the others run
            try:
                docs.append((f"line {i}", safejson.loads(line, f"line {i}",
                                                         max_chars=MAX_SCENARIO_FILE_BYTES)))
            except VramplanError as exc:
                docs.append((f"line {i}", ScenarioError("scenario", str(exc))))
    else:
        try:
            whole = safejson.loads(text, str(path), max_chars=MAX_SCENARIO_FILE_BYTES)
        except VramplanError as exc:
            raise VramplanError(str(exc).replace(": not JSON:", ": not JSON (one object, an "
                                                 "array or JSON Lines):", 1)) from None
        if isinstance(whole, list):  # a JSON array of scenarios
            if not whole:
                raise VramplanError(f"{what} holds an empty list: no scenario to read")
            docs = [(f"item {n}", d) for n, d in enumerate(whole, 1)]
        else:
            docs = [("line 1", whole)]
    out: list = []
    for lineno, doc in docs:
        if isinstance(doc, ScenarioError):
            out.append(doc)
            continue
        try:
            if not isinstance(doc, dict):
                raise ScenarioError("scenario", f"{lineno}: expected a JSON object, got "
                                                f"{type(doc).__name__}")
            out.append(Scenario.from_dict(doc, base_dir=path.parent))
        except ScenarioError as exc:
            out.append(exc)
    return out

