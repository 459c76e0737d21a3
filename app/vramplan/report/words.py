"""The plan's sentences, built once and said alike by the page, the report and the CLI: plain
text in one language (`lang`), no markup. Each renderer only lays them out.

- `verdict(est, usable_bytes, lang)`: {fits, title ('Fits on H100'), detail ('48.20 GiB
  headroom' / 'short by 3.10 GiB'), sentence ('Fits on H100: 31.45 GiB of 79.65 GiB usable,
  48.20 GiB to spare'; with a safety margin, against the limit: '... of the 75.67 GiB limit
  (79.65 GiB usable less a 3.98 GiB safety margin), 44.22 GiB to spare')}:
  the page's banner takes title and detail, the report and the CLI the sentence;
- `margin_words(lim, lang)` / `limit_words(lim, lang)`: the safety margin and the one memory
  limit (the estimate's `memory_limit` section) beside the figures;
- `growth_items(growth, scenario, lang)`: ['sequence length up to 2,984', ...], the advisor's
  `growth` values past the scenario's own;
- `growth_sentence(...)`: 'Room to grow on this GPU: sequence length up to 2,984.' ('' if none);
- `saving(rec, lang)`: what one advisor change buys: 'saves 1.20 GiB', or on a serve plan the
  room it gives vLLM's KV pool, '+31.84 GiB KV pool per GPU, holds 208,692 more tokens' (vLLM
  pre-allocates its share of memory: device bytes saved say nothing there);
- `transfers(cost, lang)` / `cost_words(cost, lang)`: a change's traffic, its bytes, link and
  time ('+0.33 GB/step over NVLink 4, +1.2 ms not hidden'), then the rest of its cost
  (`charts.waterfall.cost_text`).
"""
from __future__ import annotations

from typing import Any, Mapping

from ..charts.waterfall import NO_COST, cost_text
from ..i18n import format_number, translate_message
from .text import count, seconds, share, size, tr

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
    lim = est.get("memory_limit") or {}
    kept = lim.get("safety_margin_bytes") or 0
    if used is None or usable is None:
        sentence = title
    elif kept and head is not None:  # the one limit (issue 20.6): usable less the margin
        limit = tr("the {limit} limit ({usable} usable less a {margin} safety margin)", lang,
                   limit=size(lim.get("limit_bytes", usable - kept), lang),
                   usable=size(usable, lang), margin=size(kept, lang))
        sentence = tr("Fits on {gpu}: {used} of {limit}, {free} to spare", lang, gpu=name,
                      used=size(used, lang), limit=limit, free=size(head, lang)) if fits else \
            tr("Does not fit on {gpu}: {used} needed, {limit}, {over} over", lang, gpu=name,
               used=size(used, lang), limit=limit, over=size(-head, lang))
    elif fits:
        sentence = tr("Fits on {gpu}: {used} of {usable} usable, {free} to spare", lang,
                      gpu=name, used=size(used, lang), usable=size(usable, lang),
                      free=size(usable - used, lang))
    else:
        sentence = tr("Does not fit on {gpu}: {used} needed, {usable} usable, {over} over",
                      lang, gpu=name, used=size(used, lang), usable=size(usable, lang),
                      over=size(used - usable, lang))
    return {"fits": fits, "title": title, "detail": detail, "sentence": sentence}


def margin_words(lim: Mapping[str, Any] | None, lang: str = "en") -> str:
    """The safety margin of an estimate's `memory_limit` section, as the CLI, the report and
    the advisor's text say it: '5% of usable (1.20 GiB)', '4.00 GiB', '0'."""
    lim = lim or {}
    kept, m = lim.get("safety_margin_bytes") or 0, lim.get("safety_margin")
    if not kept:
        return "0"
    if isinstance(m, float):
        return tr("{share} of usable ({size})", lang, size=size(kept, lang),
                  share=percent(m, lang))
    return size(kept, lang)


def percent(share: float, lang: str = "en") -> str:
    """A margin's share as people write it: 0.05 -> '5%', 0.045 -> '4.5%'."""
    pct = share * 100
    return f"{format_number(pct, 0 if round(pct, 6).is_integer() else 1, lang)}%"


def limit_words(lim: Mapping[str, Any] | None, lang: str = "en", flag: str = "--safety-margin"
                ) -> str:
    """'memory limit: 22.79 GiB = usable 23.99 GiB - safety margin 1.20 GiB (5% of usable)'
    (the default margin says so, and the `flag` that sets it); '' without the section."""
    if not lim:
        return ""
    out = tr("memory limit: {limit} = usable {usable} - safety margin {margin}", lang,
             limit=size(lim.get("limit_bytes"), lang), usable=size(lim.get("usable_bytes"), lang),
             margin=margin_words(lim, lang))
    if lim.get("safety_margin_default"):
        out += tr(" (default; set with {flag})", lang, flag=flag)
    return out


