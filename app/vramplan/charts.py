"""Altair chart builders: data in, chart out. No widgets here.

Every builder takes plain data (hardware-database devices as `Device` objects or their
`to_dict()` dicts) and returns an altair chart; tests check `chart.to_dict()`. altair is
imported inside the builders so that `import vramplan.charts` stays cheap (import altair takes
~3 s and the planner paints its controls before that).

Vega-Lite note (see DESIGN.md): altair 6 writes Vega-Lite 6, which Voila/JupyterLab only
render through `alt.JupyterChart` with `enable_offline()`; `vramplan.ui` does that.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from .units import GiB, format_bytes

# One colour per vendor, the vendors' own hues, so the legend reads at a glance.
VENDOR_COLORS = {
    "NVIDIA": "#76b900",
    "AMD": "#ed1c24",
    "Intel": "#0071c5",
    "Google": "#f4b400",
    "Apple": "#555555",
}
OTHER_COLOR = "#8c8c8c"
SELECTED_COLOR = "#111827"


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


def capacity_bandwidth_chart(devices: Iterable[Any], selected: str | None = None, *,
                             width: int | str = "container", height: int = 340):
    """Every device as a point: capacity (GiB) against peak bandwidth (GB/s), by vendor.

    Both axes are logarithmic (capacities span 8-288 GiB, bandwidths 0.3-8 TB/s). The
    `selected` device id gets a dark ring and its name as a label. Tooltips show name, vendor,
    capacity, memory type, bandwidth and year.
    """
    import altair as alt

    rows = device_rows(devices, selected)
    data = alt.Data(values=rows)
    x = alt.X("memory_gib:Q", title="Memory capacity (GiB, log scale)",
              scale=alt.Scale(type="log", nice=False, padding=12),
              axis=alt.Axis(values=[4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512, 1024],
                            grid=True, labelFlush=False))
    y = alt.Y("bandwidth_gbs:Q", title="Peak memory bandwidth (GB/s, log scale)",
              scale=alt.Scale(type="log", nice=False, padding=12),
              axis=alt.Axis(values=[125, 250, 500, 1000, 2000, 4000, 8000, 16000], grid=True))
    tooltip = [
        alt.Tooltip("name:N", title="GPU"),
        alt.Tooltip("vendor:N", title="Vendor"),
        alt.Tooltip("memory_gib:Q", title="Memory (GiB)", format=".0f"),
        alt.Tooltip("memory_type:N", title="Memory type"),
        alt.Tooltip("bandwidth_gbs:Q", title="Bandwidth (GB/s)", format=",.0f"),
        alt.Tooltip("year:O", title="Year"),
        alt.Tooltip("id:N", title="id"),
    ]
    base = alt.Chart(data)
    points = base.mark_circle(size=90, opacity=0.8, stroke="white", strokeWidth=0.8).encode(
        x=x, y=y,
        color=alt.Color("vendor:N", title="Vendor", scale=_vendor_scale(rows),
                        legend=alt.Legend(orient="top-left", fillColor="white",
                                          padding=6, cornerRadius=4)),
        tooltip=tooltip,
    )
    chosen = base.transform_filter(alt.datum.selected)
    ring = chosen.mark_point(size=420, shape="circle", filled=False, strokeWidth=2.5,
                             color=SELECTED_COLOR).encode(x=x, y=y, tooltip=tooltip)
    labels = [
        chosen.transform_filter(alt.datum.label_side == side).mark_text(
            align=align, dx=dx, dy=-12, fontSize=12, fontWeight="bold", color=SELECTED_COLOR,
        ).encode(x=x, y=y, text="name:N")
        for side, align, dx in (("right", "left", 14), ("left", "right", -14))
    ]
    return (
        alt.layer(points, ring, *labels)
        .properties(width=width, height=height,
                    title=alt.Title("Capacity vs bandwidth, every GPU in the database",
                                    subtitle="ring: the chosen GPU; hover a point for details",
                                    anchor="start", fontSize=14, subtitleColor="#6b7280"))
        .configure_view(stroke=None)
        .configure_axis(labelColor="#374151", titleColor="#374151", gridColor="#eef0f3",
                        domainColor="#c7ccd4", titleFontWeight="normal")
        .configure(font="-apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif")
    )


def selected_ids(chart_dict: Mapping[str, Any]) -> list[str]:
    """The ids a capacity/bandwidth chart spec marks as selected (for tests and reports)."""
    data = chart_dict.get("data") or {}
    values = data.get("values")
    if values is None:  # altair moves inline data to top-level datasets
        datasets = chart_dict.get("datasets") or {}
        values = [row for rows in datasets.values() for row in rows]
    return [row["id"] for row in values if row.get("selected")]


# ---------------------------------------------------------------- memory at the peak
# One colour per component (the domain's names, DESIGN.md). Model states in cool hues,
# per-batch memory in warm ones, what torch does not hand out in greys.
COMPONENT_COLORS = {
    "weights": "#2563eb",
    "gradients": "#7c3aed",
    "optimizer_states": "#c026d3",
    "activations": "#f59e0b",
    "kv_cache": "#0d9488",
    "temporary": "#f97316",
    "allocator_slack": "#cbd5e1",
    "cuda_context": "#64748b",
}
OTHER_COMPONENT_COLOR = "#94a3b8"
COMPONENT_LABELS = {
    "weights": "Weights", "gradients": "Gradients", "optimizer_states": "Optimizer states",
    "activations": "Activations", "kv_cache": "KV cache", "temporary": "Temporary",
    "allocator_slack": "Allocator slack", "cuda_context": "CUDA context",
    "nccl": "NCCL buffers", "cuda_graphs": "CUDA graphs", "workspace": "Workspaces",
}


def component_label(key: str) -> str:
    """'optimizer_states' -> 'Optimizer states' (unknown keys: underscores to spaces)."""
    return COMPONENT_LABELS.get(key) or key.replace("_", " ").replace("-", " ").capitalize()


def breakdown_rows(components: Mapping[str, int], *, min_label_fraction: float = 0.07,
                   scale_bytes: int | None = None) -> list[dict]:
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
            "component": k, "label": component_label(k), "bytes": b,
            "gib": round(b / GiB, 3), "size": format_bytes(b), "start_gib": round(at / GiB, 4),
            "end_gib": round((at + b) / GiB, 4), "share": round(b / total, 4),
            "show_label": b / scale >= min_label_fraction,
        })
        at += b
    return rows


def breakdown_chart(components: Mapping[str, int], usable_bytes: int | None = None, *,
                    gpu_name: str = "GPU", fits: bool | None = None,
                    width: int | str = "container", height: int = 64):
    """One horizontal bar: the memory at the peak, stacked by component (incl. cuda_context
    and allocator_slack, so its end is device used), against a line at the GPU's usable
    memory. The x axis runs to whichever is larger, so a plan that does not fit overshoots it.
    """
    import altair as alt

    total = sum(int(v) for v in components.values() if v)
    extent = max(total, usable_bytes or 0) or GiB
    rows = breakdown_rows(components, scale_bytes=extent)
    domain = [r["component"] for r in rows]
    scale = alt.Scale(domain=domain, range=[COMPONENT_COLORS.get(k, OTHER_COMPONENT_COLOR)
                                            for k in domain])
    x_max = extent / GiB * 1.04
    x = alt.X("start_gib:Q", title="GiB per GPU", scale=alt.Scale(domain=[0, x_max], nice=False),
              axis=alt.Axis(grid=True, tickCount=8, labelFlush=True))
    tooltip = [alt.Tooltip("label:N", title="Component"),
               alt.Tooltip("gib:Q", title="GiB", format=",.2f"),
               alt.Tooltip("share:Q", title="Share of device used", format=".1%")]
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
        line = {"usable_gib": round(usable_bytes / GiB, 3),
                "text": f"{gpu_name}: {usable_bytes / GiB:,.1f} GiB usable"}
        color = "#111827" if fits is not False else "#b42318"
        rule_base = alt.Chart(alt.Data(values=[line]))
        layers.append(rule_base.mark_rule(color=color, strokeWidth=2, strokeDash=[5, 3],
                                          y=-8, y2=height + 4).encode(
            x=alt.X("usable_gib:Q"), tooltip=[alt.Tooltip("text:N", title="Limit")]))
        # the label sits on the side of the line with room (inside the plot either way)
        left = usable_bytes / GiB < x_max * 0.5
        layers.append(rule_base.mark_text(align="left" if left else "right",
                                          dx=4 if left else -4, y=-8, baseline="bottom",
                                          fontSize=11, color=color).encode(
            x="usable_gib:Q", text="text:N"))
    return (
        alt.layer(*layers)
        .properties(width=width, height=height, padding={"top": 18, "left": 4, "right": 8})
        .configure_view(stroke=None)
        .configure_axis(labelColor="#374151", titleColor="#6b7280", gridColor="#eef0f3",
                        domainColor="#c7ccd4", titleFontWeight="normal")
        .configure_legend(labelColor="#374151", labelFontSize=11.5, symbolSize=110)
        .configure(font="-apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif")
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
