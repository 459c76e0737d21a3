"""The GPU landscape: every device of the hardware database by capacity and bandwidth."""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from ..i18n import gettext as _t
from ..units import GiB
from . import theme

# One colour per vendor, the vendors' own hues (the theme's)
VENDOR_COLORS = theme.VENDOR_COLORS
OTHER_COLOR = theme.OTHER_VENDOR_COLOR
SELECTED_COLOR = theme.STRONG_INK


def _as_dict(device: Any) -> Mapping[str, Any]:
    if isinstance(device, Mapping):
        return device
    if hasattr(device, "to_dict"):
        return device.to_dict()
    raise TypeError(f"not a device: {device!r}")


def vendor_label(vendor: str | None) -> str:
    """'nvidia' -> 'NVIDIA' (the spelling VENDOR_COLORS uses); unknown vendors unchanged."""
    v = (vendor or "other").strip()
    for known in VENDOR_COLORS:
        if v.lower() == known.lower():
            return known
    return v


def device_rows(devices: Iterable[Any], selected: str | None = None) -> list[dict]:
    """One flat row per device, the data the capacity/bandwidth chart plots.

    `memory_gib` is the nominal capacity in GiB (binary), `bandwidth_gbs` the datasheet peak in
    decimal GB/s, as vendors quote it; `selected` marks the chosen device's row.
    """
    want = (selected or "").lower()
    rows = []
    for dev in devices:
        d = _as_dict(dev)
        mem = d.get("memory_bytes")
        bw = d.get("bandwidth_gbs")
        if not mem or not bw:
            continue  # a device the chart cannot place
        usable = d.get("usable_memory_bytes")
        rows.append({
            "id": d["id"],
            "name": d.get("name") or d["id"],
            "vendor": vendor_label(d.get("vendor")),
            "memory_gib": round(mem / GiB, 2),
            "usable_gib": round(usable / GiB, 2) if usable else None,
            "bandwidth_gbs": float(bw),
            "memory_type": d.get("memory_type") or "",
            "year": d.get("year"),
            "selected": d["id"].lower() == want,
        })
    # the chosen device's label goes to the side with room: left of points in the right half
    if rows:
        lo = math.log(min(r["memory_gib"] for r in rows))
        hi = math.log(max(r["memory_gib"] for r in rows))
        mid = (lo + hi) / 2
        for r in rows:
            r["label_side"] = "left" if math.log(r["memory_gib"]) > mid else "right"
    return rows


def _vendor_scale(rows: list[dict]):
    import altair as alt

    vendors = sorted({r["vendor"] for r in rows}, key=lambda v: (v not in VENDOR_COLORS, v))
    return alt.Scale(domain=vendors, range=[VENDOR_COLORS.get(v, OTHER_COLOR) for v in vendors])


def _tooltip(lang: str) -> list:
    """A device point's tooltip: name, vendor, capacity, memory type, bandwidth, year, id."""
    import altair as alt
    tooltip = [
        alt.Tooltip("name:N", title="GPU"),
        alt.Tooltip("vendor:N", title=_t("Vendor", lang)),
        alt.Tooltip("memory_gib:Q", title=_t("Memory (GiB)", lang), format=".0f"),
        alt.Tooltip("memory_type:N", title=_t("Memory type", lang)),
        alt.Tooltip("bandwidth_gbs:Q", title=_t("Bandwidth (GB/s)", lang), format=",.0f"),
        alt.Tooltip("year:O", title=_t("Year", lang)),
        alt.Tooltip("id:N", title="id"),
    ]
    return tooltip


def capacity_bandwidth_chart(devices: Iterable[Any], selected: str | None = None, *,
                             width: int | str = "container", height: int = 340,
                             lang: str = "en"):
    """Every device as a point: capacity (GiB) against peak bandwidth (GB/s), by vendor.

    Both axes are logarithmic (capacities span 8-288 GiB, bandwidths 0.3-8 TB/s). The
    `selected` device id gets a dark ring and its name as a label (left of the point in the
    right half of the x range, else right of it). Tooltips show name, vendor, capacity,
    memory type, bandwidth and year. `lang`: the words in that language (`vramplan.i18n`).
    """
    import altair as alt

    rows = device_rows(devices, selected)
    data = alt.Data(values=rows)
    x = alt.X("memory_gib:Q", title=_t("Memory capacity (GiB, log scale)", lang),
              scale=alt.Scale(type="log", nice=False, padding=12),
              axis=alt.Axis(values=[4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512, 1024],
                            grid=True, labelFlush=False))
    y = alt.Y("bandwidth_gbs:Q", title=_t("Peak memory bandwidth (GB/s, log scale)", lang),
              scale=alt.Scale(type="log", nice=False, padding=12),
              axis=alt.Axis(values=[125, 250, 500, 1000, 2000, 4000, 8000, 16000], grid=True))
    tooltip = _tooltip(lang)
    base = alt.Chart(data)
    points = base.mark_circle(size=90, opacity=0.8, stroke="white", strokeWidth=0.8).encode(
        x=x, y=y,
        color=alt.Color("vendor:N", title=_t("Vendor", lang), scale=_vendor_scale(rows),
                        legend=alt.Legend(orient="top-left", fillColor="white",
                                          padding=6, cornerRadius=4)),
        tooltip=tooltip,
    )
    # the chosen device: a ring and its name, one label layer on the side with room (known
    # here, so no layer is left empty: an empty layer makes Vega warn "Infinite extent");
    # with nothing chosen there is neither
    chosen = [r for r in rows if r["selected"]]
    marks = []
    if chosen:
        align, dx = ("right", -14) if chosen[0]["label_side"] == "left" else ("left", 14)
        sel = base.transform_filter(alt.datum.selected)
        marks = [sel.mark_point(size=420, shape="circle", filled=False, strokeWidth=2.5,
                                color=SELECTED_COLOR).encode(x=x, y=y, tooltip=tooltip),
                 sel.mark_text(align=align, dx=dx, dy=-12, fontSize=12, fontWeight="bold",
                               color=SELECTED_COLOR).encode(x=x, y=y, text="name:N")]
    return (
        alt.layer(points, *marks)
        .properties(width=width, height=height,
                    title=alt.Title(theme.fit_title(
                        _t("Capacity vs bandwidth, every GPU in the database", lang)),
                                    subtitle=_t("ring: the chosen GPU; hover a point for "
                                                "details", lang),
                                    anchor="start", fontSize=14, subtitleColor=theme.MUTED))
        .configure_view(stroke=None)
        .configure_axis(labelColor=theme.LABEL_INK, titleColor=theme.LABEL_INK,
                        gridColor=theme.GRID, domainColor=theme.DOMAIN, titleFontWeight="normal")
        .configure(font=theme.FONT)
    )


def selected_ids(chart_dict: Mapping[str, Any]) -> list[str]:
    """The ids a capacity/bandwidth chart spec marks as selected (for tests and reports)."""
    data = chart_dict.get("data") or {}
    values = data.get("values")
    if values is None:  # altair moves inline data to top-level datasets
        datasets = chart_dict.get("datasets") or {}
        values = [row for rows in datasets.values() for row in rows]
    return [row["id"] for row in values if row.get("selected")]
