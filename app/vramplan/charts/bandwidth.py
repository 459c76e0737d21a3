"""Memory bandwidth: what one step needs against what the GPU sustains, and the roofline
(arithmetic intensity against the compute and memory ceilings, log-log).

Both read the estimate's `bandwidth` object (or the whole estimate dict): bytes_per_step,
datasheet_bandwidth_gbs, achievable_bandwidth_gbs and, where `vramplan.timing` gives them,
flops_per_step, compute_dtype / compute_rate_dtype, peak_tflops, memory_floor_s,
compute_floor_s, arithmetic_intensity, bound, needed_bandwidth_gbs. Those keys win; only where
one is absent is it derived from the others (or the compute ceiling looked up in the device's
dense throughput). A missing figure leaves its mark out and the subtitle says so."""
from __future__ import annotations

import math
from typing import Any, Mapping

from ..hardware.capabilities import compute_rate
from ..i18n import gettext
from . import theme

NARROW_COLUMNS = 18     # a bar's label a line in a narrow chart (a phone)
NARROW_LABEL_COLUMNS = 16   # a row's name a line there
POINT_COLUMNS = 24     # the workload point's label a line in a narrow chart (a phone)


def bandwidth_of(obj: Any) -> Mapping[str, Any]:
    """The `bandwidth` object of an estimate dict, or the object itself."""
    d = theme.as_dict(obj)
    return d.get("bandwidth") if isinstance(d.get("bandwidth"), Mapping) else d


def _num(bw: Mapping[str, Any], key: str) -> float | None:
    v = bw.get(key)
    return float(v) if theme.finite(v) and v > 0 else None


def needed_gbs(bw: Mapping[str, Any]) -> float | None:
    """GB/s that would keep the compute busy: `needed_bandwidth_gbs`, else bytes_per_step /
    compute_floor_s when both are known; None otherwise."""
    need = _num(bw, "needed_bandwidth_gbs")
    if need is None and _num(bw, "bytes_per_step") and _num(bw, "compute_floor_s"):
        need = bw["bytes_per_step"] / bw["compute_floor_s"] / 1e9
    return need


def arithmetic_intensity(bw: Mapping[str, Any]) -> float | None:
    """FLOPs per byte moved: `arithmetic_intensity`, else flops_per_step / bytes_per_step."""
    ai = _num(bw, "arithmetic_intensity")
    if ai is None and _num(bw, "flops_per_step") and _num(bw, "bytes_per_step"):
        ai = bw["flops_per_step"] / bw["bytes_per_step"]
    return ai


def bandwidth_rows(bandwidth: Any, lang: str = "en") -> list[dict]:
    """Bars: needed (if known), achievable, datasheet, in GB/s. Row: key, label, gbs, color,
    text."""
    bw = bandwidth_of(bandwidth)
    ach = _num(bw, "achievable_bandwidth_gbs")
    rows = []
    need = needed_gbs(bw)
    if need is not None:
        over = ach is not None and need > ach
        rows.append({"key": "needed", "label": gettext("Needed to keep compute busy", lang),
                     "gbs": need,
                     "color": theme.NO_FIT_COLOR if over else theme.FIT_COLOR})
    if ach is not None:
        rows.append({"key": "achievable", "label": gettext("Achievable (sustained)", lang),
                     "gbs": ach,
                     "color": theme.CHOSEN_COLOR})
    peak = _num(bw, "datasheet_bandwidth_gbs")
    if peak is not None:
        rows.append({"key": "datasheet", "label": gettext("Datasheet peak", lang), "gbs": peak,
                     "color": theme.NEUTRAL_COLOR})
    for r in rows:
        r["gbs"] = round(r["gbs"], 1)
        r["text"] = f"{r['gbs']:,.0f} GB/s"
        if r["key"] == "needed" and ach:
            ratio = r["gbs"] / ach
            r["text"] += " · " + gettext("{ratio}x achievable", lang).format(
                ratio=f"{ratio:,.0f}" if ratio >= 10 else f"{ratio:.2g}")
    return rows


