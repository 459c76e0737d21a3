"""The plan's sentences, built once and said alike by the page, the report and the CLI: plain
text in one language (`lang`), no markup. Each renderer only lays them out.

- `verdict(est, usable_bytes, lang)`: {fits, title ('Fits on H100'), detail ('48.20 GiB
  headroom' / 'short by 3.10 GiB'), sentence ('Fits on H100: 31.45 GiB of 79.65 GiB usable,
  48.20 GiB to spare')}: the page's banner takes title and detail, the report and the CLI the
  sentence;
- `growth_items(growth, scenario, lang)`: ['sequence length up to 2,984', ...], the advisor's
  `growth` values past the scenario's own;
- `growth_sentence(...)`: 'Room to grow on this GPU: sequence length up to 2,984.' ('' if none).
"""
from __future__ import annotations

from typing import Any, Mapping

from .text import count, size, tr

def verdict(est: Mapping[str, Any], usable: int | None, lang: str = "en",
            gpu_name: str | None = None) -> dict:
    """The verdict of an estimate's JSON on a GPU with `usable` bytes (None: unknown);
    `gpu_name` where the estimate names none."""
    pg, gpu = est.get("per_gpu") or est, est.get("gpu") or {}
    name = gpu.get("name") or gpu_name or gpu.get("id") or "GPU"
    used = pg.get("device_used_bytes")
    fits = bool(est.get("fits")) if "fits" in est else (
        used is not None and usable is not None and used <= usable)
    title = tr("Fits on {gpu}", lang, gpu=name) if fits else \
        tr("Does not fit on {gpu}", lang, gpu=name)
    head = est.get("headroom_bytes")
    if head is None and used is not None and usable is not None:
        head = usable - used
    detail = "" if head is None else tr("{size} headroom", lang, size=size(head, lang)) \
        if fits else tr("short by {size}", lang, size=size(-head, lang))
    why = engine_why(est, lang)
    if why and not fits:         # within the limit, but the serving engine would not start
        return {"fits": fits, "title": title, "detail": why,
                "sentence": tr("{title}: {why}", lang, title=title, why=why)}
    if used is None or usable is None:
        sentence = title
    elif fits:
        sentence = tr("Fits on {gpu}: {used} of {usable} usable, {free} to spare", lang,
                      gpu=name, used=size(used, lang), usable=size(usable, lang),
                      free=size(usable - used, lang))
    else:
        sentence = tr("Does not fit on {gpu}: {used} needed, {usable} usable, {over} over",
                      lang, gpu=name, used=size(used, lang), usable=size(usable, lang),
                      over=size(used - usable, lang))
    return {"fits": fits, "title": title, "detail": detail, "sentence": sentence}


def engine_why(est: Mapping[str, Any], lang: str = "en") -> str:
    """'the engine does not start: its KV pool holds 12,096 of 131,072 tokens' when the
    estimate's `serving` section says vLLM's start-up check fails; '' otherwise."""
    sv = est.get("serving") or {}
    if not sv or sv.get("engine_starts", True):
        return ""
    return tr("the engine does not start: its KV pool holds {n} of {m} tokens", lang,
              n=count(sv.get("longest_context_tokens"), lang),
              m=count(sv.get("max_model_len"), lang))


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
