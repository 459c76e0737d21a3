"""A traced step against its estimate, and the local GPU's memory over time.

`trace_timeline_chart(events, estimate_peak_bytes=...)`: allocated bytes after each traced
event (the `trace` section's timeline, `phases.timeline_rows`) over phase bands, the traced
peak marked and the estimate's peak allocated as a dashed line, so the two read side by side.
`monitor_chart(samples)`: device memory used over seconds from `live.monitor` samples, with the
GPU's total as the limit line.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..i18n import gettext
from . import theme
from .phases import timeline_rows


def _reference_lines(estimate_peak_bytes, usable_bytes, gpu_name, lang: str, t) -> list:
    """The estimate's peak and the GPU's usable memory as labelled rows (when given)."""
    lines = []
    if theme.finite(estimate_peak_bytes) and estimate_peak_bytes:
        lines.append({"gib": theme.gib(estimate_peak_bytes), "kind": "estimate",
                      "text": t("estimate: {size} GiB").format(
                          size=theme.gib_number(estimate_peak_bytes, lang))})
    if theme.finite(usable_bytes) and usable_bytes:
        lines.append({"gib": theme.gib(usable_bytes), "kind": "usable",
                      "text": t("{gpu}: {size} GiB usable").format(
                          gpu=gpu_name or "GPU", size=theme.gib_number(usable_bytes, lang))})
    return lines


def _rule_layers(lines: list) -> list:
    """A rule and its label per reference line: dashed for the estimate, solid for usable."""
    import altair as alt
    layers: list = []
    for kind, dash, color in (("estimate", [6, 4], theme.NEUTRAL_COLOR),
                              ("usable", [1, 0], theme.LIMIT_COLOR)):
        rows = [x for x in lines if x["kind"] == kind]
        if not rows:
            continue
        lb = alt.Chart(alt.Data(values=rows))
        layers += [lb.mark_rule(color=color, strokeDash=dash, strokeWidth=2).encode(y="gib:Q"),
                   lb.mark_text(align="left", x=4, dy=-6, color=color).encode(
                       y="gib:Q", text="text:N")]
    return layers


def _peak_layers(peak: list, lines: list, lo, hi, top: float, x, y) -> list:
    """The traced peak's point and label (below it when a reference rule sits just above)."""
    import altair as alt
    layers: list = []
    if not peak:
        return layers
    pk = alt.Chart(alt.Data(values=peak))
    right = (peak[0]["event_index"] - lo) / (hi - lo) > 0.6
    # a label on a rule just above the peak would be struck through: put it below then
    near = any(0 <= x["gib"] - peak[0]["gib"] <= 0.08 * top for x in lines)
    layers += [pk.mark_point(filled=True, size=70, color=theme.NO_FIT_COLOR).encode(x=x, y=y),
               pk.mark_text(align="right" if right else "left", dx=-8 if right else 8,
                            dy=16 if near else -8, fontWeight="bold",
                            color=theme.NO_FIT_COLOR).encode(x=x, y=y, text="text:N")]
    return layers