def _ms(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:,.3g} µs"
    return f"{s * 1e3:,.3g} ms" if s < 1 else f"{s:,.3g} s"


def _bandwidth_axes(rows: list[dict], log: bool, lo: float, top: float, t) -> tuple:
    """The bars' x (GB/s, room for each label at any width) and y (the rows' names, in
    lines in a narrow chart)."""
    import altair as alt
    y = alt.Y("label:N", sort=[r["label"] for r in rows], title=None,
              axis=alt.Axis(ticks=False, domain=False, labelLimit=220, labelExpr=(
                  theme.narrow_labels([r["label"] for r in rows], NARROW_LABEL_COLUMNS))))
    room = theme.room_for_labels([r["gbs"] for r in rows], [r["text"] for r in rows],
                                 lo if log else 0, round(top, 1), log=log,
                                 narrow_texts=[r["text_narrow"] for r in rows])
    x = alt.X("gbs:Q", title=t("Memory bandwidth (GB/s, log scale)") if log else
              t("Memory bandwidth (GB/s)"),
              scale=alt.Scale(type="log" if log else "linear", domainMin=lo if log else 0,
                              domainMax=room, nice=False),
              axis=alt.Axis(grid=True, tickCount=6, format=",~g" if log else ",.0f",
                            titleAnchor="end"))
    return x, y


def bandwidth_chart(bandwidth: Any, *, gpu_name: str | None = None,
                    width: int | str = "container", height: int = 130, lang: str = "en"):
    """Horizontal bars in GB/s (decimal, as vendors quote): the bandwidth the step needs to run
    at compute speed (green when the GPU sustains it, vermillion when not), the achievable
    and the datasheet bandwidth. The subtitle gives bytes per step and the step-time floors."""
    import altair as alt

    def t(text: str) -> str:
        return gettext(text, lang)
    bw = bandwidth_of(bandwidth)
    rows = bandwidth_rows(bw, lang)
    vals = [r["gbs"] for r in rows] or [1.0]
    log = max(vals) / min(vals) > 20      # decode needs 100-1000x what HBM gives
    top = max(vals) * (6 if log else 1.3)
    lo = min(vals) / 3 if log else 0
    for r in rows:
        r["base"] = lo      # bars start at the axis start (a log axis has no zero)
    notes = []
    if _num(bw, "bytes_per_step"):
        notes.append(t("{size} GiB moved per step").format(
            size=f"{bw['bytes_per_step'] / theme.GiB:,.2f}"))
    mem = _num(bw, "memory_floor_s")
    if mem is None and not _num(bw, "compute_floor_s"):
        mem = _num(bw, "min_step_time_s")   # without a compute floor it is the memory floor
    if mem:
        notes.append(t("memory floor {time}/step").format(time=_ms(mem)))
    if _num(bw, "compute_floor_s"):
        notes.append(t("compute floor {time}/step").format(time=_ms(bw["compute_floor_s"])))
    if bw.get("bound"):
        notes.append(t(f"{bw['bound']}-bound"))
    if needed_gbs(bw) is None:
        notes.append(t("need unknown (no FLOP count for this workload)"))
    rows = theme.narrow_rows(rows, "text", NARROW_COLUMNS)
    x, y = _bandwidth_axes(rows, log, lo, top, t)
    base = alt.Chart(alt.Data(values=rows))
    colors = alt.Scale(domain=[r["key"] for r in rows] or ["achievable"],
                       range=[r["color"] for r in rows] or [theme.CHOSEN_COLOR])
    bars = base.mark_bar(height={"band": 0.7}, cornerRadiusEnd=2).encode(
        x=x, x2="base:Q", y=y, color=alt.Color("key:N", scale=colors, legend=None),
        tooltip=[alt.Tooltip("label:N", title=t("Bandwidth")),
                 alt.Tooltip("gbs:Q", title="GB/s", format=",.1f")])
    text = base.transform_calculate(shown=theme.narrow_field("text")).mark_text(
        align="left", dx=4, lineBreak="\n").encode(x="gbs:Q", y=y, text="shown:N")
    return theme.finish(alt.layer(bars, text),
                        title_text=t("Bandwidth needed vs achievable on {gpu} (GB/s)").format(
                            gpu=gpu_name) if gpu_name else
                        t("Bandwidth needed vs achievable (GB/s)"),
                        subtitle=t("; ").join(notes) or None, width=width, height=height)


