"""The white card every column is built from."""
from __future__ import annotations

import html

import ipywidgets as W

from . import looks as L


def section(title: str | None, *children: W.Widget, cls: str = "") -> W.VBox:
    """A card with an optional small-caps title."""
    kids = ([L.html(f'<div class="vp-section-title">{html.escape(title)}</div>')]
            if title else [])
    box = W.VBox(kids + list(children))
    box.add_class("vp-section")
    if cls:
        box.add_class(cls)
    return box
