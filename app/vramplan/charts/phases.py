"""Memory over one step: the components at the top of each phase (forward / backward /
optimizer step, prefill / decode, denoise / VAE decode) as stacked bars, and a traced
timeline of allocated bytes by event with the phases as bands."""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ..i18n import gettext
from . import theme
from .breakdown import component_label


def _phases_of(phases: Any) -> tuple[Mapping[str, Mapping[str, int]], str | None]:
    d = theme.as_dict(phases)
    if isinstance(d.get("phases"), Mapping):  # a whole estimate dict
        return d["phases"], d.get("peak_phase")
    return d, None


def phase_rows(phases: Any, lang: str = "en") -> list[dict]:
    """One row per (phase, component) with bytes > 0, stacked in the components' fixed order
    (weights, gradients, optimizer states, activations, KV cache, temporary, then others).
    Row: phase, phase_label, order, component, component_label, bytes, gib, start_gib,
    end_gib, total_gib (the phase's top)."""
    table, _ = _phases_of(phases)
    fixed = list(theme.COMPONENT_PALETTE)
    rows = []
    for i, (phase, comps) in enumerate(table.items()):
        comps = {k: v for k, v in (comps or {}).items() if theme.finite(v) and v > 0}
        keys = [k for k in fixed if k in comps] + sorted(k for k in comps if k not in fixed)
        total = sum(int(comps[k]) for k in keys)
        at = 0
        for k in keys:
            b = int(comps[k])
            rows.append({"phase": phase, "phase_label": theme.label(phase, lang=lang),
                         "order": i, "component": k,
                         "component_label": component_label(k, lang),
                         "bytes": b, "gib": theme.gib(b), "start_gib": theme.gib(at),
                         "end_gib": theme.gib(at + b), "total_gib": theme.gib(total)})
            at += b
    return rows


def phases_chart(phases: Any, *, peak_phase: str | None = None,
                 width: int | str = "container", height: int = 260, lang: str = "en"):
    """Stacked bars, one per phase in the step's order: the bytes torch holds at the top of
    each phase by component (GiB per GPU). Takes the estimate's `phases` dict or the whole
    estimate dict (its `peak_phase` is then marked). CUDA context and allocator slack are not
    part of phases (they are the same in every phase)."""
    import altair as alt

    def t(text: str) -> str:
        return gettext(text, lang)
    table, est_peak = _phases_of(phases)
    peak_phase = peak_phase or est_peak
    rows = phase_rows(table, lang)
    order = [theme.label(p, lang=lang) for p in table]
    present = set(r["component"] for r in rows)
    comps = [k for k in theme.COMPONENT_PALETTE if k in present] + \
        sorted(present - set(theme.COMPONENT_PALETTE)) or ["weights"]
    top = max([r["total_gib"] for r in rows] + [0.001]) * 1.15
    x = alt.X("phase_label:N", sort=order, title=None,
              axis=alt.Axis(labelAngle=0, ticks=False, labelFontSize=12))
    y = alt.Y("start_gib:Q", title=t("Allocated at the top of the phase (GiB per GPU)"),
              scale=alt.Scale(domain=[0, round(top, 3)], nice=False), axis=theme.gib_axis())
    base = alt.Chart(alt.Data(values=rows))
    bars = base.mark_bar(width={"band": 0.6}, stroke="white", strokeWidth=1).encode(
        x=x, y=y, y2="end_gib:Q",
        color=alt.Color("component:N", title=t("Component"), sort=comps, scale=alt.Scale(
            domain=comps, range=[theme.component_color(c) for c in comps]),
            legend=alt.Legend(labelExpr=_legend_expr(rows))),
        tooltip=[alt.Tooltip("phase_label:N", title=t("Phase")),
                 alt.Tooltip("component_label:N", title=t("Component")),
                 alt.Tooltip("gib:Q", title="GiB", format=theme.GIB_FORMAT)])
    tops = []
    for p in table:
        total = next((r["total_gib"] for r in rows if r["phase"] == p), 0.0)
        peak = p == peak_phase
        tops.append({"phase_label": theme.label(p, lang=lang), "total_gib": total,
                     "peak": peak,
                     "text": f"{total:,.2f} GiB" + (" · " + t("peak") if peak else "")})
    tbase = alt.Chart(alt.Data(values=tops))
    totals = [tbase.transform_filter(alt.datum.peak == peak).mark_text(
        dy=-5, baseline="bottom", fontWeight=weight).encode(x=x, y="total_gib:Q", text="text:N")
        for peak, weight in ((False, "normal"), (True, "bold"))]
    sub = t("bytes torch holds, by component; CUDA context and allocator slack come on top")
    return theme.finish(alt.layer(bars, *totals),
                        title_text=t("Memory over one step, by phase (GiB per GPU)"),
                        subtitle=sub, width=width, height=height)


def _legend_expr(rows: list[dict]) -> str:
    names = dict((r["component"], r["component_label"]) for r in rows)
    parts = [f"datum.value === '{k}' ? '{v}'" for k, v in names.items()]
    return " : ".join(parts + ["datum.value"]) if parts else "datum.value"


def _event(e: Any) -> tuple[Any, Any, Any]:
    if isinstance(e, Mapping):
        return (e.get("event_index", e.get("index")), e.get("phase"), e.get("bytes"))
    return tuple(e[:3]) if isinstance(e, Sequence) and len(e) >= 3 else (None, None, None)