def compute_ceiling(device: Any, precision: str | None) -> tuple[str | None, float | None]:
    """(throughput key, dense TFLOPS) the `precision` (or a throughput key) computes at on
    `device` (a Device or its dict), from the one precision -> rate table the estimate's timing
    reads (`hardware.capabilities.compute_rate`); (None, None) when the hardware database has
    no figure for it."""
    tflops, key = compute_rate(theme.as_dict(device), precision or "bf16")
    return (key, tflops) if tflops else (None, None)


def roofline_rows(bandwidth: Any, device: Any, precision: str | None = None,
                  lang: str = "en") -> dict:
    """The roofline's numbers: {"roof": [{intensity, tflops, ceiling}...], "point": [...] or [],
    "ridge", "peak_tflops", "throughput_key", "bandwidth_gbs", "intensity"}.

    Memory ceiling: achievable bandwidth (TB/s) x intensity; compute ceiling: the estimate's
    `peak_tflops` when `precision` is not given, else the device's dense TFLOPS for it. The workload sits at its intensity, on the roof (attainable TFLOPS)."""
    bw = bandwidth_of(bandwidth)
    dev = theme.as_dict(device)
    gbs = _num(bw, "achievable_bandwidth_gbs")
    if gbs is None and theme.finite(dev.get("bandwidth_gbs")):
        gbs = float(dev["bandwidth_gbs"]) * float(dev.get("achievable_bandwidth_fraction") or 0.9)
    if _num(bw, "peak_tflops") and precision is None:   # the estimate's own ceiling
        key = bw.get("compute_rate_dtype") or bw.get("compute_dtype") or "dense"
        peak = float(bw["peak_tflops"])
    else:
        key, peak = compute_ceiling(dev, precision or bw.get("compute_dtype"))
    ai = arithmetic_intensity(bw)
    tbs = (gbs or 0) / 1e3
    ridge = peak / tbs if peak and tbs else None
    centre = ridge or ai or 10.0
    lo = min(centre / 100, (ai or centre) / 4)
    hi = max(centre * 100, (ai or centre) * 4)
    roof = []
    if tbs:
        xs = [lo, ridge, hi] if ridge else [lo, hi]
        roof += [{"intensity": x, "tflops": min(x * tbs, peak or x * tbs),
                  "ceiling": "memory" if not ridge or x <= ridge else "compute"} for x in xs]
    elif peak:
        roof += [{"intensity": x, "tflops": peak, "ceiling": "compute"} for x in (lo, hi)]
    point = []
    if ai is not None and (tbs or peak):
        attain = min(x for x in (ai * tbs if tbs else None, peak) if x)
        bound = bw.get("bound") or ("memory" if ridge and ai < ridge else
                                    "compute" if ridge else ("memory" if tbs else "compute"))
        point.append({"intensity": ai, "tflops": attain, "bound": bound,
                      "bound_label": gettext(f"{bound}-bound", lang),
                      "text": gettext("this step: {ai} FLOP/B, {bound}", lang).format(
                          ai=f"{ai:,.3g}", bound=gettext(f"{bound}-bound", lang))})
    return {"roof": [{**r, "ceiling_label": gettext(r["ceiling"], lang),
                      "intensity": float(f"{r['intensity']:.6g}"),
                      "tflops": float(f"{r['tflops']:.6g}")} for r in roof],
            "point": point, "ridge": ridge, "peak_tflops": peak, "throughput_key": key,
            "bandwidth_gbs": gbs, "intensity": ai, "domain": [lo, hi]}


