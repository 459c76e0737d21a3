"""What a report says, as plain data: the figures of the estimate, the breakdown by
component, the assumptions, the advice and the sources, each already in words of one language.
`markdown.py` and `html.py` only lay it out, so both say the same thing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..charts.breakdown import component_label
from ..i18n import translate_message
from ..vocab import phase_label
from .ranks import decided_by
from .text import count, gbs, seconds, size, tr
from . import words
from .words import growth_items

# notes of the estimate that describe its own bookkeeping, not an assumption about the job
MACHINE_NOTES = ("components sum to ",)
HOW_SHOWN = 2                 # ecosystems of a how-to shown (the plan's stack, pytorch first)


@dataclass
class Report:
    lang: str
    title: str
    fits: bool
    verdict: str
    figures: list[tuple[str, str]]
    breakdown: list[dict]
    assumptions: list[str]
    recommendations: list[dict]
    plans: list[dict]
    growth: list[str]
    sources: list[str]
    scenario: dict
    query: str
    estimate: dict                       # the contract's JSON (charts read it)
    device: dict                         # the GPU's hardware-database entry
    advice: dict | None = None           # Advice.to_dict(full=False) (the waterfall reads it)
    plan: dict | None = None             # the first plan, as the waterfall takes it
    # where the planner is served (`planner_url`): the link is its full URL; "" when made by
    # the page without one (the query, to append to the planner's address); None: the CLI's
    base_url: str | None = None


def _per_gpu(est: Mapping[str, Any]) -> Mapping[str, Any]:
    return est.get("per_gpu") or est


def _usable(est: Mapping[str, Any], device: Mapping[str, Any]) -> int | None:
    g = est.get("gpu") or {}
    for d in (g, device):
        for k in ("usable_memory_bytes", "usable_bytes", "memory_bytes"):
            if isinstance(d.get(k), int) and d[k] > 0:
                return d[k]
    return None


def verdict(est: Mapping[str, Any], device: Mapping[str, Any], lang: str) -> tuple[bool, str]:
    """(fits, the verdict's sentence): `words.verdict`, the page's and the CLI's too."""
    v = words.verdict(est, _usable(est, device), lang, gpu_name=device.get("name"))
    return v["fits"], v["sentence"]


def figures(est: Mapping[str, Any], device: Mapping[str, Any], lang: str) -> list:
    """(label, value) rows: memory at the peak, usable memory, headroom, max batch, GPUs,
    bandwidth need and floors (the ones the estimate has)."""
    pg, bw = _per_gpu(est), est.get("bandwidth") or {}
    usable = _usable(est, device)
    rows = []

    def add(label: str, value: str | None, **kw):
        if value is not None:
            rows.append((tr(label, lang, **kw), value))
    add("Verdict", tr("fits", lang) if est.get("fits") else tr("does not fit", lang))
    phase = est.get("peak_phase")
    add("Peak device memory per GPU (what nvidia-smi shows)", size(pg.get("device_used_bytes"),
                                                                 lang))
    if phase:
        add("Peak phase", tr(phase_label(str(phase)), lang))
    add("Peak allocated by tensors", size(pg.get("peak_allocated_bytes"), lang))
    add("Peak reserved by the caching allocator", size(pg.get("peak_reserved_bytes"), lang))
    add("Usable memory of the GPU", size(usable, lang) if usable else None)
    lim = est.get("memory_limit")   # the one limit: usable less the safety margin
    if lim:
        add("Safety margin (kept free of usable memory)", words.margin_words(lim, lang) + (
            tr(" (default)", lang) if lim.get("safety_margin_default") else ""))
        add("Memory limit (usable minus safety margin)", size(lim["limit_bytes"], lang))
    if est.get("headroom_bytes") is not None:   # to the limit (usable when no margin)
        add("Headroom (memory limit minus peak)" if lim else "Headroom (usable minus peak)",
            size(est["headroom_bytes"], lang))
    mb = est.get("max_batch_size")
    if mb is not None:
        add("Largest batch that fits", count(mb, lang))
    gpus = ((est.get("scenario") or {}).get("parallel") or {}).get("gpus")
    if isinstance(gpus, int) and gpus > 1:
        add("GPUs", count(gpus, lang))
    for key, label, fmt in (
            ("needed_bandwidth_gbs", "Bandwidth needed to run at compute speed", gbs),
            ("achievable_bandwidth_gbs", "Achievable bandwidth of the GPU", gbs),
            ("datasheet_bandwidth_gbs", "Datasheet bandwidth", gbs),
            ("bytes_per_step", "Bytes moved per step", size),
            ("memory_floor_s", "Memory-bound time floor per step", seconds),
            ("compute_floor_s", "Compute-bound time floor per step", seconds),
            ("min_step_time_s", "Shortest step time (the larger floor)", seconds)):
        if isinstance(bw.get(key), (int, float)) and not isinstance(bw.get(key), bool):
            add(label, fmt(bw[key], lang))
    if bw.get("bound"):
        add("Bound by", tr(f"{bw['bound']}-bound", lang))
    if isinstance(bw.get("max_tokens_per_s"), (int, float)):
        add("At most, tokens per second", count(bw["max_tokens_per_s"], lang))
    return rows


def breakdown(est: Mapping[str, Any], lang: str) -> list[dict]:
    comps = _per_gpu(est).get("components") or {}
    total = sum(v for v in comps.values() if isinstance(v, int) and v > 0) or 1
    return [{"component": k, "label": tr(component_label(k), lang), "bytes": int(v),
             "size": size(v, lang), "share": f"{v / total:.1%}"}
            for k, v in comps.items() if isinstance(v, int) and v > 0]


def assumptions(est: Mapping[str, Any], lang: str = "en") -> list[str]:
    """The estimate's notes in `lang` where the catalogue has their pattern (locale/zh/
    notes.toml), else as the estimate wrote them."""
    return [translate_message(str(n), lang) for n in est.get("notes") or []
            if not str(n).startswith(MACHINE_NOTES)]


def _advice_dict(advice: Any) -> dict | None:
    if advice is None:
        return None
    return advice.to_dict(full=False) if hasattr(advice, "to_dict") else dict(advice)


def recommendations(adv: Mapping[str, Any], lang: str) -> list[dict]:
    out = []
    stack = str((adv.get("scenario") or {}).get("stack") or "pytorch").partition("@")[0]
    for r in adv.get("recommendations") or []:
        how = r.get("how") or {}
        eco = sorted(how, key=lambda k: (k != stack, k != "pytorch", k))[:HOW_SHOWN]
        saves = int(r.get("saves_bytes") or 0)
        out.append({"id": r.get("id"),
                    "title": translate_message(str(r.get("title") or r.get("id")), lang),
                    "saves_bytes": saves,
                    "saves": words.saving(r, lang, verb=False),     # serve: the KV pool
                    "fits": bool(r.get("fits")), "cost": words.cost_words(r.get("cost"), lang),
                    "how": [(k, str(how[k])) for k in eco], "source": list(r.get("source") or [])})
    return out


def plans(adv: Mapping[str, Any], lang: str) -> list[dict]:
    out = []
    for p in adv.get("plans") or []:
        out.append({"changes": [translate_message(str(c.get("title") or c.get("id")), lang)
                                for c in p.get("changes") or []],
                    "gpus": int(p.get("gpus") or 1), "gpu": p.get("gpu"),
                    "used": size(p.get("device_used_bytes"), lang),
                    "headroom": size(p.get("headroom_bytes"), lang),
                    "cost": words.cost_words(p.get("cost"), lang, total=True)})
    return out


def growth(adv: Mapping[str, Any], scenario: Mapping[str, Any], lang: str) -> list[str]:
    """The advisor's room to grow, in words (`words.growth_items`, the page's too)."""
    return growth_items(adv.get("growth"), scenario, lang)


def sources(est: Mapping[str, Any], device: Mapping[str, Any], adv: Mapping[str, Any] | None,
            model_source: str | None, lang: str) -> list[str]:
    """Where the numbers come from: the GPU's datasheets, the model's config, the costs of
    the advice (each once, in that order). URLs stay text: the report links nowhere. A
    datasheet's title is in `lang` (locale/zh/sources.toml); its publisher, doc and URL
    are identifiers and stay as they are."""
    out = []
    name = device.get("name") or device.get("id")
    for s in device.get("sources") or []:
        title = translate_message(s["title"], lang) if s.get("title") else s.get("id")
        bits = [title, s.get("publisher"), s.get("doc"), s.get("url")]
        out.append(tr("{gpu}: ", lang, gpu=name) + ", ".join(str(b) for b in bits if b))
    if model_source:
        model = (est.get("scenario") or {}).get("model") or ""
        out.append(tr("model {model}: ", lang, model=model) + model_source)
    # each advice source is '<change>: <source>': the source in `lang`
    # (locale/zh/advice_sources.toml), the change id as it is
    for r in (adv or {}).get("recommendations") or []:
        out += [translate_message(str(s), lang) for s in r.get("source") or []]
    for p in (adv or {}).get("plans") or []:
        out += [translate_message(str(s), lang) for s in p.get("source") or []]
    out.append(tr("the estimate: vramplan's own model of each component (see the "
                  "assumptions above)", lang))
    return list(dict.fromkeys(out))


def first_plan(adv: Mapping[str, Any] | None, advice: Any = None) -> dict | None:
    """The waterfall's plan: the first plan's changes and its own estimate."""
    if advice is not None and getattr(advice, "plans", None):
        p = advice.plans[0]
        return {"steps": p.changes, "estimate": p.estimate.to_dict()}
    ps = (adv or {}).get("plans") or []
    if ps and ps[0].get("estimate"):
        return {"steps": ps[0].get("changes") or [], "estimate": ps[0]["estimate"]}
    return None


def assemble(est: Mapping[str, Any], device: Mapping[str, Any], *, advice: Any = None,
             lang: str = "en", query: str = "", model_source: str | None = None,
             base_url: str | None = None) -> Report:
    """A Report from an estimate's JSON (`Estimate.to_dict()`), the GPU's hardware-database
    entry (`Device.to_dict()`), and optionally the advisor's `Advice` (or its dict).
    `base_url`: the planner's address as the page's browser reads it (None from the CLI)."""
    est, device = dict(est), dict(device or {})
    adv = _advice_dict(advice)
    sc = dict(est.get("scenario") or {})
    fits, text = verdict(est, device, lang)
    by = decided_by(est, lang)   # pipeline stages that differ: the rank that decides
    if by:
        text = f"{text} ({by})"
    what = sc.get("model") or tr("model-free plan", lang)
    gpu = (est.get("gpu") or {}).get("name") or device.get("name") or sc.get("gpu") or "GPU"
    title = tr("Memory plan: {model} ({task}) on {gpu}", lang, model=what,
               task=tr(str(sc.get("task") or "-"), lang), gpu=gpu)
    return Report(
        lang=lang, title=title, fits=fits, verdict=text, figures=figures(est, device, lang),
        breakdown=breakdown(est, lang), assumptions=assumptions(est, lang),
        recommendations=recommendations(adv or {}, lang), plans=plans(adv or {}, lang),
        growth=growth(adv or {}, sc, lang),
        sources=sources(est, device, adv, model_source, lang), scenario=sc, query=query,
        estimate=est, device=device, advice=adv, plan=first_plan(adv, advice),
        base_url=planner_url(base_url))


def planner_url(base: str | None) -> str | None:
    """The planner's address a page sent (scheme, host and path: what `window.location`
    reads in Voila), kept only as a plain http(s) URL without a query or fragment; "" for
    anything else (the page knows no address), None stays None (the CLI)."""
    if base is None:
        return None
    text = str(base).strip()
    if (len(text) > 2000 or not re.fullmatch(r"https?://[^\s?#<>\"'`]+", text)):
        return ""
    return text


def plan_link(r: Report) -> tuple[str, str | None]:
    """(the words before the link, the full URL or None): the full URL where the page sent
    the planner's address; else the query alone, which the page says to append to the
    planner's address (the CLI keeps its '?query')."""
    if r.base_url:
        return tr("Link to this plan:", r.lang), f"{r.base_url}?{r.query}"
    if r.base_url == "":
        return tr("Link to this plan (append it to the planner's address):", r.lang), None
    return tr("Link to this plan:", r.lang), None

