"""Layout and style objects shared between leaf widgets.

Every ipywidgets widget makes its own `Layout` and style model unless given one, and the
browser fetches each model's state when the page loads (Voila's widget manager gives the
kernel 4 s for all of them, then asks one widget at a time). A field of the form was eleven
models (box, label, input and message, each with a layout and a style); with these shared
objects it is three. ipywidgets lets widgets share a layout or a style (one model, many views).

The rule that keeps sharing safe: a shared object is never changed in place. A widget whose
layout changes (`w.layout.display = "none"` to hide it) gets its own layout, or is taken out
of its parent's children instead. A shared object closed meanwhile (`Widget.close_all()` in a
test) is made again.
"""
from __future__ import annotations

import ipywidgets as W
from ipywidgets.widgets.widget_bool import CheckboxStyle
from ipywidgets.widgets.widget_description import DescriptionStyle
from ipywidgets.widgets.widget_string import HTMLStyle, TextStyle

_SHARED: dict[str, W.Widget] = {}
_KINDS = {"layout": W.Layout, "html": HTMLStyle, "text": TextStyle,
          "checkbox": CheckboxStyle, "description": DescriptionStyle,
          "button": W.ButtonStyle}
_AUTO_WIDTH = {"width": "auto"}


def shared(kind: str) -> W.Widget:
    """The one unchanged object of `kind` ("layout", "html", "text", "checkbox",
    "description", "button", "auto-width")."""
    w = _SHARED.get(kind)
    if w is None or w.comm is None:
        w = W.Layout(**_AUTO_WIDTH) if kind == "auto-width" else _KINDS[kind]()
        _SHARED[kind] = w
    return w


def html(value: str = "") -> W.HTML:
    """An HTML widget with the shared layout and style (hide it by leaving it out)."""
    return W.HTML(value, layout=shared("layout"), style=shared("html"))


def text(**kw) -> W.Text:
    return W.Text(layout=shared("layout"), style=shared("text"), **kw)


def dropdown(**kw) -> W.Dropdown:
    return W.Dropdown(layout=shared("layout"), style=shared("description"), **kw)


def checkbox(**kw) -> W.Checkbox:
    return W.Checkbox(layout=shared("layout"), style=shared("checkbox"), **kw)


def button(**kw) -> W.Button:
    """A button as wide as its text."""
    return W.Button(layout=shared("auto-width"), style=shared("button"), **kw)


def vbox(children=(), **kw) -> W.VBox:
    return W.VBox(list(children), layout=shared("layout"), **kw)
