"""The key table: every scenario key once, with its type, range or choices, unit, the tasks and
model families that take it, its default (or how it is defaulted) and a one-line doc.

Validation and normalisation (`build.py`), the URL query string (`query.py`), the CLI flags
(`cli_flags()`), the docs page of keys (`markdown()`, docs/scenario-keys.md) and the UI's form
(`form.py`) are derived from it. Contract keys (`shared/SCENARIO.md`) come in contract order;
nested keys are dotted (`parallel.tensor`, `lora.rank`, `serving.kv_cache_dtype`); the
workload-specific keys (render, volume, array, video) are `extra` and live in
`Scenario.extra`. The rows are written in `contract_keys.py` (contract keys and their dotted
sub-keys) and `workload_keys.py` (the workload keys); this module joins them into the table.
"""
from __future__ import annotations

import re
from typing import Any, Callable, NamedTuple

from ..vocab import MODELLESS_TASKS
from .contract_keys import BIG, CONTRACT, LIMIT, MODEL_TASKS, NESTED  # noqa: F401 (names)
from .schema import KINDS, Key
from .workload_keys import EXTRA

KEYS: tuple[Key, ...] = CONTRACT + NESTED + EXTRA
BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}
CONTRACT_KEYS: tuple[str, ...] = tuple(k.name for k in CONTRACT)
EXTRA_NAMES: tuple[str, ...] = tuple(k.name for k in EXTRA)
assert not set(CONTRACT_KEYS) & set(EXTRA_NAMES) and all(k.kind in KINDS for k in KEYS)


def key(name: str) -> Key:
    return BY_NAME[name]


def subkeys(parent: str) -> tuple[Key, ...]:
    """The dotted keys of an object key (`lora` -> lora.rank, lora.alpha, ...)."""
    return tuple(k for k in NESTED if k.parent == parent)


def sub_names(parent: str) -> tuple[str, ...]:
    return tuple(k.name.split(".", 1)[1] for k in subkeys(parent))


def keys_for(task: str, family: str | None) -> tuple[Key, ...]:
    """The keys a scenario of this task and model family accepts (nested ones included)."""
    return tuple(k for k in KEYS if k.applies(task, family) and
                 (k.parent is None or BY_NAME[k.parent].applies(task, family)))


DERIVED: tuple[Key, ...] = tuple(k for k in KEYS if k.derive is not None)


def derive(values: dict) -> dict:
    """`values` (dotted keys; 'task', '_positions') with every missing key whose row derives
    it from others filled in, until nothing changes: the serving couplings (batch_size <->
    serving.max_num_seqs, seq_len <-> serving.max_model_len: each defaults to the other)
    and vLLM's max_num_batched_tokens. The one place these rules are written."""
    out = dict(values)
    for _ in range(len(DERIVED)):
        moved = False
        for k in DERIVED:
            if out.get(k.name) is None:
                v = k.derive(out)
                if v is not None:
                    out[k.name], moved = v, True
        if not moved:
            break
    return out


# ---- the workload-specific keys as plain tables --------------------------------------------

EXTRA_KEYS: dict[str, Callable[[Any], Any]] = {k.name: k.read for k in EXTRA}
KEY_TASKS: dict[str, tuple[str, ...]] = {k.name: k.tasks for k in EXTRA}


def EXTRA_DEFAULTS(task: str) -> dict:  # noqa: N802 (the name the workloads know)
    """Defaults of the workload keys a task reads (a fresh copy; empty for other tasks);
    None where a key has no default (`video`, `patch`)."""
    return {k.name: k.default_for(task) for k in EXTRA if task in k.tasks}


def normalise_extra(d: dict, task: str) -> dict:
    """Validate the workload keys present in `d` (other keys are ignored) and return the
    task's defaults updated with the normalised values; a key the task does not read is
    refused."""
    out = EXTRA_DEFAULTS(task)
    for k, v in d.items():
        if k in EXTRA_KEYS:
            if task not in KEY_TASKS[k]:
                raise BY_NAME[k].refusal(task, None)
            out[k] = EXTRA_KEYS[k](v)
    return out


# ---- the docs page (docs/scenario-keys.md) ---------------------------------------------------

_DOC_HEAD = """# Scenario keys

Generated from the key table `vramplan.scenario.keys` (`keys.markdown()`); a test checks that
this file equals it. Edit the table, then run `.venv/bin/python -c "from vramplan.scenario.keys
import markdown; print(markdown(), end='')" > docs/scenario-keys.md`.

The contract keys (`shared/SCENARIO.md`) keep their names and meanings; the rules between keys
(defaults by task, serve's linked limits, parallel products) are in `docs/scenario.md`. A key
given where it does not apply is refused, naming it. Nested keys are dotted. "the model's":
the model family's defaults hook (`vramplan.workloads.registry.family_defaults`) reads the
catalog entry.
"""

