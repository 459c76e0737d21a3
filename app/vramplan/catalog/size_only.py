"""A model named by its size alone: '70B', '7b', '350M params' -> a parameter count. The page's
model box and any other front end read it here (the catalog's `generic_decoder(params)` then
makes the size-only decoder), so text like '70B' means the same wherever it is typed.
Plain Python: text in, a number or None out; validity is the scenario's to decide."""
from __future__ import annotations

import math
import re
from typing import Any

_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbt]?)\s*(?:params?)?\s*$",
                     re.I)
_SCALE = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}
_SIZE_WORD = re.compile(r"^\s*[0-9]*\.?[0-9]+\s*[kmbt]\s*(?:params?)?\s*$", re.I)


def parse_params(text: Any) -> float | None:
    """'7B' -> 7e9, '350M' -> 3.5e8, '1.5e9' -> 1.5e9, '70 b params' -> 7e10; else None."""
    m = _NUMBER.match(text or "") if isinstance(text, str) else None
    if not m:
        return None
    v = float(m.group(1)) * _SCALE[m.group(2).lower()]
    return v if math.isfinite(v) and v >= 1 else None


def looks_like_size(text: Any) -> bool:
    """'70B', '7b', '350M params': a parameter count with its suffix (not a model id)."""
    return isinstance(text, str) and bool(_SIZE_WORD.match(text)) and \
        parse_params(text) is not None
