"""Every GPU compared on one plan: fits, headroom, GPUs needed, max batch, as sorted bars.
A click on a bar selects a GPU (point selection `SELECTION`); `picked_ids` reads it back."""
from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from ..i18n import gettext
from . import theme

SELECTION = "gpu_pick"
# metric -> (row field, axis title, chart title)
METRICS = {
    "headroom": ("headroom_gib", "Headroom at the peak (GiB per GPU; negative: short by)",
                 "GPUs compared: memory headroom (GiB)"),
    "max_batch": ("max_batch_size", "Largest batch size that fits (samples per GPU)",
                  "GPUs compared: largest batch that fits (samples)"),
    "usable": ("usable_gib", "Usable memory (GiB per GPU)",
               "GPUs compared: usable memory (GiB)"),
    "step_time": ("step_ms", "Shortest time per step or image (ms: the plan's bytes and FLOPs "
                  "at the GPU's bandwidth and dense rate)",
                  "GPUs compared: shortest time per step (ms)"),
}
LOWER_FIRST = {"step_time"}      # metrics whose best is the smallest value
LABEL_PX = 10.5                  # the bar labels' font size
NARROW_NAME_PX = 130             # the GPU names' width in a narrow chart (a phone): the rest,
                                 # ~170 px of 305, is the plot; a longer name ends in '…'


def _text(r: Mapping[str, Any], metric: str, lang: str = "en") -> str:
    if metric == "max_batch":
        return f"{r['max_batch_size']:,}" if r["max_batch_size"] else \
            gettext("0 (batch 1 does not fit)", lang)
    if metric == "usable":
        return f"{theme.gib_number(r['usable_bytes'], lang)} GiB"
    if metric == "step_time":
        return gettext("{ms} ms per {per}", lang).format(ms=f"{r['step_ms']:,.1f}",
                                                          per=gettext(r["per"], lang))
    h = r["headroom_gib"]
    text = f"+{theme.gib_number(h * theme.GiB, lang)} GiB" if h >= 0 else \
        gettext("short {size}", lang).format(size=f"{theme.gib_number(-h * theme.GiB, lang)} GiB")
    if r.get("gpus_needed") and r["gpus_needed"] > 1:
        text += " · " + gettext("needs {n} GPUs", lang).format(n=r["gpus_needed"])
    return text


