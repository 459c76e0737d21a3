"""Typed readers for values from outside (scenario files, links, forms, flags): each returns the
value normalised or raises one ScenarioError that names the key (dotted for nested parts:
`parallel.tensor`, `render_targets[1].format`). A bool is never a number.

The ground floor with `errors`, `safejson` and `units`: imports nothing else of the package, so
the scenario, the workload-specific keys and the CLI read values the same way.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from . import safejson
from .errors import ScenarioError, VramplanError
from .units import UnitError, parse_bytes

__all__ = ["read_int", "read_num", "read_bool", "read_choice", "read_names", "read_list",
           "read_obj", "read_name", "read_shape", "read_size", "read_json", "describe_range"]

MAX_SIZE_BYTES = 2**50   # 1 PiB: no GPU budget is larger


def _is_number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float))


def describe_range(lo, hi, lo_open: bool = False) -> str:
    """'between 1 and 8', '>= 1', '> 0 and <= 1' (the words of the range messages)."""
    if hi is None:
        return f"{'>' if lo_open else '>='} {lo}"
    if lo_open:
        return f"> {lo} and <= {hi}"
    return f"between {lo} and {hi}"


def read_int(key: str, v: Any, lo: int = 1, hi: int | None = None, *,
             whole_floats: bool = False) -> int:
    """An integer in [lo, hi]. `whole_floats`: 4.0 is read as 4 (workload keys written by
    tools that emit floats); otherwise 4.0 is not an integer."""
    if whole_floats and isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ScenarioError(key, f"must be an integer, got {v!r}")
    if v < lo or (hi is not None and v > hi):
        hi_said = None if hi is None else f"{hi:,}"
        raise ScenarioError(key, f"must be {describe_range(f'{lo:,}', hi_said)}, got {v:,}")
    return v


def read_num(key: str, v: Any, lo: float, hi: float, *, lo_open: bool = False,
             as_float: bool = False) -> float:
    """A finite number in [lo, hi] ((lo, hi] with `lo_open`); kept as given (16 stays 16)
    unless `as_float`."""
    if not _is_number(v) or not math.isfinite(v):
        raise ScenarioError(key, f"must be a number, got {v!r}")
    if v < lo or v > hi or (lo_open and v == lo):
        raise ScenarioError(key, f"must be {'>' if lo_open else '>='} {lo} and <= {hi}, got {v}")
    return float(v) if as_float else v


def read_bool(key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ScenarioError(key, f"must be true or false, got {v!r}")
    return v


def read_choice(key: str, v: Any, choices: Iterable[str], *, fold_case: bool = False) -> str:
    """One of `choices` (exact; `fold_case`: spaces stripped and case folded first)."""
    choices = tuple(choices)
    if not isinstance(v, str):
        raise ScenarioError(key, f"must be a string, one of {', '.join(choices)}; got {v!r}")
    s = v.strip().lower() if fold_case else v
    if s not in choices:
        raise ScenarioError(key, f"'{v}' is not one of {', '.join(choices)}")
    return s


def read_names(key: str, v: Any, choices: Iterable[str] | None = None) -> tuple[str, ...]:
    """A list of non-empty strings: with `choices`, each one of them (sorted, unique); without,
    free names in the order given (duplicates dropped)."""
    if not isinstance(v, (list, tuple)):
        raise ScenarioError(key, f"must be a list of strings, got {v!r}")
    allowed = tuple(choices) if choices is not None else None
    out = []
    for x in v:
        if not isinstance(x, str) or not x.strip():
            raise ScenarioError(key, f"must be a list of non-empty strings, got {x!r} in it")
        if allowed is not None and x not in allowed:
            raise ScenarioError(key, f"'{x}' is not one of {', '.join(allowed)}")
        out.append(x)
    return tuple(sorted(set(out))) if allowed is not None else tuple(dict.fromkeys(out))


def read_list(key: str, v: Any, max_len: int = 256) -> list:
    if not isinstance(v, (list, tuple)):
        raise ScenarioError(key, f"must be a list, got {type(v).__name__}")
    if len(v) > max_len:
        raise ScenarioError(key, f"at most {max_len} entries, got {len(v)}")
    return list(v)


def read_obj(key: str, v: Any, known: Iterable[str], required: Iterable[str] = ()) -> dict:
    """An object whose keys are among `known` and hold every `required` one; an unknown or
    missing sub-key is named dotted (`lora.bogus`)."""
    known = tuple(known)
    if not isinstance(v, dict):
        raise ScenarioError(key, f"must be an object with keys {', '.join(known)}; got {v!r}")
    for k in v:
        if k not in known:
            raise ScenarioError(f"{key}.{k}", f"unknown key; {key} takes {', '.join(known)}")
    for k in required:
        if k not in v:
            raise ScenarioError(f"{key}.{k}", "is required")
    return v


def read_name(key: str, v: Any, max_chars: int = 64) -> str:
    if not isinstance(v, str) or not v.strip() or len(v) > max_chars:
        raise ScenarioError(key, f"must be a non-empty string of at most {max_chars} "
                                 f"characters, got {v!r}")
    return v.strip()


def read_shape(key: str, v: Any, ndim: tuple[int, int] = (1, 8), lo: int = 1,
               hi: int = 2**31) -> list[int]:
    """A list of ndim[0]..ndim[1] integers, each in [lo, hi] (named `key[i]`)."""
    items = read_list(key, v, ndim[1])
    if len(items) < ndim[0]:
        raise ScenarioError(key, f"needs {ndim[0]} to {ndim[1]} dimensions, got {len(items)}")
    return [read_int(f"{key}[{i}]", x, lo, hi, whole_floats=True) for i, x in enumerate(items)]


def read_size(key: str, v: Any, max_bytes: int = MAX_SIZE_BYTES) -> int:
    """Bytes: an int, or a string with an explicit unit ('2 GiB', '500MB')."""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise ScenarioError(key, f"must be a size such as '2 GiB' or a number of bytes, got {v!r}")
    try:
        n = parse_bytes(v)
    except UnitError as exc:
        raise ScenarioError(key, str(exc)) from None
    except (OverflowError, ValueError):
        raise ScenarioError(key, f"{v!r} is not a size vramplan accepts (too large)") from None
    if n > max_bytes:
        raise ScenarioError(key, f"{v!r} is more than 1 PiB: not a GPU budget")
    return n


def read_json(key: str, v: Any) -> Any:
    """Any JSON value, refused by name when it holds NaN / infinity or nests too deep."""
    try:
        safejson.check_value(v, key)
    except VramplanError as exc:
        raise ScenarioError(key, str(exc).removeprefix(f"{key}: ")) from None
    return v