def engine_why(est: Mapping[str, Any], lang: str = "en") -> str:
    """'the vLLM engine does not start: its KV pool holds 12,096 of 131,072 tokens' when the
    estimate's `serving` section says vLLM's start-up check fails (vLLM is the serving engine
    a serve plan models: workloads/transformer/engine.py); '' otherwise."""
    sv = est.get("serving") or {}
    if not sv or sv.get("engine_starts", True):
        return ""
    return tr("the vLLM engine does not start: its KV pool holds {n} of {m} tokens", lang,
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
    return growth_text(growth_items(growth, scenario, lang), lang)


def growth_text(items: list[str], lang: str = "en") -> str:
    """The room-to-grow sentence of `growth_items` (one for the page, the report and the CLI),
    its items joined as the language lists them ('a, b'; zh 'a、b'); '' for none."""
    return tr("Room to grow on this GPU: {what}.", lang, what=tr(", ", lang).join(items)) \
        if items else ""


POOL_NOISE = 1 << 20      # a pool that moves by less than 1 MiB: the same pool (block rounding)


def _kv_pool(rec: Mapping[str, Any]) -> tuple[int, int] | None:
    """(bytes, tokens) a change adds to the KV pool of a serve plan (None for other plans)."""
    pool = rec.get("kv_pool") or {}
    b, t = pool.get("bytes"), pool.get("tokens")
    if not b or not t:
        return None
    return int(b[1]) - int(b[0]), int(t[1]) - int(t[0])


def saving(rec: Mapping[str, Any], lang: str = "en", verb: bool = True) -> str:
    """What an advisor change (`Recommendation.to_dict()`) buys, in words. On a serve plan its
    KV pool before -> after: '+31.84 GiB KV pool per GPU, holds 208,692 more tokens' (fp8 KV:
    'the same KV pool holds 12,127 more tokens'; a change that leaves the pool as it is says
    what else it does: 'the engine starts', or the device bytes it saves); elsewhere 'saves
    1.20 GiB' ('1.20 GiB' without `verb`) or 'adds 0.10 GiB'."""
    saves = int(rec.get("saves_bytes") or 0)
    pool = _kv_pool(rec)
    if pool and abs(pool[0]) >= POOL_NOISE:
        more, n = pool
        return tr("+{size} KV pool per GPU, holds {n} more tokens", lang, size=size(more, lang),
                  n=count(n, lang)) if more >= 0 else \
            tr("-{size} KV pool per GPU, holds {n} fewer tokens", lang,
               size=size(-more, lang), n=count(-n, lang))
    if pool and pool[1] > 0:             # fewer bytes per token (fp8 KV) in the same pool
        return tr("the same KV pool holds {n} more tokens", lang, n=count(pool[1], lang))
    starts = (rec.get("gains") or {}).get("engine_starts")
    if pool is not None and starts and not starts[0] and starts[1]:
        return tr("KV pool unchanged; the engine starts", lang)
    if saves < 0:
        return tr("adds {size}", lang, size=size(-saves, lang))
    got = tr("saves {size}", lang, size=size(saves, lang)) if verb else size(saves, lang)
    return got + (tr(" (KV pool unchanged)", lang) if pool is not None else "")


def _decimal_bytes(n: float, lang: str) -> str:
    """Bytes per step as links are quoted, decimal: '24.1 GB', '12 MB', '640 kB'."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            v = n / scale
            return f"{format_number(v, 1 if v < 100 else 0, lang)} {unit}"
    return f"{format_number(n, 0, lang)} B"


def transfers(cost: Any, lang: str = "en", total: bool = False) -> list[str]:
    """A change's traffic per step, each with its bytes, its link and the time not hidden
    behind the step's compute: ['+24.1 GB/step over NVLink 4, +310.0 ms not hidden', '+15.0
    GB/step over PCIe Gen5 x16, +1.50 s not hidden'] (collectives of the layout, then host
    copies of an offload). `total`: a plan's whole traffic, not what it adds ('24.1 GB/step
    over NVLink 4, 310.0 ms not hidden')."""
    c = cost.to_dict() if hasattr(cost, "to_dict") else dict(cost or {})
    out = []
    for nb, link, t in ((c.get("communication_bytes_per_step"), c.get("link"),
                         c.get("communication_time_s")),
                        (c.get("host_bytes_per_step"), c.get("host_link"), c.get("host_time_s"))):
        if (not nb or nb <= 0) and not total and link and link == c.get("link") and any(
                x.get("collective") != "copy" for x in c.get("transfers") or ()):
            out.append(tr("no more traffic over {link} than now", lang,
                          link=translate_message(str(link), lang)))
            continue                 # a layout change whose collectives move what today's do
        if not nb or nb <= 0:
            continue
        sign = "" if total else "+"
        link = translate_message(str(link), lang) if link else tr("the link", lang)
        out.append(tr(sign + "{bytes}/step over {link}, " + sign + "{time} not hidden", lang,
                      bytes=_decimal_bytes(nb, lang), link=link, time=seconds(t or 0.0, lang))
                   if t else tr(sign + "{bytes}/step over {link}, hidden behind compute", lang,
                                bytes=_decimal_bytes(nb, lang), link=link))
    return out


def cost_words(cost: Any, lang: str = "en", total: bool = False) -> str:
    """A change's or (`total`) a plan's whole cost, said alike by the page, the report and the
    CLI: its traffic (`transfers`: bytes, link, time), then `cost_text`'s compute, bubble,
    accuracy risk, job change and GPUs ('+336 MB/step over NVLink 4, +0.75 ms not hidden
    (+3.3% step time) · 4 GPUs')."""
    c = cost.to_dict() if hasattr(cost, "to_dict") else dict(cost or {})
    words = transfers(c, lang, total)
    if not words:
        return cost_text(c, lang)
    if (c.get("time_share") or 0) > 0:         # the time said once, with its bytes and link
        words[-1] += tr(" ({share} step time)", lang, share=share(c["time_share"]))
    rest = cost_text({**c, "time_share": 0.0}, lang)
    return " · ".join(words if rest == tr(NO_COST, lang) else words + [rest])
