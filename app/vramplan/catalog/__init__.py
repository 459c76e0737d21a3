"""The model catalog: architectures as data, addressed by Hugging Face repo id.

Every `catalog/data/*.json` file holds `{"models": [{"id", "aliases", "family", "source",
"config"}, ...]}`. Transformer families (`decoder`, `encoder`, `encoder-decoder`) keep the keys of
the model's `config.json`; other families (`cnn`, `vit`, `detection`, `segmentation`, `unet`,
`diffusion`) keep the keys their workload module documents, and the loader does not look inside.

Lookup (`get_model`) is case-insensitive; the org prefix may be left out when the rest names one
model (`llama-2-7b-hf` -> `meta-llama/Llama-2-7b-hf`). Ids and aliases must be unique across all
files, compared case-insensitively. `spec_from_architecture` turns a scenario's inline
`architecture` (any HF config dict, or `{"params": 7e9}`) into a ModelSpec.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..errors import ScenarioError, UnknownIdError, VramplanError
from ..vocab import TRANSFORMER_FAMILIES
from .hf_config import arch_from_config
from .nested import is_nested, nested_arch, nested_note
from .pipeline import is_pipeline, pipeline_config
from .transformer_arch import TransformerArch, generic_decoder

__all__ = ["ModelSpec", "Catalog", "AmbiguousModelError", "CatalogError", "get_model",
           "resolve_name", "list_models", "spec_from_architecture", "default_catalog",
           "TRANSFORMER_FAMILIES", "DATA_DIR"]

DATA_DIR = Path(__file__).with_name("data")



class CatalogError(VramplanError, ValueError):
    """A catalog data file is invalid: names the file, the model and the problem."""


class AmbiguousModelError(VramplanError, LookupError):
    """A short name (no org prefix) that matches several models; lists them."""

    def __init__(self, wanted: str, candidates: Iterable[str]):
        self.wanted, self.candidates = wanted, sorted(candidates)
        super().__init__(f"ambiguous model '{wanted}': matches {', '.join(self.candidates)}; "
                         f"give the full id")

    def __str__(self) -> str:
        return self.args[0]


@dataclass(frozen=True)
class ModelSpec:
    """One catalog model. `config` is the HF config.json dict (transformers) or the family's
    own keys; `source` is where the numbers come from."""

    id: str
    family: str
    config: dict = field(hash=False, compare=False)
    source: str = ""
    aliases: tuple[str, ...] = ()
    note: str = ""

    @property
    def is_transformer(self) -> bool:
        return self.family in TRANSFORMER_FAMILIES

    @functools.cached_property
    def arch(self) -> TransformerArch:
        """The normalised transformer architecture (transformer families only)."""
        if not self.is_transformer:
            raise ScenarioError("model", f"'{self.id}' is a {self.family} model, not a "
                                         f"transformer")
        if "params" in self.config and len(self.config) == 1:
            return generic_decoder(self.config["params"])
        if is_nested(self.config):
            return nested_arch(self.config)
        return arch_from_config(self.config)

    def param_count(self) -> int | None:
        """Parameters of a transformer; other families answer their config's `params`."""
        if self.is_transformer:
            return self.arch.param_count()
        p = self.config.get("params")
        return int(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else None

    @property
    def max_positions(self) -> int | None:
        return self.arch.max_positions if self.is_transformer else None


    def to_dict(self) -> dict:
        return {"id": self.id, "family": self.family, "source": self.source,
                "aliases": list(self.aliases), "config": self.config}


class Catalog:
    """An index over ModelSpecs: exact (case-insensitive) ids and aliases, then short names."""

    def __init__(self, models: Iterable[ModelSpec]):
        self.models: list[ModelSpec] = list(models)
        self._exact: dict[str, tuple[str, ModelSpec]] = {}    # lower name -> (spelling, spec)
        self._short: dict[str, dict[str, tuple[str, ModelSpec]]] = {}
        for spec in self.models:
            for name in (spec.id, *spec.aliases):
                key = name.lower()
                if key in self._exact:
                    other = self._exact[key][1].id
                    raise CatalogError(f"catalog: model '{spec.id}': id or alias '{name}' is "
                                       f"already used by '{other}'")
                self._exact[key] = (name, spec)
        for key, (name, spec) in self._exact.items():
            short = key.rsplit("/", 1)[-1]
            if short != key:
                self._short.setdefault(short, {})[spec.id] = (name, spec)

    def _find(self, name: str) -> tuple[str, ModelSpec]:
        if not isinstance(name, str) or not name.strip():
            raise UnknownIdError("model", str(name), self.ids())
        key = name.strip().lower()
        if key in self._exact:
            return self._exact[key]
        hits = self._short.get(key.rsplit("/", 1)[-1]) if "/" not in key else None
        if hits:
            if len(hits) > 1:
                raise AmbiguousModelError(name, [n for n, _ in hits.values()])
            return next(iter(hits.values()))
        raise UnknownIdError("model", name, self.ids())

    def get(self, name: str) -> ModelSpec:
        return self._find(name)[1]

    def resolve(self, name: str) -> str:
        """The canonical spelling of the id or alias `name` matches (keeps `-Instruct`)."""
        return self._find(name)[0]

    def ids(self) -> list[str]:
        return [s.id for s in self.models]

    def list(self, family: str | None = None) -> list[ModelSpec]:
        return [s for s in self.models if family is None or s.family == family]


def _check_entry(file: str, i: int, e: object) -> ModelSpec:
    if not isinstance(e, dict):
        raise CatalogError(f"{file}: models[{i}] must be an object")
    mid = e.get("id")
    where = f"{file}: model '{mid}'" if isinstance(mid, str) else f"{file}: models[{i}]"
    for key, typ in (("id", str), ("family", str), ("source", str), ("config", dict)):
        if not isinstance(e.get(key), typ):
            raise CatalogError(f"{where}: '{key}' must be a {typ.__name__}")
    aliases = e.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise CatalogError(f"{where}: 'aliases' must be a list of strings")
    if not e["source"].strip():
        raise CatalogError(f"{where}: 'source' is empty: every number needs a source")
    spec = ModelSpec(id=e["id"], family=e["family"], config=e["config"], source=e["source"],
                     aliases=tuple(aliases), note=e.get("note", ""))
    if spec.is_transformer:
        try:
            arch = spec.arch
        except ScenarioError as exc:
            raise CatalogError(f"{where}: config: {exc}") from None
        if arch.kind != spec.family:
            raise CatalogError(f"{where}: family '{spec.family}' but model_type "
                               f"'{arch.model_type}' is a {arch.kind}")
    return spec


def load_catalog(data_dir: Path | str | None = None) -> Catalog:
    """Read every *.json under `data_dir` (default: the package's data folder)."""
    d = Path(data_dir) if data_dir else DATA_DIR
    specs: list[ModelSpec] = []
    for path in sorted(d.glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CatalogError(f"{path.name}: not readable JSON: {exc}") from None
        models = doc.get("models") if isinstance(doc, dict) else None
        if not isinstance(models, list):
            raise CatalogError(f"{path.name}: expected an object with a 'models' list")
        specs += [_check_entry(path.name, i, e) for i, e in enumerate(models)]
    return Catalog(specs)


@functools.lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    return load_catalog()


def get_model(name: str) -> ModelSpec:
    """The model named by HF repo id or alias, case-insensitive, org prefix optional when
    unambiguous. UnknownIdError lists the closest ids; AmbiguousModelError the candidates."""
    return default_catalog().get(name)


def resolve_name(name: str) -> str:
    """Canonical spelling of the catalog id or alias that `name` matches."""
    return default_catalog().resolve(name)


def list_models(family: str | None = None) -> list[ModelSpec]:
    return default_catalog().list(family)


def spec_from_architecture(arch: dict) -> ModelSpec:
    """A ModelSpec for a scenario's inline `architecture`: a HF config.json dict (its
    `model_type` decides the family: bert/roberta -> encoder, t5 -> encoder-decoder, anything
    else a decoder) or `{"params": N}`, a generic Llama-like decoder of about N parameters
    (see `generic_decoder`). A nested multimodal config.json (`text_config` / `vision_config` /
    `audio_config`) is its text decoder with its towers' parameters (catalog.nested); a
    diffusers model_index.json with its components' configs a diffusion pipeline
    (catalog.pipeline). Raises
    ScenarioError('architecture', ...), 'architecture.<sub-config>' for a nested one."""
    if not isinstance(arch, dict):
        raise ScenarioError("architecture", f"must be an object (a config.json dict or "
                                            f"{{\"params\": 7e9}}), got {type(arch).__name__}")
    if not arch:
        raise ScenarioError("architecture", "is empty: give config.json keys or 'params'")
    if "params" in arch:
        if len(arch) > 1:
            others = sorted(k for k in arch if k != "params")
            raise ScenarioError("architecture", f"'params' describes a generic decoder and "
                                                f"cannot be combined with {others}")
        a = generic_decoder(arch["params"])
        return ModelSpec(id="custom/generic-decoder", family="decoder", config=dict(arch),
                         source="generated by vramplan.catalog.transformer_arch.generic_decoder")
    if is_pipeline(arch):
        return ModelSpec(id=f"custom/{arch['_class_name']}", family="diffusion",
                         config=pipeline_config(arch),
                         source="inline diffusers pipeline (scenario): model_index.json + "
                                "its components' config.json")
    nested = is_nested(arch)
    a = nested_arch(arch) if nested else arch_from_config(arch)
    name = arch.get("_name_or_path") if isinstance(arch.get("_name_or_path"), str) else None
    mt = arch.get("model_type") if nested and isinstance(arch.get("model_type"), str) else None
    return ModelSpec(id=name or f"custom/{mt or a.model_type}", family=a.kind,
                     config=dict(arch), source="inline architecture (scenario)",
                     note=nested_note(a) if nested else "")
