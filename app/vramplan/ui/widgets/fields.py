"""One form field as a widget: a label (with its unit), an input for the field's kind and an
inline message. It shows a `scenario.form.Field` and reports edits as draft values; it decides
nothing (which fields apply, their choices and defaults are the form's).

Kinds: int / number / size / resolution / free lists -> a text box; choice -> a dropdown;
bool -> a checkbox; multi with choices -> one checkbox per choice; the structured workload
keys -> `objects.py`.
"""
from __future__ import annotations

import html
from typing import Any, Callable

import ipywidgets as W

from ...scenario.rules import OFFLOAD, OPTIONS
from . import looks as L
from ..state import text as T
from ..state.i18n import _, msg

# how a choice reads on the page (the value is the scenario's); unknown values as they are
CHOICE_LABELS = {
    "task": {"train": "train · full training / fine-tuning",
             "lora": "lora · LoRA adapters, frozen base",
             "qlora": "qlora · LoRA on a quantised base",
             "forward": "forward · one inference pass", "generate": "generate · prefill + decode",
             "serve": "serve · engine with a KV pool", "denoise": "denoise · diffusion sampling",
             "load": "load · weights resident only", "render": "render · a graphics frame",
             "volume": "volume · 3-D voxel arrays", "array": "array · scientific arrays"},
    "msaa": {1: "off (1 sample)", 2: "2×", 4: "4×", 8: "8×", 16: "16×"},
    "parallel.zero": {0: "0 · none", 1: "1 · optimizer", 2: "2 · + gradients",
                      3: "3 · + weights (FSDP)"},
}
BOX_LABELS = {"compile": "torch.compile", "chunked-loss": "Chunked loss",
              "expandable-segments": "Expandable segments", "params": "Parameters",
              "model": "Whole components", "vae-tiling": "VAE tiling",
              "vae-slicing": "VAE slicing", "fused-qkv": "Fused QKV",
              "float8-linears": "Float8 linears", "fused-optimizer": "Fused optimizer"}
BOX_DOCS = {**OPTIONS, **OFFLOAD}
WIDE = ("multi", "object")          # kinds that take the whole row
WIDE_KEYS = ("task",)                # choices too long for half a row
LABEL_CHARS = 24                     # a unit longer than this label allows goes in the hint


def css_key(key: str) -> str:
    return key.replace(".", "-")


def unit_in_label(field) -> bool:
    unit = field.unit
    return bool(unit) and unit.lower() not in field.label.lower() and field.kind != "size" \
        and len(field.label) + len(unit) + 3 <= LABEL_CHARS


def label_text(field) -> str:
    """The field's label (and unit) in the page's language (the form's English is the key)."""
    return f"{_(field.label)} ({_(field.unit)})" if unit_in_label(field) else _(field.label)


def choice_options(field) -> list:
    names = CHOICE_LABELS.get(field.key, {})
    return [(_(names.get(c, T.show("choice", c))), c) for c in (field.choices or ())]


def default_text(field) -> str:
    d = field.default
    if d is None or d == [] or isinstance(d, (dict, list)) and field.kind == "object":
        return ""
    if isinstance(d, int) and not isinstance(d, bool) and field.kind in ("int", "size"):
        return T.count(d) if field.kind == "int" else T.show("size", d)
    return T.show(field.kind, d)


def set_if_changed(w, name: str, v) -> None:
    """Set a widget's trait only when the value differs (no echo event, no redraw)."""
    if getattr(w, name) != v:
        setattr(w, name, v)


def show_message(box, text: str | None) -> str:
    """A field box's problem (`text`, None or '' for none) as HTML in `box.message`, made on
    the first problem and blanked after; kept in `box._error` and returned. FieldBox and
    stack_field.StackBox share it."""
    html_text = T.message_html(msg(text)) if text else ""
    if html_text and box.message is None:
        box.message = L.html()
    if box.message is not None:
        set_if_changed(box.message, "value", html_text)
    box._error = html_text
    return html_text


