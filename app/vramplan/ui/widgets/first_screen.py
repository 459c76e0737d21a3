"""The page's first screen as plain HTML, shown before the widgets have loaded.

Voila sends a page's outputs inside its HTML; a `text/html` output is drawn as soon as Voila's
script starts, while the widgets wait for the browser to connect to the kernel, fetch every
widget model's state and make the views (0.4-1 s more on the 2-core machine,
benchmarks/results/page-speed-2026-12-02c.txt). `App` therefore displays this snapshot just
before itself (`App._ipython_display_`): the header, an empty controls column and the verdict
card with its figures, the breakdown as static SVG (`charts.breakdown_svg`) and the legend,
the same strings the widgets hold. The page's own stylesheet (a widget) hides the snapshot
(`HIDE`) as soon as the page's widgets are on the screen, and in Voila the vramplan-lab
template's script takes it out of the page once the page's breakdown chart is drawn. (A CSS
`:has()` rule on <body> would need no widget, but it is re-checked on every change of the
page while the widgets are made.)

The snapshot's classes are the page's with `vpp-` for `vp-` (and so is its copy of the
stylesheet): it looks the same, and nothing that looks for the page's elements (`.vp-verdict`,
`.vp-breakdown`, the browser tests) finds the snapshot.
"""
from __future__ import annotations

import re

from .style import style_tag

_CLASS_ATTR = re.compile(r"""(class=)(['"])(.*?)\2""", re.S)
_VP = re.compile(r"(?<![\w-])vp-")
# plain <div>s stand in for the widget boxes (ipywidgets' .widget-vbox / .widget-hbox)
_BOXES = ("\n.vpp-app, .vpp-results, .vpp-estimate-panel, .vpp-section, .vpp-controls "
          "{ display: flex; flex-direction: column; }\n.vpp-top { display: flex; }\n"
          ".vpp-controls .vpp-section { min-height: 420px; }\n"
          ".vpp-top .vpp-version { margin-left: auto; }\n")
# in the page's own stylesheet: the snapshot goes once the page's widgets are on the screen
HIDE = "<style>.vpp-app { display: none !important; }</style>"


def renamed(html: str) -> str:
    """`html` with every class that starts `vp-` renamed `vpp-` (class attributes only)."""
    return _CLASS_ATTR.sub(lambda m: m[1] + m[2] + _VP.sub("vpp-", m[3]) + m[2], html)


def stylesheet() -> str:
    """The page's stylesheet for the snapshot's classes, and the box rules."""
    css = style_tag().removeprefix("<style>").removesuffix("</style>")
    return f"<style>{css.replace('.vp-', '.vpp-')}{_BOXES}</style>"


def first_screen_html(header: str, controls_title: str, card: list[str], lang: str) -> str:
    """The snapshot: `header` (the page's header HTML), a controls card titled
    `controls_title`, and the verdict card's parts in order (`card`: HTML strings)."""
    body = (f"<div class='vp-body'><div class='vp-controls'><div class='vp-section'>"
            f"<div class='vp-section-title'>{controls_title}</div></div></div>"
            f"<div class='vp-results'><div class='vp-estimate-panel'>"
            f"<div class='vp-section vp-estimate-card'>{''.join(card)}</div></div></div></div>")
    page = (f"<div class='vp-app vp-lang-{lang}' aria-hidden='true'>"
            f"<div class='vp-top'>{header}</div>{body}</div>")
    return stylesheet() + renamed(page)
