"""Editors of the structured workload keys: `render_targets` (the colour target's format and
count over the form's default list), `arrays` (one array: shape and dtype) and `work_buffers`
(FFT and solver). Any other object a link or a scenario file gives (several arrays, a custom
target list, `video`) is shown as JSON with a button that clears it. Same interface as
`fields.FieldBox`: `show(field, value, error, given)`, edits through `on_edit(key, value)`.
"""
from __future__ import annotations

import copy
import html
import json
from typing import Any, Callable

import ipywidgets as W

from ...scenario.extra import ARRAY_DTYPES, FFT_MODES, PIXEL_FORMATS, SOLVERS
from . import looks as L
from ..state import text as T
from .fields import css_key
from ..state.i18n import _, msg

# colour formats of a render target (the depth formats are d16, d24s8, d32f, d32fs8)
COLOUR_FORMATS = tuple(f for f in PIXEL_FORMATS if not (f[0] == "d" and f[1:2].isdigit()))
EDITED = ("render_targets", "arrays", "work_buffers")


def _dd(options, value=None) -> W.Dropdown:
    return L.dropdown(options=list(options), value=value)


def _txt(ph: str = "") -> W.Text:
    return L.text(placeholder=ph, continuous_update=False)


class ObjectBox(W.VBox):
    def __init__(self, key: str, on_edit: Callable[[str, Any], None]):
        self.key, self.on_edit = key, on_edit
        self._syncing = False
        self.field = None
        self.current: Any = None
        self.label = L.html()
        self.message = W.HTML(layout=W.Layout(display="none"))
        self.summary = L.html()
        self.clear = W.Button(description=_("Clear"), layout=W.Layout(width="auto"))
        self.clear.add_class("vp-small-btn")
        self.clear.on_click(lambda _: self.on_edit(self.key, None))
        self.parts: dict[str, W.Widget] = {}
        if key == "render_targets":
            self.parts = {"format": _dd(COLOUR_FORMATS, "rgba8"), "count": _txt("1-16")}
            names = (_("Colour format (+ depth)"), _("Colour targets"))
        elif key == "arrays":
            self.parts = {"shape": _txt(_("e.g. 4096 × 4096")),
                          "dtype": _dd(ARRAY_DTYPES, "float32")}
            names = (_("Array shape"), _("Array dtype"))
        elif key == "work_buffers":
            self.parts = {"fft": _dd([(_(m), m) for m in FFT_MODES], "none"),
                          "solver": _dd([(_(m), m) for m in SOLVERS], "none")}
            names = (_("FFT buffers"), _("Iterative solver"))
        else:
            names = ()
        cells = []
        for (name, w), lab in zip(self.parts.items(), names):
            w.observe(self._changed, "value")
            cell = L.vbox([L.html(f"<div class='vp-label'>{html.escape(lab)}</div>"), w])
            cell.add_class("vp-field")
            cell.add_class(f"vp-f-{css_key(key)}-{name}")
            cells.append(cell)
        self.editor = W.GridBox(cells)
        self.editor.add_class("vp-grid")
        self.custom = W.HBox([self.summary, self.clear])
        self.custom.add_class("vp-custom")
        super().__init__([self.label, self.editor, self.custom, self.message])
        self.add_class("vp-field")
        self.add_class("vp-wide")
        self.add_class("vp-f-" + css_key(key))

    # ------------------------------------------------------------ value <-> editor
    def _editable(self, value: Any) -> bool:
        if self.key == "render_targets":
            return isinstance(value, list) and len(value) == 2 and \
                value[0].get("format") in COLOUR_FORMATS and value[1].get("format") not in \
                COLOUR_FORMATS
        if self.key == "arrays":
            return value in (None, []) or isinstance(value, list) and len(value) == 1 and \
                set(value[0]) <= {"name", "shape", "dtype", "count"} and \
                value[0].get("count", 1) == 1
        if self.key == "work_buffers":
            d = dict(self.field.default or {}) if self.field else {}
            return isinstance(value, dict) and all(value.get(k, d.get(k)) == d.get(k)
                                                   for k in set(d) | set(value)
                                                   if k not in ("fft", "solver"))
        return False

    def _fill(self, value: Any) -> None:
        p = self.parts
        if self.key == "render_targets":
            p["format"].value = value[0]["format"]
            p["count"].value = str(value[0].get("count", 1))
        elif self.key == "arrays":
            a = value[0] if value else {}
            p["shape"].value = T.show("resolution", a.get("shape")) if a.get("shape") else ""
            p["dtype"].value = a.get("dtype", "float32")
        elif self.key == "work_buffers":
            p["fft"].value = value.get("fft", "none")
            p["solver"].value = value.get("solver", "none")

    def _build(self) -> Any:
        p = self.parts
        if self.key == "render_targets":
            base = copy.deepcopy(self.current if self._editable(self.current)
                                 else self.field.default)
            base[0]["format"] = p["format"].value
            base[0]["count"] = T.parse("int", p["count"].value) or 1
            return base
        if self.key == "arrays":
            shape = T.parse("resolution", p["shape"].value)
            if shape is None:
                return None
            return [{"name": "a", "shape": shape, "dtype": p["dtype"].value}]
        if self.key == "work_buffers":
            return {"fft": p["fft"].value, "solver": p["solver"].value}
        return self.current

    # ------------------------------------------------------------ state -> widget
    def show(self, field, value: Any, error: str = "", given: bool = False) -> None:
        self.field, self.current = field, value
        self._syncing = True
        try:
            edit = self.key in EDITED and self._editable(value if value is not None
                                                         else field.default)
            self.label.value = f"<div class='vp-label'>{html.escape(_(field.label))}</div>"
            self.editor.layout.display = "" if edit else "none"
            self.custom.layout.display = "none" if edit else ""
            if edit:
                self._fill(value if value is not None else field.default)
            else:
                text = json.dumps(value, separators=(", ", ": "))
                self.summary.value = (f"<code class='vp-code'>{html.escape(T.shorten(text))}"
                                      "</code>" if value is not None else
                                      f"<span class='vp-hint'>{_('none (a scenario file or a link can set it)')}</span>")
                self.clear.layout.display = "" if given else "none"
            self.layout.display = "" if edit or given else "none"
            self.set_error(error)
        finally:
            self._syncing = False

    def set_error(self, text: str | None) -> None:
        text = msg(text) if text else text
        if self.message.value != T.message_html(text):
            self.message.value = T.message_html(text)
        self.message.layout.display = "" if text else "none"

    @property
    def error(self) -> str:
        return self.message.value

    def _changed(self, change) -> None:
        if not self._syncing:
            self.on_edit(self.key, self._build())

    def set(self, value: Any) -> None:
        """Tests: {"format": "rgba16f"}, {"shape": "8192 x 8192", "dtype": ...}, ..."""
        for k, v in (value or {}).items():
            self.parts[k].value = v
