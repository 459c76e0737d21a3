"""The ids a scenario names, looked up: `model` in the catalog, an inline `architecture`, `gpu`
in the hardware database. Each failure is a ScenarioError naming the key (an unknown id lists
the closest ones)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import safejson
from ..catalog import AmbiguousModelError, default_catalog, spec_from_architecture
from ..errors import ScenarioError, UnknownIdError, VramplanError
from ..hardware import get_gpu
from ..readers import read_json

__all__ = ["resolve_model", "resolve_architecture", "resolve_gpu", "spec_of"]


def resolve_model(name: Any):
    """(the catalog's spelling of the id or alias matched, ModelSpec)."""
    if not isinstance(name, str) or not name.strip():
        raise ScenarioError("model", f"must be a catalog id (a string), got {name!r}")
    try:
        cat = default_catalog()
        return cat.resolve(name), cat.get(name)
    except (UnknownIdError, AmbiguousModelError) as exc:
        raise ScenarioError("model", str(exc)) from None


def resolve_architecture(arch: Any, base_dir: Path | None):
    """(normalised architecture dict, ModelSpec). A string is a path to a config.json only in
    a scenario file (`base_dir` is its folder): links, uploads and the API's dicts never name
    a file on the server."""
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
    read_json("architecture", arch)
    spec = spec_from_architecture(arch)
    return json.loads(json.dumps(arch)), spec


def resolve_gpu(name: Any) -> str:
    """The hardware-database id of a GPU named by id, alias or NVML name."""
    if not isinstance(name, str) or not name.strip():
        raise ScenarioError("gpu", f"must be a hardware-database id (a string), got {name!r}")
    try:
        return get_gpu(name.strip()).id
    except UnknownIdError as exc:
        raise ScenarioError("gpu", str(exc)) from None


def spec_of(model_or_spec):
    """A ModelSpec from a catalog id (str), an inline architecture (dict) or a ModelSpec."""
    if isinstance(model_or_spec, str):
        return resolve_model(model_or_spec)[1]
    if isinstance(model_or_spec, dict):
        return resolve_architecture(model_or_spec, None)[1]
    if not hasattr(model_or_spec, "family"):
        raise ScenarioError("model", f"expected a catalog id, an architecture object or a "
                                     f"ModelSpec, got {type(model_or_spec).__name__}")
    return model_or_spec
