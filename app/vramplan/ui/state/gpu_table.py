"""The GPU comparison for a buyer as a table: every GPU that passes the GPU picker's filters
(vendor, minimum memory, minimum bandwidth; `PlanState.gpu_filters`), in the order the
comparison's "Sort by" names (`charts.gpu_compare.comparison_rows`: the chart's order), with
memory (usable, headroom, largest batch, GPUs needed) beside the plan's shortest step or image
on that GPU (`advisor.compare.step_time`). The chart above it draws the best `TOP`; the table
holds them all. Plain HTML from plain rows: tested without a browser.
"""
from __future__ import annotations

import html
from typing import Any, Iterable, Mapping

from ...charts.gpu_compare import comparison_rows
from .i18n import _
from .text import count, gib

_e = html.escape
PAD = " style='padding:3px 0 3px 12px;white-space:nowrap'"   # a gap between the columns
RIGHT = " style='padding:3px 0 3px 12px;white-space:nowrap;text-align:right'"   # a number's head
LEFT = " style='text-align:left'"
LABELS = {"vendor": "Vendor", "min_memory": "Min memory", "min_bandwidth": "Min bandwidth"}


def _time(r: Mapping[str, Any]) -> str:
    if r.get("step_ms") is None:
        return "–"
    return _("{ms} ms per {per}").format(ms=f"{r['step_ms']:,.1f}", per=_(r["per"]))


def gpu_table_html(rows: Iterable[Mapping[str, Any]], metric: str = "headroom",
                   selected: str | None = None, filters: Mapping[str, Any] | None = None,
                   batched: bool = True) -> str:
    """The table of `advisor.compare.gpu_rows` rows sorted by `metric`, the chosen GPU
    marked; a line above it says how many GPUs pass which filters."""
    data = comparison_rows(list(rows), metric=metric, selected=selected)
    active = {k: v for k, v in (filters or {}).items() if v}
    which = ", ".join(f"{_e(_(LABELS.get(k, k)))} {_e(str(v))}" for k, v in active.items())
    line = _("{n} GPUs pass the GPU filters ({which})").format(n=len(data), which=which) \
        if active else _("{n} GPUs (no GPU filter set)").format(n=len(data))
    if not data:
        return f"<div class='vp-hint vp-gpu-table-count'>{line}</div>"
    head = [_("GPU"), _("Usable"), _("Headroom"), _("GPUs needed"), _("Max batch size"),
            _("Shortest time")]
    if not batched:
        head.remove(_("Max batch size"))
    body = []
    for r in data:
        cells = [f"<td>{_e(r['name'])}</td>",
                 f"<td class='vp-num'{PAD}>{gib(r['usable_bytes'])}</td>",
                 f"<td class='vp-num'{PAD}>{gib(r['headroom_bytes'])}</td>",
                 f"<td class='vp-num'{PAD}>{r['gpus_needed'] or (1 if r['fits'] else '–')}</td>"]
        if batched:
            mb = r["max_batch_size"]
            cells.append(f"<td class='vp-num'{PAD}>{count(mb) if mb is not None else '–'}</td>")
        cells.append(f"<td class='vp-num'{PAD}>{_e(_time(r))}</td>")
        cls = " class='vp-selected'" if r["selected"] else ""
        fit = "vp-fits" if r["fits"] else "vp-nofit"
        body.append(f"<tr{cls} data-gpu='{_e(r['id'])}' data-status='{fit}'>"
                    + "".join(cells) + "</tr>")
    ths = "".join(f"<th{RIGHT if i else LEFT}>{_e(h)}</th>" for i, h in enumerate(head))
    return (f"<div class='vp-hint vp-gpu-table-count'>{line}</div>"
            "<div class='vp-gpu-table-wrap' style='max-height:360px;overflow:auto'>"
            f"<table class='vp-table vp-gpu-table'><thead><tr>{ths}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")
