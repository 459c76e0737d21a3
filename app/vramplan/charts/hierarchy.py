"""The chosen GPU's memory hierarchy: registers, L1 / shared memory, L2, last-level cache,
device memory, the host link and the scale-up link (NVLink, Infinity Fabric, ...), with the
capacities and bandwidths the hardware database holds. A level the database lacks is left
out; the only derived figure is a PCIe link's rate, from its generation and lane count."""
from __future__ import annotations

import math
from typing import Any

from ..i18n import gettext
from . import theme

# PCIe generation -> (GT/s per lane, encoding efficiency), from the PCI-SIG specifications;
# 6.0 and later (PAM4, FLIT) are not derived here
PCIE = {1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130),
        5: (32.0, 128 / 130)}
LEVEL_COLORS = {"on-chip": theme.OKABE_ITO["orange"], "device": theme.CHOSEN_COLOR,
                "link": theme.NEUTRAL_COLOR}


def pcie_gbs(gen: Any, lanes: Any) -> float | None:
    """GB/s per direction of a PCIe link (gen 1-5), None where not derivable."""
    if not (theme.finite(gen) and theme.finite(lanes)) or int(gen) not in PCIE or lanes <= 0:
        return None
    rate, eff = PCIE[int(gen)]
    return round(rate * eff * lanes / 8, 1)


def _size(b: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:,.3g} {unit}"
    return f"{b:,.0f} B"


def _on_chip_rows(d: dict, h: dict) -> list[dict]:
    """Registers, L1 / shared memory (per unit x units), L2 and a last-level cache."""
    n = h.get("compute_units") or d.get("compute_units")
    kind = h.get("compute_unit_kind") or "unit"
    rows = []

    def per_unit(key: str, level: str):
        kib = h.get(key)
        if theme.finite(kib) and kib > 0 and theme.finite(n) and n > 0:
            rows.append({"level": level, "kind": "on-chip", "bytes": int(kib * 1024 * n),
                         "detail": f"{n} {kind} x {kib:g} KiB", "bandwidth_gbs": None})

    per_unit("regfile_kib_per_unit", "Registers")
    per_unit("l1_smem_kib_per_unit",
             "LDS / L1" if str(d.get("vendor", "")).lower() == "amd" else "L1 / shared memory")
    if theme.finite(h.get("l2_mib")) and h["l2_mib"] > 0:
        rows.append({"level": "L2 cache", "kind": "on-chip", "bytes": int(h["l2_mib"] * 2**20),
                     "detail": "", "bandwidth_gbs": None})
    if theme.finite(h.get("llc_mib")) and h["llc_mib"] > 0:
        rows.append({"level": h.get("llc_kind") or "Last-level cache", "kind": "on-chip",
                     "bytes": int(h["llc_mib"] * 2**20), "detail": "", "bandwidth_gbs": None})
    return rows


def _link_rows(ic: dict) -> list[dict]:
    """The host link (PCIe or another) and the GPU-to-GPU link."""
    rows = []
    gbs = pcie_gbs(ic.get("pcie_gen"), ic.get("pcie_lanes"))
    if ic.get("pcie_gen"):
        lanes = f" x{ic['pcie_lanes']}" if ic.get("pcie_lanes") else ""
        rows.append({"level": "Host link (PCIe)", "kind": "link", "bytes": None,
                     "detail": f"PCIe {ic['pcie_gen']}.0{lanes}" +
                     (", per direction, from gen x lanes" if gbs else ""),
                     "bandwidth_gbs": gbs})
    if ic.get("host_link"):
        rows.append({"level": "Host link", "kind": "link", "bytes": None,
                     "detail": str(ic["host_link"]), "bandwidth_gbs": None})
    if ic.get("scaleup"):
        up = ic.get("scaleup_gbs_per_direction")
        links = f", {ic['scaleup_links']} links" if ic.get("scaleup_links") else ""
        rows.append({"level": "GPU-to-GPU link", "kind": "link", "bytes": None,
                     "detail": f"{ic['scaleup']}{links}" + (", per direction" if up else ""),
                     "bandwidth_gbs": float(up) if theme.finite(up) else None})
    return rows


def _label_rows(rows: list[dict], frac, lang: str) -> None:
    """Each row's level and detail in `lang`, its printed text and GiB."""
    for r in rows:
        r["level"] = gettext(r["level"], lang)
        for en in (", unified with the CPU", ", per direction, from gen x lanes",
                   ", per direction"):
            if r["detail"].endswith(en):
                r["detail"] = r["detail"][:-len(en)] + gettext(en, lang)
        if " links" in r["detail"]:
            r["detail"] = r["detail"].replace(" links", gettext(" links", lang))
        parts = [_size(r["bytes"])] if r["bytes"] else []
        if r["bandwidth_gbs"] and r["kind"] == "device" and theme.finite(frac) and frac > 0:
            parts.append(gettext("{peak} GB/s peak, ~{achievable} achievable", lang).format(
                peak=f"{r['bandwidth_gbs']:,.0f}", achievable=f"{r['bandwidth_gbs'] * frac:,.0f}"))
        elif r["bandwidth_gbs"]:
            parts.append(f"{r['bandwidth_gbs']:,.0f} GB/s")
        if r["detail"]:
            parts.append(r["detail"])
        r["text"] = " · ".join(parts)
        r["gib"] = theme.gib(r["bytes"], 6) if r["bytes"] else None