def _ceiling_tags(r: dict, lo: float, t) -> list[dict]:
    """Each ceiling's name, placed at its left end (the memory one below the slope)."""
    tags = []  # each ceiling named on the chart, at its left end
    tbs = (r["bandwidth_gbs"] or 0) / 1e3
    if tbs:
        at = lo * 2
        tags.append({"intensity": at, "tflops": float(f"{min(at * tbs, r['peak_tflops'] or at * tbs):.6g}"),
                     "text": t("memory: {rate} GB/s").format(rate=f"{r['bandwidth_gbs']:,.0f}"),
                     "below": True})
    if r["peak_tflops"]:
        at = max(r["ridge"] or lo, lo) * 1.5
        tags.append({"intensity": float(f"{at:.6g}"), "tflops": r["peak_tflops"],
                     "text": t("compute: {rate} TFLOPS {dtype}").format(
                         rate=f"{r['peak_tflops']:,.0f}", dtype=r["throughput_key"]),
                     "below": False})
    return tags


def _tag_layers(tags: list[dict], x, y, domain: tuple[float, float]) -> list:
    """The ceilings' names: the slope's under it (the line rises to the right), the flat
    one's above; a name that would run past the plot's right edge moves left (a phone)."""
    import altair as alt
    layers: list = []
    lo, hi = domain
    for tag in tags:
        at = math.log(tag["intensity"] / lo) / math.log(hi / lo)     # 0..1 across the plot
        over = f"width * {1 - at:.4g} - {theme.text_px(tag['text']) + 4:.0f}"
        dy, base = (8, "top") if tag["below"] else (-6, "bottom")
        layers.append(alt.Chart(alt.Data(values=[tag])).mark_text(
            align="left", dy=dy, dx={"expr": f"min(0, {over})"}, baseline=base,
            color=theme.MUTED).encode(x=x, y=y, text="text:N"))
    return layers


def _roof_notes(r: dict, precision, bw: dict, t) -> list[str]:
    """The subtitle's notes on the memory and compute roofs and the ridge."""
    notes = []
    if r["bandwidth_gbs"]:
        notes.append(t("memory roof {rate} GB/s achievable").format(
            rate=f"{r['bandwidth_gbs']:,.0f}"))
    if r["peak_tflops"]:
        notes.append(t("compute roof {rate} TFLOPS dense {dtype}").format(
            rate=f"{r['peak_tflops']:,.1f}", dtype=r["throughput_key"]))
    else:
        notes.append(t("no dense {dtype} figure for this GPU").format(
            dtype=precision or bw.get("compute_dtype") or "bf16"))
    if r["ridge"]:
        notes.append(t("ridge at {ai} FLOP/B").format(ai=f"{r['ridge']:,.0f}"))
    return notes


def _point_layers(r: dict, lo: float, hi: float, x, y, t) -> list:
    """The workload's point on the roof and its label."""
    import altair as alt
    layers: list = []
    point = theme.narrow_rows(r["point"], "text", POINT_COLUMNS)
    pbase = alt.Chart(alt.Data(values=point))
    tips = [alt.Tooltip("intensity:Q", title="FLOP/B", format=",.3g"),
            alt.Tooltip("tflops:Q", title=t("Attainable TFLOPS"), format=",.3g"),
            alt.Tooltip("bound_label:N", title=t("Bound"))]
    layers.append(pbase.mark_point(size=140, filled=True, color=theme.CHOSEN_COLOR,
                                   stroke="white", strokeWidth=1.5).encode(
        x=x, y=y, tooltip=tips))
    # below the point, on the side away from the slope unless the right edge is near: the
    # text's width (one line, or POINT_COLUMNS a line in a narrow chart) decides at any width
    at = math.log(r["intensity"] / lo) / math.log(hi / lo)      # 0..1 across the plot
    wide, narrow = (theme.text_px(p[k], theme.LABEL_SIZE) + 10 for p in point[:1]
                    for k in ("text", "text_narrow"))
    right = (f"width * {1 - at:.4g} < ({theme.IS_NARROW} ? {narrow:.0f} : {wide:.0f}) && "
             f"width * {at:.4g} > ({theme.IS_NARROW} ? {narrow:.0f} : {wide:.0f})")
    layers.append(pbase.transform_calculate(shown=theme.narrow_field("text")).mark_text(
        align={"expr": f"{right} ? 'right' : 'left'"}, baseline="top",
        dx={"expr": f"{right} ? -8 : 8"}, dy=8, fontWeight="bold", lineBreak="\n",
        color=theme.CHOSEN_COLOR).encode(x=x, y=y, text="shown:N"))
    return layers