class FieldBox(W.VBox):
    """The widget of one field key. `show(field, value, error)` renders it; edits call
    `on_edit(key, value)` (None: cleared, back to the default)."""

    def __init__(self, key: str, on_edit: Callable[[str, Any], None]):
        self.key, self.on_edit = key, on_edit
        self.kind: str | None = None
        self.input: W.Widget | None = None
        self.boxes: dict[Any, W.Checkbox] = {}
        self._syncing = False
        self.label = L.html()
        self.message: W.HTML | None = None      # made at the first problem, then kept
        self._error = ""
        super().__init__([], layout=L.shared("layout"))
        self.add_class("vp-field")
        self.add_class("vp-f-" + css_key(key))

    # ------------------------------------------------------------ building
    def _build(self, field) -> None:
        kind = field.kind
        if kind == "bool":
            w = L.checkbox(description=_(field.label), indent=False)
        elif kind == "choice" and field.choices:
            w = L.dropdown(options=choice_options(field))
        elif kind == "multi" and field.choices is not None:
            w = W.Box(layout=L.shared("layout"))        # .vp-boxes wraps its row
            w.add_class("vp-boxes")
        else:
            w = L.text(continuous_update=False)
        if kind != "multi" or field.choices is None:
            w.observe(self._changed, "value")
        if self.input is not None:
            self.input.close()
        self.kind, self.input = kind, w
        self._place()
        wide = kind in WIDE or kind == "bool" or self.key in WIDE_KEYS
        (self.add_class if wide else self.remove_class)("vp-wide")

    def _checkbox(self, name) -> W.Checkbox:
        if name not in self.boxes:
            b = L.checkbox(description=_(BOX_LABELS.get(name, T.label_of(name))), indent=False,
                           tooltip=_(BOX_DOCS.get(name, "")))
            b.observe(self._box_changed, "value")
            self.boxes[name] = b
        return self.boxes[name]

    # ------------------------------------------------------------ state -> widget
    def show(self, field, value: Any, error: str = "", given: bool = False) -> None:
        """Render `field` holding `value` (the draft's when `given`, else the plan's)."""
        kind = "multi" if field.kind == "multi" and field.choices is not None else field.kind
        if self.input is None or kind != self.kind:
            self._build(field)
        self._syncing = True
        try:
            lab = "" if field.kind == "bool" else label_text(field)
            self._set(self.label, "value", f"<div class='vp-label' title='{html.escape(_(field.doc))}'>"
                      f"{html.escape(lab)}</div>" if lab else "")
            w = self.input
            if field.kind == "bool":
                self._set(w, "value", bool(value))
            elif isinstance(w, W.Dropdown):
                opts = choice_options(field)
                if list(w.options) != opts:
                    w.options = opts
                vals = [o[1] for o in opts]
                self._set(w, "value", value if value in vals else (
                    field.default if field.default in vals else (vals[0] if vals else None)))
            elif isinstance(w, W.Box):
                names = list(field.choices or ())
                kids = [self._checkbox(n) for n in names]
                if list(w.children) != kids:
                    w.children = kids
                chosen = set(value or ())
                for n in names:
                    self._set(self.boxes[n], "value", n in chosen)
            else:
                if given and isinstance(value, str):
                    txt = value                 # kept as typed (a rejected value too)
                elif isinstance(value, int) and not isinstance(value, bool) and kind == "int":
                    txt = T.count(value)
                else:
                    txt = T.show(field.kind, value)
                self._set(w, "value", txt)
                dflt = default_text(field)
                unit = "" if unit_in_label(field) or not field.unit or field.kind == "size" \
                    else f" {_(field.unit)}"
                self._set(w, "placeholder", _("default {value}").format(value=f"{dflt}{unit}")
                          if dflt else unit.strip())
            self.set_error(error)
        finally:
            self._syncing = False

    _set = staticmethod(set_if_changed)

    def _place(self) -> None:
        """The children that carry something: the label (a check box has its own), the
        input, the message while there is a problem."""
        kids = ([] if self.kind == "bool" else [self.label]) + [self.input] + \
            ([self.message] if self._error else [])
        if list(self.children) != kids:
            self.children = kids

    def set_error(self, text: str | None) -> None:
        show_message(self, text)
        self._place()
        w = self.input
        if w is not None:
            (w.add_class if text else w.remove_class)("vp-input-error")

    @property
    def error(self) -> str:
        return self._error

    @property
    def value(self) -> Any:
        """What the input holds (text, choice, bool or the ticked names)."""
        if isinstance(self.input, W.Box):
            return [n for n, b in self.boxes.items() if b.value and b in self.input.children]
        return None if self.input is None else self.input.value

    # ------------------------------------------------------------ widget -> state
    def _changed(self, change) -> None:
        if self._syncing:
            return
        v = change["new"]
        if isinstance(self.input, W.Text):
            v = T.parse(self.kind, v)
        self.on_edit(self.key, v)

    def _box_changed(self, change) -> None:
        if not self._syncing:
            self.on_edit(self.key, self.value or None)

    def set(self, value: Any) -> None:
        """As a person would: text for a text box, a choice, a bool, names for check boxes."""
        if isinstance(self.input, W.Box):
            names = set(value if isinstance(value, (list, tuple, set)) else [value])
            self._syncing = True
            for n, b in self.boxes.items():
                b.value = n in names
            self._syncing = False
            self.on_edit(self.key, self.value or None)
        else:
            self.input.value = value
