"""The white card every column is built from."""
from __future__ import annotations

import html

import ipywidgets as W

from . import looks as L


def section(title: str | None, *children: W.Widget, cls: str = "",
            layout: W.Layout | None = None) -> W.VBox:
    """A card with an optional small-caps title. `layout`: a shared one (`looks.shared`) for
    a card that is never hidden by its layout (default: its own)."""
    kids = ([L.html(f'<div class="vp-section-title">{html.escape(title)}</div>')]
            if title else [])
    box = W.VBox(kids + list(children)) if layout is None else \
        W.VBox(kids + list(children), layout=layout)
    box.add_class("vp-section")
    if cls:
        box.add_class(cls)
    return box
