"""The breakdown chart as a plain SVG string: the same bar as `breakdown_chart` (memory at the
peak stacked by component against the GPU's usable memory, same colours, order and labels),
drawn without altair or the chart widget's JavaScript.

The page shows it the moment the first estimate exists, before altair is imported and the
interactive chart's ~1 MB of JavaScript has loaded (the chart widget then takes its place);
the report embeds it where no JavaScript runs. Pure Python, data in, text out.
"""
from __future__ import annotations

import html
from typing import Mapping

from ..i18n import gettext
from ..units import GiB
from . import theme
from .breakdown import breakdown_rows

_e = html.escape
# geometry in the viewBox's units (the svg scales to its container's width)
PLOT_LEFT, PLOT_RIGHT, BAR_TOP, BAR_HEIGHT = 6.0, 8.0, 26.0, 34.0
TICKS = 8


def _nice_step(x_max: float, ticks: int = TICKS) -> float:
    """A 1 / 2 / 5 x 10^k step giving about `ticks` ticks up to x_max."""
    raw = x_max / ticks if x_max > 0 else 1.0
    k = 1.0
    while k * 10 <= raw:
        k *= 10
    while k > raw:
        k /= 10
    for m in (1, 2, 5, 10):
        if k * m >= raw:
            return k * m
    return k * 10


def breakdown_svg(components: Mapping[str, int], usable_bytes: int | None = None, *,
                  gpu_name: str = "GPU", fits: bool | None = None, width: int = 640,
                  height: int = 110, lang: str = "en") -> str:
    """An <svg> of the breakdown bar, `width` x `height` in its viewBox, 100 % wide on the
    page. Segments carry a <title> (component, GiB, share) as the chart's tooltip does."""
    total = sum(int(v) for v in components.values() if v)
    extent = max(total, usable_bytes or 0) or GiB
    rows = breakdown_rows(components, scale_bytes=extent, lang=lang)
    x_max = extent / GiB * 1.04
    plot_w = width - PLOT_LEFT - PLOT_RIGHT

    def x(gib: float) -> float:
        return PLOT_LEFT + plot_w * gib / x_max

    axis_y = BAR_TOP + BAR_HEIGHT + 6
    parts = [f"<svg class='vp-static-chart' xmlns='http://www.w3.org/2000/svg' "
             f"viewBox='0 0 {width} {height}' width='100%' preserveAspectRatio='xMinYMin meet' "
             f"role='img' aria-label='{_e(gettext('Memory at the peak, per GPU', lang))}' "
             "font-family='system-ui, -apple-system, Segoe UI, sans-serif'>"]
    step = _nice_step(x_max)
    t = 0.0
    while t <= x_max + 1e-9:             # grid and tick labels
        xt = x(t)
        parts.append(f"<line x1='{xt:.1f}' y1='{BAR_TOP - 4}' x2='{xt:.1f}' y2='{axis_y}' "
                     f"stroke='{theme.GRID}'/>")
        parts.append(f"<text x='{xt:.1f}' y='{axis_y + 12}' font-size='10' fill='{theme.LABEL_INK}' "
                     f"text-anchor='middle'>{t:,.{0 if step >= 1 else 1}f}</text>")
        t += step
    parts.append(f"<text x='{PLOT_LEFT + plot_w / 2:.1f}' y='{axis_y + 26}' font-size='10' "
                 f"fill='{theme.MUTED}' text-anchor='middle'>{_e(gettext('GiB per GPU', lang))}</text>")
    for r in rows:
        x0, x1 = x(r["start_gib"]), x(r["end_gib"])
        color = theme.component_color(r["component"])
        tip = f"{r['label']}: {r['size']} ({r['share']:.1%})"
        parts.append(f"<rect x='{x0:.2f}' y='{BAR_TOP}' width='{max(x1 - x0, 0.5):.2f}' "
                     f"height='{BAR_HEIGHT}' fill='{color}' stroke='white' stroke-width='1'>"
                     f"<title>{_e(tip)}</title></rect>")
        if r["show_label"]:
            parts.append(f"<text x='{(x0 + x1) / 2:.1f}' y='{BAR_TOP + BAR_HEIGHT / 2 + 4:.1f}' "
                         "font-size='11' font-weight='bold' fill='white' text-anchor='middle'>"
                         f"{r['gib']:.1f}</text>")
    if usable_bytes:
        color = theme.LIMIT_COLOR if fits is not False else theme.NO_FIT_COLOR
        xu = x(usable_bytes / GiB)
        text = gettext("{gpu}: {size} GiB usable", lang).format(
            gpu=gpu_name, size=theme.gib_number(usable_bytes, lang))
        left = usable_bytes / GiB < x_max * 0.5
        parts.append(f"<line class='vp-usable' x1='{xu:.1f}' y1='{BAR_TOP - 8}' x2='{xu:.1f}' "
                     f"y2='{BAR_TOP + BAR_HEIGHT + 4}' stroke='{color}' stroke-width='2' "
                     "stroke-dasharray='5 3'/>")
        parts.append(f"<text x='{xu + (4 if left else -4):.1f}' y='{BAR_TOP - 10}' "
                     f"font-size='11' fill='{color}' text-anchor='{'start' if left else 'end'}'>"
                     f"{_e(text)}</text>")
    parts.append("</svg>")
    return "".join(parts)
