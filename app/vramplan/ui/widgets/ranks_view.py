"""The per-rank view: each distinct pipeline stage of the plan (the estimate's `ranks` section,
report/ranks.py) as a small table, with a bar per rank for its device memory against the memory
limit (the line), and the rank that decides the verdict. Hidden for plans with one kind of rank.
"""
from __future__ import annotations

import html
from typing import Any, Mapping

import ipywidgets as W

from . import looks as L
from ...charts import theme
from ...report.ranks import ROLES, deciding_rank, limit_of, rank_rows
from ...vocab import phase_label
from ..state.i18n import _
from .section import section
from ..state.text import size

_e = html.escape
PAD = " style='padding:3px 0 3px 10px;white-space:nowrap'"   # a gap between the columns
WRAP = " style='padding:3px 0 3px 10px'"   # words (what a stage holds, its phase) may wrap
# the limit line (2 px) drawn at the track's end reaches 2 px past it: room for it in the cell
BAR_CELL = " style='padding:3px 2px 3px 10px;white-space:nowrap'"
BAR_PX = 120          # the bar's width; the limit line sits at limit / scale of it
FIT, OVER = theme.FIT_COLOR, theme.NO_FIT_COLOR      # the charts' colours (charts/theme.py)


def _bar(used: int, limit: int | None, scale: int, fits: bool) -> str:
    """A bar of `used` bytes on a `scale`-byte track, the limit as a vertical line."""
    w = round(BAR_PX * used / scale) if scale else 0
    line = "" if not limit else (
        f"<span class='vp-rank-limit' style='position:absolute;left:{round(BAR_PX * limit / scale)}px;"
        f"top:-2px;bottom:-2px;border-left:2px solid {theme.STRONG_INK}'></span>")
    return (f"<span class='vp-rank-bar' style='position:relative;display:inline-block;"
            f"width:{BAR_PX}px;height:10px;background:{theme.GRID}'>"
            f"<span style='position:absolute;left:0;top:0;bottom:0;width:{w}px;"
            f"background:{FIT if fits else OVER}'></span>{line}</span>")


def ranks_html(est: Mapping[str, Any] | None) -> str:
    """The table for an estimate's JSON (`Estimate.to_dict()`); '' without ranks."""
    rows = rank_rows(est or {})
    if not rows:
        return ""
    limit = limit_of(est)
    scale = max([r["device_used"] for r in rows] + [limit or 0]) or 1
    head = "".join(f"<th style='padding:3px 0 3px {10 if i else 0}px;white-space:nowrap;"
                   f"text-align:{'right' if i in (2, 4, 5, 6) else 'left'}'>{_e(h)}</th>"
                   for i, h in enumerate((_("Rank"), _("Holds"), _("In flight"), _("Peak phase"),
                                          _("Allocated"), _("Reserved"), _("Device used"), "")))
    body = "".join(
        f"<tr><td>{_e(r['rank'])}</td><td{WRAP}>{_e(_(ROLES[r['role']]))}</td>"
        f"<td class='vp-num'{PAD}>{r['in_flight']}</td>"
        f"<td{WRAP}>{_e(_(phase_label(str(r['peak_phase'] or '-'))))}</td>"
        f"<td class='vp-num'{PAD}>{_e(size(r['allocated']))}</td>"
        f"<td class='vp-num'{PAD}>{_e(size(r['reserved']))}</td>"
        f"<td class='vp-num'{PAD}>{_e(size(r['device_used']))}</td>"
        f"<td{BAR_CELL}>{_bar(r['device_used'], limit, scale, r['fits'])}</td></tr>"
        for r in rows)
    rank = deciding_rank(est)
    by = (f"<div class='vp-hint'>{_e(_('decided by {rank}, the rank with the most memory').format(rank=rank))}"
          "</div>") if rank else ""
    note = _("Each stage holds its blocks; stage 0 also the embedding and the most micro-batches "
             "in flight, the last stage the head, logits and loss. The bar is device memory used "
             "against the memory limit (the line).")
    # eight columns need ~720 px: on a phone (390 px) the table scrolls sideways in its own
    # box instead of being cut at the card's edge with the figures and the limit line
    return (f"<div class='vp-ranks-scroll' style='overflow-x:auto;max-width:100%'>"
            f"<table class='vp-table vp-ranks'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>{by}<div class='vp-hint'>{_e(note)}</div>")


class RanksView(W.VBox):
    """`RanksView(state)`; `render()` after each estimate shows the state's plan per rank."""

    def __init__(self, state):
        self.state = state
        self.body = L.html()
        self.body.add_class("vp-ranks-body")     # held to the card's width (style.py)
        super().__init__([section(_("Memory per rank (pipeline stages)"), self.body)])
        self.layout.display = "none"

    def render(self) -> None:
        text = ranks_html(self.state.result)
        if self.body.value != text:
            self.body.value = text
        self.layout.display = "" if text else "none"