def comparison_rows(rows: Iterable[Mapping[str, Any]], *, metric: str = "headroom",
                    selected: str | None = None, top: int | None = None,
                    lang: str = "en") -> list[dict]:
    """Chart rows, best first by `metric` ("headroom", "max_batch" or "usable"), ties by name.

    Input rows: {"id", "name", "vendor", "usable_bytes", "fits", "headroom_bytes",
    "gpus_needed", "max_batch_size", "step_s", "per"} (None where unknown; "step_time" sorts
    the shortest first). A row without a finite value for
    the metric is left out. `top` keeps the best n (the selected GPU always stays). Adds:
    usable_gib, headroom_gib, status ("fits" / "does not fit"), selected, value (the plotted
    number), text (its label), label_x (where it starts) and rank."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
    want = (selected or "").lower()
    out = []
    for r in rows:
        usable = r.get("usable_bytes")
        head = r.get("headroom_bytes")
        row = {
            "id": r["id"], "name": r.get("name") or r["id"], "vendor": r.get("vendor") or "",
            "usable_bytes": usable if theme.finite(usable) else None,
            "usable_gib": theme.gib(usable, 2) if theme.finite(usable) else None,
            "headroom_bytes": head if theme.finite(head) else None,
            "headroom_gib": theme.gib(head, 2) if theme.finite(head) else None,
            "gpus_needed": r.get("gpus_needed") if theme.finite(r.get("gpus_needed")) else None,
            "max_batch_size": r.get("max_batch_size")
            if theme.finite(r.get("max_batch_size")) else None,
            "fits": r.get("fits"),
            "selected": str(r["id"]).lower() == want,
            "step_ms": r["step_s"] * 1e3 if theme.finite(r.get("step_s")) else None,
            "per": r.get("per") or "step",
        }
        if row["fits"] is None and row["headroom_bytes"] is not None:
            row["fits"] = row["headroom_bytes"] >= 0
        row["status"] = "fits" if row["fits"] else "does not fit"
        row["value"] = row[METRICS[metric][0]]
        if row["value"] is None:
            continue
        row["text"] = _text(row, metric, lang)
        row["status_label"] = gettext(row["status"], lang)
        row["label_x"] = max(row["value"], 0)
        out.append(row)
    sign = 1 if metric in LOWER_FIRST else -1
    out.sort(key=lambda r: (sign * r["value"], r["name"]))
    if top is not None and len(out) > top:
        keep = out[:top]
        keep += [r for r in out[top:] if r["selected"]]
        out = keep
    for i, r in enumerate(out):
        r["rank"] = i + 1
    return out


def gpu_comparison_chart(rows: Iterable[Mapping[str, Any]], *, metric: str = "headroom",
                         selected: str | None = None, top: int | None = None,
                         width: int | str = "container", row_height: int = 18,
                         lang: str = "en"):
    """Horizontal bars, one per GPU (`row_height` px each: a pixel height, since Vega-Lite drops
    a step height under `width="container"` with a warning), sorted best first by `metric`: headroom (GiB, bars run
    left of zero for GPUs the plan does not fit), max batch size, or usable memory. Colour:
    fits (green) or not (vermillion); the `selected` GPU is outlined and its name bold.
    Clicking a bar selects it: the chart carries the point selection `SELECTION` on `id`
    (read back with `picked_ids`); double-click clears."""
    import altair as alt

    def t(text: str) -> str:
        return gettext(text, lang)
    data = comparison_rows(rows, metric=metric, selected=selected, top=top, lang=lang)
    field, axis_title, title_text = METRICS[metric]
    axis_title, title_text = t(axis_title), t(title_text)
    vals = [r["value"] for r in data] or [0]
    lo, hi = min(0, min(vals)), max(0, max(vals))
    span = (hi - lo) or 1
    domain = [lo - (0.03 * span if lo < 0 else 0), hi + 0.35 * span]
    order = [r["name"] for r in data]
    bold = [r["name"] for r in data if r["selected"]]
    y = alt.Y("name:N", sort=order, title=None,
              axis=alt.Axis(labelLimit=theme.when_narrow(NARROW_NAME_PX, 240), ticks=False,
                            domain=False,
                            labelFontWeight=alt.ExprRef(expr=(
                                f"indexof({json.dumps(bold)}, datum.value) >= 0 "
                                "? 'bold' : 'normal'"))))
    # the labels right of the bars keep their room at any width (a phone's plot is ~170 px)
    top_expr = theme.room_for_labels([r["label_x"] for r in data], [r["text"] for r in data],
                                     domain[0], domain[1], size=LABEL_PX)
    x = alt.X("value:Q", title=theme.axis_title(axis_title),
              scale=alt.Scale(domainMin=domain[0], domainMax=top_expr, nice=False),
              axis=alt.Axis(grid=True, tickCount=6, titleAnchor="end"))
    pick = alt.selection_point(name=SELECTION, fields=["id"], on="click", clear="dblclick")
    present = [s for s in ("fits", "does not fit") if any(r["status"] == s for r in data)]
    colors = {"fits": theme.FIT_COLOR, "does not fit": theme.NO_FIT_COLOR}
    tips = [alt.Tooltip("name:N", title="GPU"), alt.Tooltip("vendor:N", title=t("Vendor")),
            alt.Tooltip("status_label:N", title=t("Plan")),
            alt.Tooltip("usable_gib:Q", title=t("Usable (GiB)"), format=theme.GIB_FORMAT),
            alt.Tooltip("headroom_gib:Q", title=t("Headroom (GiB)"), format=theme.GIB_FORMAT),
            alt.Tooltip("gpus_needed:Q", title=t("GPUs needed")),
            alt.Tooltip("max_batch_size:Q", title=t("Max batch size"), format=","),
            alt.Tooltip("step_ms:Q", title=t("Shortest time (ms)"), format=",.1f"),
            alt.Tooltip("id:N", title="id")]
    base = alt.Chart(alt.Data(values=data))
    bars = base.mark_bar(height={"band": 0.75}, cornerRadiusEnd=2).encode(
        x=x, x2=alt.datum(0), y=y,
        color=alt.Color("status:N", title=t("This plan"),
                        legend=alt.Legend(labelExpr=theme.label_expr({s: t(s) for s in present})),
                        scale=alt.Scale(domain=present or ["fits"],
                                        range=[colors[s] for s in present] or [colors["fits"]])),
        stroke=alt.condition(alt.datum.selected, alt.value(theme.INK), alt.value(None)),
        strokeWidth=alt.condition(alt.datum.selected, alt.value(2), alt.value(0)),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.35)),
        tooltip=tips).add_params(pick)
    # every label starts right of the bar or of zero (never over the GPU names)
    labels = base.mark_text(align="left", dx=4, fontSize=LABEL_PX, color=theme.INK).encode(
        x=alt.X("label_x:Q"), y=y, text="text:N")
    layers = [bars, labels]
    if lo < 0:
        layers.append(alt.Chart(alt.Data(values=[{"zero": 0}])).mark_rule(
            color=theme.LIMIT_COLOR, strokeWidth=1).encode(x="zero:Q"))
    sub = t("click a bar to choose a GPU, double-click to clear")
    if metric == "headroom" and any((r.get("gpus_needed") or 1) > 1 for r in data):
        sub += t("; labels say how many GPUs a plan that does not fit needs")
    return theme.finish(alt.layer(*layers), title_text=title_text, subtitle=sub, width=width,
                        height=max(1, len(data)) * row_height)


def picked_ids(selection: Any) -> list[str]:
    """The GPU ids of a click selection, from what the front end reports: an
    `alt.JupyterChart`'s `selections.gpu_pick` (its `.value`), a list of `{"id": ...}` dicts,
    or a dict `{"id": [...]}` / `{"id": "..."}`; [] when nothing is picked."""
    value = getattr(selection, "value", selection)
    if not value:
        return []
    if isinstance(value, Mapping):
        ids = value.get("id")
        if ids is None:
            return []
        return [str(i) for i in ids] if isinstance(ids, (list, tuple)) else [str(ids)]
    return [str(v["id"]) for v in value if isinstance(v, Mapping) and v.get("id") is not None]


def comparison_selected_ids(chart_dict: Mapping[str, Any]) -> list[str]:
    """The ids a comparison chart spec marks as selected (the `selected` argument)."""
    seen, out = set(), []
    for row in theme.spec_rows(chart_dict):
        if row.get("selected") and row.get("id") not in seen:
            seen.add(row["id"])
            out.append(row["id"])
    return out
