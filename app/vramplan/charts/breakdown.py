"""Memory at the peak by component against the GPU's usable memory."""
from __future__ import annotations

from typing import Any, Mapping

from .. import vocab
from ..i18n import gettext
from ..units import GiB, format_size
from . import theme

# ---------------------------------------------------------------- memory at the peak
# One colour per component: the theme's (charts/theme.py COMPONENT_PALETTE, Okabe-Ito), the
# same in the breakdown bar, its static SVG, the Phases chart and the report; its key order is
# the stacking order (model states, per-batch memory, then allocator slack and CUDA context)
COMPONENT_COLORS = theme.COMPONENT_PALETTE
OTHER_COMPONENT_COLOR = theme.OTHER_COMPONENT
COMPONENT_LABELS = vocab.COMPONENT_LABELS


def component_label(key: str, lang: str = "en") -> str:
    """'optimizer_states' -> 'Optimizer states' (the one name of `vocab.component_label`), in
    `lang` (the English label is the catalogue's key)."""
    return gettext(vocab.component_label(key), lang)


def breakdown_rows(components: Mapping[str, int], *, min_label_fraction: float = 0.07,
                   scale_bytes: int | None = None, lang: str = "en") -> list[dict]:
    """The components at the peak as stacked segments, in a fixed order (model states,
    per-batch memory, then allocator slack, CUDA context and any other key); zeros left out.

    Each row: component, label, bytes, gib, size (readable), start_gib, end_gib (the segment's extent),
    share (of the sum) and show_label (wide enough, relative to `scale_bytes` or the sum,
    to carry its size as text).
    """
    order = list(COMPONENT_COLORS)
    keys = [k for k in order if components.get(k)] + \
        sorted(k for k, v in components.items() if k not in order and v)
    total = sum(int(components[k]) for k in keys) or 1
    scale = scale_bytes or total
    rows, at = [], 0
    for k in keys:
        b = int(components[k])
        rows.append({
            "component": k, "label": component_label(k, lang), "bytes": b,
            "gib": round(b / GiB, 3), "size": format_size(b, lang), "start_gib": round(at / GiB, 4),
            "end_gib": round((at + b) / GiB, 4), "share": round(b / total, 4),
            "show_label": b / scale >= min_label_fraction,
        })
        at += b
    return rows


def _limit_layers(usable_bytes: int, gpu_name: str, fits, x_max: float, height: int,
                  lang: str) -> list:
    """The GPU's usable memory as a dashed rule (red when the plan does not fit) and its
    label."""
    import altair as alt
    layers: list = []
    line = {"usable_gib": round(usable_bytes / GiB, 3),
            "text": gettext("{gpu}: {size} GiB usable", lang).format(
                gpu=gpu_name, size=theme.gib_number(usable_bytes, lang))}
    color = theme.LIMIT_COLOR if fits is not False else theme.NO_FIT_COLOR
    rule_base = alt.Chart(alt.Data(values=[line]))
    layers.append(rule_base.mark_rule(color=color, strokeWidth=2, strokeDash=[5, 3],
                                      y=-8, y2=height + 4).encode(
        x=alt.X("usable_gib:Q"), tooltip=[alt.Tooltip("text:N", title=gettext("Limit", lang))]))
    # the label sits on the side of the line with room (inside the plot either way); in
    # a narrow chart (a phone) it starts at the plot's left edge, where it fits whole
    left = usable_bytes / GiB < x_max * 0.5
    narrow = f"width < {theme.NARROW}"
    at_line = f"scale('x', {line['usable_gib']})"
    layers.append(rule_base.mark_text(
        align={"expr": f"{narrow} ? 'left' : '{'left' if left else 'right'}'"},
        x={"expr": f"{narrow} ? 0 : {at_line} + {4 if left else -4}"},
        y=-8, baseline="bottom", fontSize=11, color=color).encode(text="text:N"))
    return layers


def breakdown_chart(components: Mapping[str, int], usable_bytes: int | None = None, *,
                    gpu_name: str = "GPU", fits: bool | None = None,
                    width: int | str = "container", height: int = 64, lang: str = "en"):
    """One horizontal bar: the memory at the peak, stacked by component (incl. cuda_context
    and allocator_slack, so its end is device used), against a line at the GPU's usable
    memory. The x axis runs to whichever is larger, so a plan that does not fit overshoots it.
    """
    import altair as alt

    total = sum(int(v) for v in components.values() if v)
    extent = max(total, usable_bytes or 0) or GiB
    rows = breakdown_rows(components, scale_bytes=extent, lang=lang)
    domain = [r["component"] for r in rows]
    scale = alt.Scale(domain=domain, range=[COMPONENT_COLORS.get(k, OTHER_COMPONENT_COLOR)
                                            for k in domain])
    x_max = extent / GiB * 1.04
    x = alt.X("start_gib:Q", title=gettext("GiB per GPU", lang), scale=alt.Scale(domain=[0, x_max], nice=False),
              axis=alt.Axis(grid=True, tickCount=8, labelFlush=True))
    tooltip = [alt.Tooltip("label:N", title=gettext("Component", lang)),
               alt.Tooltip("gib:Q", title="GiB", format=theme.GIB_FORMAT),
               alt.Tooltip("share:Q", title=gettext("Share of device used", lang), format=".1%")]
    base = alt.Chart(alt.Data(values=rows))
    bars = base.mark_bar(height=34, stroke="white", strokeWidth=1).encode(
        x=x, x2="end_gib:Q",
        color=alt.Color("component:N", scale=scale, sort=domain, title=None,
                        legend=alt.Legend(orient="bottom", direction="horizontal",
                                          labelExpr=_legend_expr(rows), symbolType="square",
                                          columns=4, labelLimit=160)),
        order=alt.Order("start_gib:Q"),
        tooltip=tooltip)
    labels = base.transform_filter(alt.datum.show_label).transform_calculate(
        mid="(datum.start_gib + datum.end_gib) / 2",
        text="format(datum.gib, '.1f')").mark_text(
        color="white", fontSize=11, fontWeight="bold").encode(
        x="mid:Q", text="text:N")
    layers = [bars, labels]
    if usable_bytes:
        layers += _limit_layers(usable_bytes, gpu_name, fits, x_max, height, lang)
    return (
        alt.layer(*layers)
        .properties(width=width, height=height, padding={"top": 18, "left": 4, "right": 8})
        .configure_view(stroke=None)
        .configure_axis(labelColor=theme.LABEL_INK, titleColor=theme.MUTED, gridColor=theme.GRID,
                        domainColor=theme.DOMAIN, titleFontWeight="normal")
        .configure_legend(labelColor=theme.LABEL_INK, labelFontSize=11.5, symbolSize=110)
        .configure(font=theme.FONT)
    )


def _legend_expr(rows: list[dict]) -> str:
    """Vega expression that labels the legend 'Weights 15.0 GiB' from the component key."""
    parts = [f"datum.value === '{r['component']}' ? '{r['label']} · {r['size']}'"
             for r in rows]
    return " : ".join(parts + ["datum.value"]) if parts else "datum.value"


def chart_rows(chart_dict: Mapping[str, Any]) -> list[dict]:
    """Every inline data row of a chart spec, layers included (altair may also move inline
    data to top-level `datasets`)."""
    out = []
    stack = [chart_dict]
    while stack:
        node = stack.pop(0)
        if "values" in (node.get("data") or {}):
            out += node["data"]["values"]
        stack += list(node.get("layer") or [])
    for rows in (chart_dict.get("datasets") or {}).values():
        out += rows
    return out
