"""What the planner's state is made of, as plain functions: the family choices, the default
GPU and plan, a link's query read key by key (into the draft: the given keys, nested keys as
objects, `{"lora": {"rank": 32}}`), which field an error names, catalog search, and the words
for a size-only or uploaded model. No widgets here."""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from ...catalog import get_model, list_models, spec_from_architecture
from ...errors import UnknownIdError, VramplanError
from ...scenario import form
from ...scenario.keys import EXTRA_NAMES
from ...scenario.query import parse_query
from ...scenario.resolution import get_path, with_path
from .text import format_params

ALL = ""                    # family choices besides the catalog's families
SIZE_ONLY = "size-only"     # architecture {"params": N}: a Llama-shaped decoder of that size
OWN = "own-config"          # architecture: a pasted or uploaded config.json
NO_MODEL = "no-model"       # render / volume / array
SEED = ("model", "architecture", "task")
DEFAULT_GPUS = ("nvidia-h100-sxm5-80gb", "nvidia-h100-sxm", "H100 SXM", "nvidia-a100-sxm4-80gb")
POPULAR_GPUS = ("nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb", "nvidia-rtx-4090",
                "amd-mi300x", "nvidia-l4")
DEFAULT_WORKLOADS = ({"model": "meta-llama/Llama-3.1-8B", "task": "lora"},
                     {"model": "gpt2", "task": "train"})
# notes written for programs reading the JSON, not for the page
MACHINE_NOTES = ("components sum to ",)
PAGE_SETTINGS = ("lang",)   # query keys that set the page, not the scenario


@dataclass(frozen=True)
class Notice:
    """A page-level message. `choices`: GPU ids the page offers to pick instead. `text` is
    the English message; `template` (English with `{name}` placeholders) and `params`
    ((name, value) pairs) let the page show it in its language (`notices.notice_text`)."""
    text: str
    kind: str = "info"
    choices: tuple[str, ...] = ()
    template: str = ""
    params: tuple[tuple[str, str], ...] = ()


def notice(template: str, kind: str = "info", choices: tuple = (), **params) -> Notice:
    """A Notice from an English template (marked with `N_`) and its values."""
    return Notice(template.format(**params), kind, tuple(choices), template,
                  tuple((k, str(v)) for k, v in params.items()))


@dataclass
class Snapshot:
    draft: dict
    gpu: str | None
    bad: dict = field(default_factory=dict)


def default_gpu(db) -> str | None:
    """The device id the page starts with when the link names none."""
    for name in DEFAULT_GPUS:
        try:
            return db.get(name).id
        except UnknownIdError:
            continue
    return db.devices[0].id if db.devices else None


def default_draft() -> dict:
    for d in DEFAULT_WORKLOADS:
        if not form.check(d):
            return dict(d)
    models = list_models()
    return {"model": models[0].id} if models else {"task": "render"}


def family_of(draft: dict) -> str | None:
    """The draft's model family (a catalog family, SIZE_ONLY, OWN or NO_MODEL); None while
    the model is not known."""
    arch = draft.get("architecture")
    if isinstance(arch, dict):
        return SIZE_ONLY if set(arch) == {"params"} else OWN
    if arch is not None:
        return None
    model = draft.get("model")
    if model in (None, ""):
        return NO_MODEL
    try:
        return get_model(str(model)).family
    except VramplanError:
        return None


def model_family(draft: dict) -> str | None:
    """The family the workload registry knows the draft's model by ('decoder' for a
    size-only decoder; NO_MODEL without a model); None while it is not known."""
    arch = draft.get("architecture")
    if isinstance(arch, dict):
        try:
            return spec_from_architecture(arch).family
        except VramplanError:
            return None
    fam = family_of(draft)
    return None if fam in (SIZE_ONLY, OWN) else fam


def search_models(text: str = "", family: str | None = None) -> list:
    """Catalog models whose id, alias or family contains every word of `text`."""
    words = [w for w in (text or "").lower().split() if w]
    out = []
    for m in list_models():
        if family and m.family != family:
            continue
        hay = " ".join((m.id, *m.aliases, m.family)).lower()
        if all(w in hay for w in words):
            out.append(m)
    return out


def draft_from_query(qs: str) -> tuple[dict, dict]:
    """A link's query string -> (draft, {key: problem}). Each key is read on its own, so one
    bad value leaves the others; a bad one stays in the draft as typed (the page shows it)."""
    draft: dict = {}
    bad: dict = {}
    try:
        pairs = parse_qsl((qs or "").lstrip("?"), keep_blank_values=True)
    except ValueError as exc:
        return {}, {"scenario": str(exc)}
    for k, s in pairs:
        if k in PAGE_SETTINGS:              # the page's, not the scenario's
            continue
        try:
            d = parse_query(urlencode([(k, s)]), EXTRA_NAMES)
        except VramplanError as exc:
            bad[getattr(exc, "key", k)] = getattr(exc, "message", None) or str(exc)
            draft = with_path(draft, k, s)          # as typed: the page shows it
            continue
        draft = with_path(draft, k, get_path(d, k))
    return draft, bad


def readable_query(q: str) -> str:
    """The same query with '/', ',', ':' and '@' left as they are (allowed in a query string,
    RFC 3986 3.4): `model=meta-llama/Llama-3.1-8B` rather than `model=meta-llama%2FLlama-3.1-8B`,
    `stack=torchtitan@2025-06` rather than `stack=torchtitan%402025-06`."""
    return urlencode(parse_qsl(q, keep_blank_values=True), safe="/,:@")


def draft_key(error_key: str, draft) -> str | None:
    """The name among `draft`'s (field keys, dotted) an error's key names ('arrays[0].shape'
    -> 'arrays'); for the draft itself see `scenario.resolution.entry_of`."""
    if error_key in draft:
        return error_key
    for k in sorted(draft, key=len, reverse=True):
        if error_key.startswith(k) and error_key[len(k):len(k) + 1] in (".", "["):
            return k
    top = error_key.split(".")[0].split("[")[0]
    return top if top in draft else None


def is_for_people(note: str) -> bool:
    return not str(note).startswith(MACHINE_NOTES)


def describe_model(draft: dict) -> str:
    """'size only: a Llama-shaped decoder of 70B parameters' and the like (a hint under the
    model box); '' for catalog models."""
    arch = draft.get("architecture")
    if isinstance(arch, dict) and set(arch) == {"params"} and arch["params"]:
        return (f"Size only: a Llama-shaped decoder of {format_params(arch['params'])} "
                "parameters (no catalog entry).")
    if isinstance(arch, dict):
        try:
            spec = spec_from_architecture(arch)
        except VramplanError:
            return ""
        n = getattr(getattr(spec, "arch", None), "param_count", None)
        size = f", {format_params(n())} parameters" if callable(n) else ""
        return f"Your own config.json: {spec.family}{size}."
    return ""