def timeline_rows(events: Iterable[Any], *, max_points: int = 2000) -> dict:
    """A traced timeline as chart rows: {"points": [{event_index, phase, bytes, gib}],
    "bands": [{phase, phase_label, start, end, color}], "peak": [{...point, text}]}.

    Events are `(event_index, phase, bytes)` tuples or dicts with those keys; unplaceable
    ones are dropped. More than `max_points` are thinned to the largest value per bucket
    (the peak always survives). Bands are the runs of consecutive events in one phase."""
    pts = []
    for e in events:
        i, phase, b = _event(e)
        if theme.finite(i) and theme.finite(b):
            pts.append({"event_index": i, "phase": str(phase or "step"), "bytes": int(b)})
    pts.sort(key=lambda p: p["event_index"])
    if len(pts) > max_points:
        size = -(-len(pts) // max_points)
        pts = [max(pts[j:j + size], key=lambda p: p["bytes"]) for j in range(0, len(pts), size)]
    for p in pts:
        p["gib"] = theme.gib(p["bytes"])
    colors: dict[str, str] = {}
    bands: list[dict] = []
    for p in pts:
        colors.setdefault(p["phase"], theme.PALETTE[len(colors) % len(theme.PALETTE)])
        if bands and bands[-1]["phase"] == p["phase"]:
            bands[-1]["end"] = p["event_index"]
        else:
            if bands:  # a band ends where the next begins: no gaps between phases
                bands[-1]["end"] = p["event_index"]
            bands.append({"phase": p["phase"], "phase_label": theme.label(p["phase"]),
                          "start": p["event_index"], "end": p["event_index"],
                          "color": colors[p["phase"]]})
    peak = []
    if pts:
        top = max(pts, key=lambda p: p["bytes"])
        peak.append({**top, "text": f"peak {top['gib']:,.2f} GiB ({theme.label(top['phase'])})"})
    return {"points": pts, "bands": bands, "peak": peak}


def timeline_chart(events: Iterable[Any], *, usable_bytes: int | None = None,
                   gpu_name: str | None = None, width: int | str = "container",
                   height: int = 260, max_points: int = 2000):
    """Allocated bytes (GiB per GPU) after each traced event, as a step line over coloured
    phase bands, with the peak marked; a dashed line at `usable_bytes` when given."""
    import altair as alt

    r = timeline_rows(events, max_points=max_points)
    pts, bands = r["points"], r["bands"]
    xs = [p["event_index"] for p in pts] or [0, 1]
    lo, hi = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    top = max([p["gib"] for p in pts] + ([theme.gib(usable_bytes)] if usable_bytes else [])
              + [0.001]) * 1.15
    x = alt.X("event_index:Q", title=theme.axis_title("Traced event (allocation / free, in order)"),
              scale=alt.Scale(domain=[lo, hi], nice=False), axis=alt.Axis(format="~s"))
    y = alt.Y("gib:Q", title="Allocated (GiB per GPU)",
              scale=alt.Scale(domain=[0, round(top, 3)], nice=False), axis=theme.gib_axis())
    phases = list(dict.fromkeys(b["phase_label"] for b in bands)) or ["Step"]
    pcolors = [next(b["color"] for b in bands if b["phase_label"] == p) for p in phases] \
        if bands else [theme.LIGHT_COLOR]
    layers = [alt.Chart(alt.Data(values=bands)).mark_rect(opacity=0.14).encode(
        x=alt.X("start:Q", scale=alt.Scale(domain=[lo, hi], nice=False)), x2="end:Q",
        color=alt.Color("phase_label:N", title="Phase", sort=phases,
                        scale=alt.Scale(domain=phases, range=pcolors)),
        tooltip=[alt.Tooltip("phase_label:N", title="Phase")])]
    layers.append(alt.Chart(alt.Data(values=pts)).mark_line(
        interpolate="step-after", color=theme.INK, strokeWidth=1.5).encode(
        x=x, y=y, tooltip=[alt.Tooltip("event_index:Q", title="Event"),
                           alt.Tooltip("phase:N", title="Phase"),
                           alt.Tooltip("gib:Q", title="GiB", format=",.3f")]))
    if r["peak"]:
        pk = alt.Chart(alt.Data(values=r["peak"]))
        right = (r["peak"][0]["event_index"] - lo) / (hi - lo) > 0.6
        layers += [pk.mark_point(filled=True, size=70, color=theme.NO_FIT_COLOR).encode(x=x, y=y),
                   pk.mark_text(align="right" if right else "left", dx=-8 if right else 8,
                                dy=-8, fontWeight="bold", color=theme.NO_FIT_COLOR).encode(
                       x=x, y=y, text="text:N")]
    if usable_bytes:
        line = [{"gib": theme.gib(usable_bytes),
                 "text": f"{gpu_name or 'GPU'}: {theme.gib_number(usable_bytes)} GiB usable"}]
        lb = alt.Chart(alt.Data(values=line))
        layers += [lb.mark_rule(color=theme.LIMIT_COLOR, strokeDash=[5, 3], strokeWidth=2).encode(
            y="gib:Q"),
                   lb.mark_text(align="left", x=4, dy=-6, color=theme.LIMIT_COLOR).encode(
            y="gib:Q", text="text:N")]
    return theme.finish(alt.layer(*layers),
                        title_text="Traced memory over one step (GiB per GPU)",
                        subtitle="allocated bytes after each event; bands: phases",
                        width=width, height=height)