def trace_timeline_chart(events: Iterable[Any], *, estimate_peak_bytes: int | None = None,
                         usable_bytes: int | None = None, gpu_name: str | None = None,
                         width: int | str = "container", height: int = 260,
                         max_points: int = 2000, lang: str = "en"):
    """Step line of traced allocated GiB per event over phase bands; the traced peak as a
    point with its label, the estimate's peak allocated as a dashed rule ("estimate") and, when
    given, the GPU's usable memory as a solid rule. Text in `lang`."""
    import altair as alt

    def t(text: str) -> str:
        return gettext(text, lang)
    r = timeline_rows(events, max_points=max_points)
    pts, bands = r["points"], r["bands"]
    for b in bands:
        b["phase_label"] = theme.label(b["phase"], lang=lang)
    for p in r["peak"]:
        p["text"] = t("peak {size} GiB ({phase})").format(
            size=f"{p['gib']:,.2f}", phase=theme.label(p["phase"], lang=lang))
    xs = [p["event_index"] for p in pts] or [0, 1]
    lo, hi = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    lines = _reference_lines(estimate_peak_bytes, usable_bytes, gpu_name, lang, t)
    top = max([p["gib"] for p in pts] + [x["gib"] for x in lines] + [0.001]) * 1.15
    xscale = alt.Scale(domain=[lo, hi], nice=False)
    x = alt.X("event_index:Q",
              title=theme.axis_title(t("Traced event (allocation / free, in order)")),
              scale=xscale, axis=alt.Axis(format="~s"))
    y = alt.Y("gib:Q", title=t("Allocated (GiB per GPU)"),
              scale=alt.Scale(domain=[0, round(top, 3)], nice=False), axis=theme.gib_axis())
    phases = list(dict.fromkeys(b["phase_label"] for b in bands)) or [t("Step")]
    colors = [next(b["color"] for b in bands if b["phase_label"] == p) for p in phases] \
        if bands else [theme.LIGHT_COLOR]
    layers = [alt.Chart(alt.Data(values=bands)).mark_rect(opacity=0.14).encode(
        x=alt.X("start:Q", scale=xscale), x2="end:Q",
        color=alt.Color("phase_label:N", title=t("Phase"), sort=phases,
                        scale=alt.Scale(domain=phases, range=colors)),
        tooltip=[alt.Tooltip("phase_label:N", title=t("Phase"))])]
    layers.append(alt.Chart(alt.Data(values=pts)).mark_line(
        interpolate="step-after", color=theme.INK, strokeWidth=1.5).encode(
        x=x, y=y, tooltip=[alt.Tooltip("event_index:Q", title=t("Event")),
                           alt.Tooltip("phase:N", title=t("Phase")),
                           alt.Tooltip("gib:Q", title="GiB", format=",.3f")]))
    layers += _rule_layers(lines)
    layers += _peak_layers(r["peak"], lines, lo, hi, top, x, y)
    return theme.finish(alt.layer(*layers),
                        title_text=t("Traced memory over two steps (GiB per GPU)"),
                        subtitle=t("allocated after each event; dashed: the estimate's peak"),
                        width=width, height=height)


def monitor_rows(samples: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Samples with a reading as rows {t, used_bytes, gib, utilization_pct}."""
    out = []
    for s in samples:
        t, used = s.get("t"), s.get("used_bytes")
        if theme.finite(t) and theme.finite(used):
            out.append({"t": float(t), "used_bytes": int(used), "gib": theme.gib(used),
                        "utilization_pct": s.get("utilization_pct")})
    return out


def monitor_chart(samples: Iterable[Mapping[str, Any]], *, total_bytes: int | None = None,
                  gpu_name: str | None = None, width: int | str = "container",
                  height: int = 220, lang: str = "en"):
    """Device memory used (GiB, NVML: every process) over seconds, the GPU's total dashed."""
    import altair as alt

    def t(text: str) -> str:
        return gettext(text, lang)
    rows = monitor_rows(samples)
    total = [{"gib": theme.gib(total_bytes),
              "text": t("{gpu}: {size} GiB in all").format(
                  gpu=gpu_name or "GPU", size=f"{total_bytes / theme.GiB:,.1f}")}] \
        if theme.finite(total_bytes) and total_bytes else []
    top = max([r["gib"] for r in rows] + [t["gib"] for t in total] + [0.001]) * 1.1
    ts = [r["t"] for r in rows] or [0.0]
    x = alt.X("t:Q", title=t("Seconds since the monitor started"),
              scale=alt.Scale(domain=[min(ts), max(max(ts), min(ts) + 1)], nice=False))
    y = alt.Y("gib:Q", title=t("Used (GiB)"), scale=alt.Scale(domain=[0, round(top, 3)], nice=False),
              axis=theme.gib_axis())
    layers = [alt.Chart(alt.Data(values=rows)).mark_line(
        color=theme.CHOSEN_COLOR, strokeWidth=2, point=len(rows) < 60).encode(
        x=x, y=y, tooltip=[alt.Tooltip("t:Q", title="s"),
                           alt.Tooltip("gib:Q", title="GiB", format=",.2f"),
                           alt.Tooltip("utilization_pct:Q", title=t("Utilisation %"))])]
    if total:
        lb = alt.Chart(alt.Data(values=total))
        layers += [lb.mark_rule(color=theme.LIMIT_COLOR, strokeDash=[5, 3], strokeWidth=2).encode(
            y="gib:Q"), lb.mark_text(align="left", x=4, dy=-6, color=theme.LIMIT_COLOR).encode(
            y="gib:Q", text="text:N")]
    return theme.finish(alt.layer(*layers), title_text=t("GPU memory over time (GiB)"),
                        subtitle=t("what NVML reports used on the device, every process"),
                        width=width, height=height)
