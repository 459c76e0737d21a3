"""JSON from outside (files, links, uploads, flags) read safely: one VramplanError naming the
problem, never a traceback.

`loads(text, what)` refuses what `json.loads` lets through or chokes on:
- NaN, Infinity and numbers that overflow a float (`1e999`): not a size anyone means;
- nesting deeper than `MAX_DEPTH` (a 3,000-deep array makes `json.loads` raise RecursionError,
  and a deep value makes every later walk over it slow);
- text longer than `max_chars` (default `MAX_CHARS`);
- a leading UTF-8 byte-order mark is dropped (editors on Windows write one).

`check_value(value, what)` applies the same depth and finiteness rules to a value that is
already Python (a dict handed to the API).
"""
from __future__ import annotations

import json
import math
from typing import Any

from .errors import VramplanError

MAX_DEPTH = 32            # a Hugging Face config.json nests 3 deep; render targets 3
MAX_CHARS = 2_000_000     # 2 MB of JSON: a config.json is ~1-20 kB


class BadNumberError(VramplanError, ValueError):
    """NaN, Infinity or an overflowing number in JSON text; `key` is where it sits (dotted,
    `[i]` for list items: 'batch_size', 'lora.rank', 'render_targets[1].scale'; '' at the
    top), so a scenario file's error names its key."""

    def __init__(self, what: str, key: str, text: str, why: str):
        self.key, self.text, self.why = key, text, why
        super().__init__(f"{what}: " + (f"key '{key}': " if key else "") + f"{text} {why}")


class _Bad:
    """A number json.loads met that vramplan refuses; found by `_first_bad` after parsing,
    so the error can name its key."""
    __slots__ = ("text", "why")

    def __init__(self, text: str, why: str):
        self.text, self.why = text, why


def _constant(name: str) -> _Bad:
    return _Bad(name, "is not a number vramplan accepts")


def _float(text: str):
    value = float(text)
    return value if math.isfinite(value) else _Bad(text, "is too large")


def _first_bad(value) -> tuple[str, _Bad] | None:
    """(dotted key, marker) of the first refused number in document order (iterative)."""
    stack = [(value, "")]
    while stack:
        v, key = stack.pop()
        if isinstance(v, _Bad):
            return key, v
        if isinstance(v, dict):
            stack.extend((x, f"{key}.{k}" if key else str(k)) for k, x in reversed(v.items()))
        elif isinstance(v, list):
            stack.extend((x, f"{key}[{i}]") for i, x in reversed(list(enumerate(v))))
    return None


def decode_text(data: bytes, what: str) -> str:
    """UTF-8 (with or without a BOM) -> str; anything else is refused naming `what`."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise VramplanError(f"{what}: not UTF-8 text (a binary file?)") from None


def loads(text: str | bytes, what: str, max_chars: int = MAX_CHARS) -> Any:
    """Parse JSON text from outside; VramplanError(`what`: ...) on anything unusable."""
    if isinstance(text, (bytes, bytearray)):
        text = decode_text(bytes(text), what)
    if len(text) > max_chars:
        raise VramplanError(f"{what}: {len(text):,} characters is more than the "
                            f"{max_chars:,} accepted")
    text = text.lstrip("\ufeff")
    if "\x00" in text:
        raise VramplanError(f"{what}: not JSON text (a binary file?)")
    if _depth_of_text(text) > MAX_DEPTH:
        raise VramplanError(f"{what}: nested more than {MAX_DEPTH} levels deep")
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float)
    except json.JSONDecodeError as exc:
        raise VramplanError(f"{what}: not JSON: {exc.msg} (line {exc.lineno}, column "
                            f"{exc.colno})") from None
    except ValueError as exc:
        raise VramplanError(f"{what}: {exc}") from None
    except RecursionError:  # pragma: no cover (the depth check above comes first)
        raise VramplanError(f"{what}: nested too deep") from None
    bad = _first_bad(value)
    if bad is not None:
        raise BadNumberError(what, bad[0], bad[1].text, bad[1].why)
    return value


def _depth_of_text(text: str) -> int:
    """Deepest [ / { nesting of JSON text, skipping strings (a linear scan, no recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def check_value(value: Any, what: str) -> None:
    """Refuse a Python value nested deeper than MAX_DEPTH or holding NaN / infinity
    (iterative: a 3,000-deep value raises VramplanError, not RecursionError)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise VramplanError(f"{what}: {v} is not a number vramplan accepts")
        if isinstance(v, (dict, list, tuple)):
            if depth > MAX_DEPTH:
                raise VramplanError(f"{what}: nested more than {MAX_DEPTH} levels deep")
            items = v.values() if isinstance(v, dict) else v
            stack.extend((x, depth + 1) for x in items)
