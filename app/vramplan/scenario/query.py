"""Scenario <-> URL query string (the share link of the planner).

Form (documented in docs/scenario.md):
- scalars as `key=value` (`true` / `false` for booleans);
- lists comma-joined: `offload=optimizer,params`, `resolution=1024,1024`;
- nested objects as dotted keys: `parallel.tensor=2`, `lora.rank=16`, `lora.targets=q_proj,v_proj`,
  `serving.max_model_len=8192`, `precision.default=bf16&precision.transformer=fp8`;
- `architecture` as compact JSON (a config.json is free-form);
- workload-specific keys: scalars as text, lists/objects as JSON.

`to_query` writes the keys given (`Scenario.given_dict()`, model, architecture, task and GPU
first) and nothing else: a value derived from them, such as serve's serving.max_num_seqs from
batch_size, is derived again when the link is read. It runs no pass: the scenario already
resolved those keys, and the same keys resolve to the same scenario (the round trip
`from_query(to_query(sc)) == sc` is a property test, tests/test_scenario_query_given.py). A
scenario built directly counts every value as given and writes them all.
"""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlencode

from .. import safejson
from ..errors import ScenarioError, VramplanError
from .keys import BY_NAME, EXTRA_NAMES, KEYS

MAX_QUERY_CHARS = 100_000   # a config.json in a link is ~1-10 kB; browsers cap URLs near 64 kB


class _Of:
    """The contract and nested keys of these kinds (workload keys travel as JSON), read from
    the key table when asked (a row added to the table is read like the others)."""

    def __init__(self, *kinds: str):
        self.kinds = kinds

    def __contains__(self, name) -> bool:
        k = BY_NAME.get(name)
        return k is not None and k.kind in self.kinds and not k.extra

    def names(self) -> frozenset[str]:
        return frozenset(n for n in BY_NAME if n in self)

    def __eq__(self, other) -> bool:
        return self.names() == other

    __hash__ = None


_of = _Of


_INT = _of("int")
_NUM = _of("number")
_BOOL = _of("bool")
_LIST = _of("multi")
_INT_LIST = _of("resolution")
# objects written as dotted keys: those with nested keys in the table, and precision's
# components (`precision.transformer=fp8`)
_NESTED = tuple(dict.fromkeys(k.parent for k in KEYS if k.parent)) + ("precision",)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def _flat(d: dict, extra_names) -> list[tuple[str, str]]:
    out = []
    for k, v in d.items():
        if k == "architecture" or (k in extra_names and isinstance(v, (dict, list))):
            out.append((k, json.dumps(v, separators=(",", ":"))))
        elif k in _NESTED and isinstance(v, dict):
            out += [(f"{k}.{sk}", _fmt(sv)) for sk, sv in v.items()]
        else:
            out.append((k, _fmt(v)))
    return out


SEED = ("model", "architecture", "task", "gpu")   # written first: what a reader sees first


def to_query(sc) -> str:
    """The link of `sc`: its given keys, the seed keys first (no pass is run)."""
    given = sc.given_dict()
    ordered = {**{k: given[k] for k in SEED if k in given}, **given}
    return urlencode(_flat(ordered, set(EXTRA_NAMES)))


def _convert(key: str, s: str, extra_names) -> Any:
    try:
        if key in _INT:
            return int(s)
        if key in _NUM:
            f = float(s)
            return int(f) if f.is_integer() and "." not in s and "e" not in s.lower() else f
    except ValueError:
        raise ScenarioError(key, f"must be {'an integer' if key in _INT else 'a number'}, "
                                 f"got '{s}'") from None
    if key in _BOOL:
        if s.lower() not in ("true", "false", "1", "0"):
            raise ScenarioError(key, f"must be true or false, got '{s}'")
        return s.lower() in ("true", "1")
    if key in _LIST:
        return [x for x in s.split(",") if x]
    if key in _INT_LIST:
        try:
            return [int(x) for x in s.split(",") if x]
        except ValueError:
            raise ScenarioError(key, f"must be integers separated by commas, got '{s}'") from None
    if key == "architecture":
        try:
            value = safejson.loads(s, key)
        except VramplanError as exc:
            raise ScenarioError(key, "must be a JSON object in the query string ("
                                + str(exc).removeprefix(f"{key}: ") + ")") from None
        if not isinstance(value, dict):
            raise ScenarioError(key, "must be a JSON object (the keys of a config.json) in the "
                                     "query string; a link cannot name a file")
        return value
    if key in extra_names and s[:1] in ("[", "{", '"'):
        try:
            return safejson.loads(s, key)
        except VramplanError as exc:
            raise ScenarioError(key, str(exc).removeprefix(f"{key}: ")) from None
    if key in extra_names:
        try:
            return safejson.loads(s, key)
        except VramplanError:
            return s
    return s


def parse_query(q: str, extra_names=()) -> dict:
    """A query string -> the scenario dict it encodes (types restored by key)."""
    if not isinstance(q, str):
        raise ScenarioError("scenario", f"query must be a string, got {type(q).__name__}")
    q = q.lstrip("?")
    if len(q) > MAX_QUERY_CHARS:
        raise ScenarioError("scenario", f"the link's query is {len(q):,} characters, more than "
                                        f"the {MAX_QUERY_CHARS:,} accepted")
    d: dict[str, Any] = {}
    for k, s in parse_qsl(q, keep_blank_values=True):
        if k in d and "." not in k:
            raise ScenarioError(k, "given twice in the query string")
        val = _convert(k, s, set(extra_names))
        if "." in k:
            top, sub = k.split(".", 1)
            if top in d and not isinstance(d[top], dict):
                raise ScenarioError(top, "given both as a value and as dotted keys")
            d.setdefault(top, {})[sub] = val
        else:
            d[k] = val
    return d