_DOC_EXTRA = """## Workload-specific keys

The contract lets the project add keys for workloads it does not name. They are validated by
the table (each refuses a wrong type, value or range naming the key, dotted for nested parts:
`render_targets[1].format`), defaulted by task, stored in `Scenario.extra` and written flat by
`to_dict`. Sizes are bytes (int) or a size string with an explicit unit (`"2 GiB"`,
`"500MB"`). Diffusion pipelines need no new keys: `text_len`, `guidance`, `resolution`,
`frames`, `steps`, per-component `precision`, `offload: ["model"]` and the options carry them.
Video is a key of `render` rather than a task because the contract's task list is fixed and
video surfaces, like render targets, are driver allocations (no caching allocator).
"""


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(rows, applies: bool = True, task: str | None = None) -> list[str]:
    head = ["key", "type", "default", "meaning", "unit"]
    if applies:
        head.insert(2, "applies to")
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for k in rows:
        cells = [f"`{k.name}`", k.type_text(), k.default_text(task), k.doc, k.unit or "-"]
        if applies:
            cells.insert(2, k.applies_text())
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return out


def markdown() -> str:
    """docs/scenario-keys.md: every key of the table."""
    lines = [_DOC_HEAD, "## Contract keys", ""] + _table(CONTRACT)
    lines += ["", "## Nested keys", ""] + _table(NESTED)
    lines += ["", _DOC_EXTRA]
    for task in MODELLESS_TASKS:
        lines += [f"### task `{task}`", ""]
        lines += _table([k for k in EXTRA if task in k.tasks], applies=False, task=task) + [""]
    inference = [k for k in EXTRA if not set(k.tasks) & set(MODELLESS_TASKS)]
    if inference:   # workload keys of model tasks (speculative decoding, inference offload)
        lines += ["### model tasks", ""] + _table(inference) + [""]
    return "\n".join(lines).rstrip() + "\n"


# ---- CLI flags -------------------------------------------------------------------------------

class Flag(NamedTuple):
    """One command-line flag of a scalar key: `type` is int, float, str, bool (a
    --flag / --no-flag switch) or a parser of text (resolution: '1024x1024')."""
    flag: str
    dest: str
    type: Any
    choices: tuple | None
    help: str


def parse_resolution(text: str) -> list[int]:
    """'1024x1024', '1024,1024', '64x128x128' -> [ints] (ValueError otherwise)."""
    parts = [p for p in re.split(r"[x×*,\s]+", str(text).strip().lower()) if p]
    if len(parts) not in (2, 3):
        raise ValueError(f"not HxW or DxHxW: {text!r}")
    return [int(p) for p in parts]


_FLAG_TYPES = {"int": int, "number": float, "bool": bool, "choice": str, "size": str,
               "resolution": parse_resolution}


def flag_of(k: Key) -> str:
    return k.flag or "--" + k.name.replace(".", "-").replace("_", "-")


def cli_flags() -> list[Flag]:
    """A flag for every scalar key of the table (objects and lists have none), in table
    order: (flag, dest, type, choices, help). `scenario_from_flags` maps parsed values back."""
    out = []
    for k in KEYS:
        if k.kind not in _FLAG_TYPES or k.shown_tasks == ():
            continue
        choices = tuple(k.choices) if k.choices else None
        if choices is None and k.kind == "int" and k.lo is not None and k.hi is not None \
                and k.hi - k.lo <= 8:  # a small integer range reads best as choices (zero 0-3)
            choices = tuple(range(int(k.lo), int(k.hi) + 1))
        typ = int if choices and isinstance(choices[0], int) else _FLAG_TYPES[k.kind]
        flag = flag_of(k)
        dflt = k.default_text()
        where = k.applies_text()
        help_ = k.doc + ("" if where == "all" else f" ({where})") + \
            ("" if dflt == "none" else f"; default {dflt.replace('`', '')}")
        out.append(Flag(flag, flag[2:].replace("-", "_"), typ, choices, help_.replace("%", "%%")))
    return out


def scenario_from_flags(values: dict) -> dict:
    """{dest: value} of parsed flags (None: not given) -> the scenario dict they spell,
    nested keys as objects (`--lora-rank 16` -> {"lora": {"rank": 16}})."""
    by_dest = {f.dest: k for f, k in zip(cli_flags(), (k for k in KEYS
                                                       if k.kind in _FLAG_TYPES and
                                                       k.shown_tasks != ()))}
    d: dict = {}
    for dest, v in values.items():
        if v is None or dest not in by_dest:
            continue
        name = by_dest[dest].name
        if "." in name:
            top, sub = name.split(".", 1)
            d.setdefault(top, {})[sub] = v
        else:
            d[name] = v
    return d


