"""The report's charts: the `vramplan.charts` builders at a fixed width and in the report's
language, rendered to SVG by vl-convert (offline: no request, no browser). altair and
vl_convert load inside `charts()` only, so importing the report costs nothing until an HTML
report is asked for."""
from __future__ import annotations

import re

from .content import Report

WIDTH = 720


def specs(r: Report) -> list[tuple[str, dict]]:
    """(key, Vega-Lite dict) of each chart the plan can draw: the breakdown against the
    usable memory, the advisor's savings, bandwidth, phases."""
    from .. import charts as C
    est, dev = r.estimate, r.device
    pg = est.get("per_gpu") or {}
    gpu = est.get("gpu") or {}
    usable = gpu.get("usable_memory_bytes") or dev.get("usable_memory_bytes")
    name = gpu.get("name") or dev.get("name") or "GPU"
    out = []
    if pg.get("components"):
        out.append(("breakdown", C.breakdown_chart(pg["components"], usable, gpu_name=name,
                                                   fits=r.fits, width=WIDTH, lang=r.lang)))
    adv, plan = r.advice or {}, r.plan
    if any((x.get("saves_bytes") or 0) > 0 for x in adv.get("recommendations") or []) and (
            r.plan or not r.fits):
        out.append(("savings", C.savings_waterfall_chart(adv, estimate=est, plan=plan,
                                                         usable_bytes=usable, gpu_name=name,
                                                         width=WIDTH, lang=r.lang)))
    bw = est.get("bandwidth") or {}
    if bw.get("bytes_per_step") or bw.get("needed_bandwidth_gbs"):
        out.append(("bandwidth", C.bandwidth_chart(est, gpu_name=name, width=WIDTH,
                                                   lang=r.lang)))
    if est.get("phases"):
        out.append(("phases", C.phases_chart(est, width=WIDTH, height=220, lang=r.lang)))
    return [(k, c.to_dict()) for k, c in out]


_ATTR = re.compile(r"""\s(?:href|xlink:href|src)\s*=\s*["'](?!#|data:)""", re.I)


def to_svg(spec: dict) -> str:
    """One chart as inline SVG (no XML prolog), scaled to its container. An SVG that would
    name anything outside itself is refused (vl-convert writes none; this keeps it so)."""
    import vl_convert as vlc
    svg = vlc.vegalite_to_svg(spec)
    svg = svg[svg.index("<svg"):]
    if _ATTR.search(svg):
        raise ValueError("a chart's SVG refers to something outside the report")
    return svg.replace("<svg ", "<svg class='vp-chart' role='img' ", 1)


def charts(r: Report) -> list[tuple[str, str]]:
    """(key, SVG) of every chart of `r`."""
    return [(k, to_svg(spec)) for k, spec in specs(r)]