def hierarchy_rows(device: Any, lang: str = "en") -> list[dict]:
    """One row per level the device has, fastest first. Row: level, kind (on-chip, device,
    link), bytes (None for links), detail (per-unit figures, type), bandwidth_gbs (None where
    the database has none), text (the label the chart prints)."""
    d = theme.as_dict(device)
    h = d.get("hierarchy") or {}
    ic = d.get("interconnect") or {}
    rows = _on_chip_rows(d, h)
    if theme.finite(d.get("memory_bytes")) and d["memory_bytes"] > 0:
        bw = d.get("bandwidth_gbs") if theme.finite(d.get("bandwidth_gbs")) else None
        detail = d.get("memory_type") or ""
        if d.get("unified_memory"):
            detail = (detail + ", unified with the CPU").lstrip(", ")
        rows.append({"level": "Device memory", "kind": "device", "bytes": int(d["memory_bytes"]),
                     "detail": detail, "bandwidth_gbs": bw})
    rows += _link_rows(ic)
    _label_rows(rows, d.get("achievable_bandwidth_fraction"), lang)
    return rows


def _axis_values(lo: float, hi: float) -> list[int]:
    """Binary tick values every 2^5 (1 MiB, 32 MiB, 1 GiB, ...) inside [lo, hi]; every power
    of two when the range is too short for those."""
    every5 = [2**k for k in range(0, 61, 5) if lo <= 2**k <= hi]
    return every5 if len(every5) >= 2 else [2**k for k in range(61) if lo <= 2**k <= hi]


NARROW_LEVEL_PX = 100    # the level names' width in a narrow chart (a phone)
NARROW_COLUMNS = 32      # a figures label's line there (two lines fill a row)


def hierarchy_chart(device: Any, *, width: int | str = "container", row_height: int = 40,
                    lang: str = "en"):
    """Horizontal bars of each storage level's capacity on a log (binary) axis, fastest level
    on top, labelled with capacity, bandwidth (GB/s, decimal) and per-unit detail; the links
    (host, GPU-to-GPU) have no capacity and carry their bandwidth as a label."""
    import altair as alt

    def t(text: str) -> str:
        return gettext(text, lang)
    d = theme.as_dict(device)
    rows = hierarchy_rows(d, lang)
    sizes = [r["bytes"] for r in rows if r["bytes"]] or [2**30]
    lo = min(sizes) / 4
    # the longest bar ends at about half the width: its label needs the rest
    hi = math.exp(math.log(lo) + (math.log(max(sizes)) - math.log(lo)) / 0.5)
    for r in rows:
        r["label_bytes"] = r["bytes"] or lo
        r["start_bytes"] = lo
    rows = theme.narrow_rows(rows, "text", NARROW_COLUMNS)
    order = [r["level"] for r in rows]
    kinds = [k for k in LEVEL_COLORS if any(r["kind"] == k and r["bytes"] for r in rows)] \
        or ["device"]
    y = alt.Y("level:N", sort=order, title=None,
              axis=alt.Axis(ticks=False, domain=False,
                            labelLimit=theme.when_narrow(NARROW_LEVEL_PX, 200)))
    x = alt.X("bytes:Q", title=theme.axis_title(t("Capacity (bytes, log scale; binary units)")),
              scale=alt.Scale(type="log", base=2, domainMin=lo, nice=False,
                              domainMax=theme.room_for_labels(
                                  [r["label_bytes"] for r in rows],
                                  [r["text"] for r in rows], lo, hi, dx=5, log=True,
                                  narrow_texts=[r["text_narrow"] for r in rows])),
              # a phone's plot leaves the sizes ~30 px: no ticks there (each bar's label
              # gives its size)
              axis=alt.Axis(values=theme.when_narrow([], _axis_values(lo, max(sizes) * 2)),
                            grid=True, titleAnchor="end", labelExpr=(
                  "datum.value >= 1099511627776 ? format(datum.value / 1099511627776, '~g')"
                  " + ' TiB' : datum.value >= 1073741824 ? format(datum.value / 1073741824,"
                  " '~g') + ' GiB' : datum.value >= 1048576 ? format(datum.value / 1048576,"
                  " '~g') + ' MiB' : format(datum.value / 1024, '~g') + ' KiB'")))
    base = alt.Chart(alt.Data(values=rows))
    tips = [alt.Tooltip("level:N", title=t("Level")), alt.Tooltip("text:N", title=t("Figures"))]
    color = alt.Color("kind:N", legend=None, scale=alt.Scale(
        domain=kinds, range=[LEVEL_COLORS[k] for k in kinds]))
    bars = base.transform_filter("isValid(datum.bytes) && datum.bytes > 0").mark_bar(
        height={"band": 0.65}, cornerRadiusEnd=2).encode(
        x=x, x2="start_bytes:Q", y=y, color=color, tooltip=tips)
    labels = base.transform_calculate(shown=theme.narrow_field("text")).mark_text(
        align="left", dx=5, limit=520, lineBreak="\n").encode(
        x=alt.X("label_bytes:Q"), y=y, text="shown:N", tooltip=tips)
    name = d.get("name") or d.get("id") or "GPU"
    missing = not any(r["kind"] == "on-chip" for r in rows)
    sub = t("capacity as bars (on-chip orange, device memory blue); bandwidth (GB/s) where "
            "the hardware database has it")
    if missing:
        sub += t("; no on-chip figures in the database for this GPU")
    return theme.finish(alt.layer(bars, labels),
                        title_text=t("Memory hierarchy of {gpu}").format(gpu=name),
                        subtitle=sub, width=width, height=max(1, len(rows)) * row_height)