def roofline_chart(bandwidth: Any, device: Any, *, precision: str | None = None,
                   width: int | str = "container", height: int = 300, lang: str = "en"):
    """Log-log roofline of the chosen GPU: attainable TFLOPS against arithmetic intensity
    (FLOPs per byte of device memory traffic). The slanted roof is the achievable bandwidth,
    the flat one the dense TFLOPS: the estimate's `peak_tflops` (for its compute dtype), or,
    given `precision` or without it, the device's figure for `precision` / the estimate's
    `compute_dtype` / its scenario precision / bf16; the workload is a point on the roof at its intensity. A missing ceiling or
    intensity leaves that part out and the subtitle says so."""
    import altair as alt

    est = theme.as_dict(bandwidth)
    bw = bandwidth_of(est)
    scenario_precision = ((est.get("scenario") or {}).get("precision")
                          if isinstance(est.get("scenario"), Mapping) else None)
    if precision is None and not _num(bw, "peak_tflops") and not bw.get("compute_dtype"):
        precision = scenario_precision
    def t(text: str) -> str:
        return gettext(text, lang)
    r = roofline_rows(bw, device, precision, lang)
    lo, hi = r["domain"]
    ys = [p["tflops"] for p in r["roof"] + r["point"]] or [1.0]
    y_dom = [min(ys) / 2, max(ys) * 3]
    x = alt.X("intensity:Q", title=theme.axis_title(
        t("Arithmetic intensity (FLOPs per byte, log scale)")),
              scale=alt.Scale(type="log", domain=[lo, hi], nice=False),
              axis=alt.Axis(grid=True, format=",~g"))
    y = alt.Y("tflops:Q", title=t("Attainable throughput (TFLOPS, log scale)"),
              scale=alt.Scale(type="log", domain=y_dom, nice=False),
              axis=alt.Axis(grid=True, format=",~g"))
    layers = [alt.Chart(alt.Data(values=r["roof"])).mark_line(
        color=theme.INK, strokeWidth=2.5).encode(
        x=x, y=y, order="intensity:Q",
        tooltip=[alt.Tooltip("ceiling_label:N", title=t("Ceiling")),
                 alt.Tooltip("intensity:Q", title="FLOP/B", format=",.3g"),
                 alt.Tooltip("tflops:Q", title="TFLOPS", format=",.3g")])]
    layers += _tag_layers(_ceiling_tags(r, lo, t), x, y, (lo, hi))
    notes = _roof_notes(r, precision, bw, t)
    if r["point"]:
        layers += _point_layers(r, lo, hi, x, y, t)
    else:
        notes.append(t("no FLOP count: the workload's point is not drawn"))
    dev = theme.as_dict(device)
    return theme.finish(alt.layer(*layers), title_text=t(
        "Roofline of {gpu} (TFLOPS vs FLOP/byte)").format(gpu=dev.get("name"))
        if dev.get("name") else t("Roofline (TFLOPS vs FLOP/byte)"),
                        subtitle=t("; ").join(notes), width=width, height=height)
