"""The plan's sentences, built once and said alike by the page, the report and the CLI: plain
text in one language (`lang`), no markup. Each renderer only lays them out.

- `growth_items(growth, scenario, lang)`: ['sequence length up to 2,984', ...], the advisor's
  `growth` values past the scenario's own;
- `growth_sentence(...)`: 'Room to grow on this GPU: sequence length up to 2,984.' ('' if none).
"""
from __future__ import annotations

from typing import Any, Mapping

from .text import count, tr

# a growth key as a sentence names it (others: the key with spaces)
GROWTH_NAMES = {"batch_size": "batch size", "seq_len": "sequence length"}


def _same(now: Any, v: Any) -> bool:
    if isinstance(v, (list, tuple)) and isinstance(now, (list, tuple)):
        return list(now) == list(v)
    return now == v


def growth_items(growth: Mapping[str, Any] | None, scenario: Mapping[str, Any] | None,
                 lang: str = "en") -> list[str]:
    """'{key} up to {value}' for each value of the advisor's `growth` past today's."""
    out, now = [], dict(scenario or {})
    for k, v in (growth or {}).items():
        if _same(now.get(k), v):
            continue
        val = " × ".join(count(x, lang) for x in v) if isinstance(v, (list, tuple)) else \
            count(v, lang) if isinstance(v, (int, float)) else str(v)
        out.append(tr("{key} up to {value}", lang,
                      key=tr(GROWTH_NAMES.get(k, k.replace("_", " ")), lang), value=val))
    return out


def growth_sentence(growth: Mapping[str, Any] | None, scenario: Mapping[str, Any] | None,
                    lang: str = "en") -> str:
    items = growth_items(growth, scenario, lang)
    return tr("Room to grow on this GPU: {what}.", lang, what=", ".join(items)) if items else ""
