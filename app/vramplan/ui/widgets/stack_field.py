"""The "Software" field (`stack`: NAME or NAME@VERSION): a choice of the stacks that run the
plan's model family and task, and a version box offering that stack's change points ("latest"
when empty: the name alone, taken at its newest change point). It decides nothing: the names
and versions are the form's field choices (`scenario.form` from `catalog.stacks.choices`), a
typed version is checked by the scenario (`catalog.stacks.read_stack`), and what the stack is
comes from `catalog.stacks`. Same interface as `fields.FieldBox`: `show(field, value, error,
given)`, edits through `on_edit(key, value)`.
"""
from __future__ import annotations

import html
from typing import Any, Callable

import ipywidgets as W

from ...catalog import stacks
from . import looks as L
from .fields import css_key, label_text, set_if_changed, show_message
from ..state.i18n import _

DEFAULT = stacks.DEFAULT


def split(value: Any) -> tuple[str, str]:
    """'torchtitan@2025-06' -> ('torchtitan', '2025-06'); None -> ('pytorch', '')."""
    name, _at, ver = str(value or DEFAULT).strip().partition("@")
    return name.strip().lower() or DEFAULT, ver.strip()


def grouped(choices) -> dict[str, list[str]]:
    """The field's choices ('hf', 'hf@2024-07', ...) as {name: [versions, newest first]}."""
    out: dict[str, list[str]] = {}
    for c in choices or ():
        name, ver = split(c)
        out.setdefault(name, [])
        if ver:
            out[name].append(ver)
    return out


def joined(name: str, version: str) -> str | None:
    """The key's value for a name and a version ('' or 'latest': the name alone); None for
    the default stack without a version (the draft leaves the key out)."""
    version = version.strip()
    if version.lower() in ("", "latest", _("latest").lower()):
        return None if name == DEFAULT else name
    return f"{name}@{version}"


def about_html(name: str) -> str:
    """What the stack is and where its mechanisms change (the data file's words, in English
    like the estimate's notes)."""
    if name not in stacks.names():
        return ""
    what = stacks.resolve(name if name != DEFAULT else None).what
    points = "; ".join(f"{since} {mech} {'on' if on else 'off'}"
                       for since, mech, on in stacks.change_points(name))
    text = what + (f". {points}" if points else "")
    return (f"<div class='vp-hint'>{html.escape(_('Change points'))}: "
            f"<span lang='en'>{html.escape(text)}</span></div>")


class StackBox(W.VBox):
    """The `stack` field: the name dropdown and the version box side by side, a hint below."""

    def __init__(self, key: str, on_edit: Callable[[str, Any], None]):
        self.key, self.on_edit = key, on_edit
        self._syncing = False
        self._error = ""
        self.label = L.html()
        self.name = L.dropdown(options=[(DEFAULT, DEFAULT)], value=DEFAULT)
        self.name.observe(self._name_changed, "value")
        self.input = self.name          # what FieldBox users read (`.input.options`)
        # made when a stack with versions is first shown (the default plan's field is three
        # models, as a FieldBox: tests/test_ui_models.py)
        self._version: W.Combobox | None = None
        self._inputs: W.HBox | None = None
        self._about: W.HTML | None = None
        self.message: W.HTML | None = None
        self._kids: list = [self.label, self.name]
        super().__init__(self._kids, layout=L.shared("layout"))
        for cls in ("vp-field", "vp-wide", "vp-f-" + css_key(key)):
            self.add_class(cls)

    @property
    def version(self) -> W.Combobox:
        if self._version is None:
            self._version = W.Combobox(options=[], value="", ensure_option=False,
                                       continuous_update=False, layout=L.shared("layout"),
                                       style=L.shared("text"))
            self._version.observe(self._version_changed, "value")
        return self._version

    @property
    def inputs(self) -> W.HBox:
        if self._inputs is None:
            self._inputs = W.HBox([self.name], layout=L.shared("layout"))
            self._inputs.add_class("vp-stack-inputs")
        return self._inputs

    @property
    def about(self) -> W.HTML:
        if self._about is None:
            self._about = L.html()
        return self._about

    # ------------------------------------------------------------ state -> widget
    def show(self, field, value: Any, error: str = "", given: bool = False) -> None:
        name, ver = split(value)
        by_name = grouped(field.choices)
        names = list(by_name) or [DEFAULT]
        if name not in names:           # a link's stack for another plan, or an unknown one
            names.append(name)
        versions = by_name.get(name, [])
        self._syncing = True
        try:
            self._set(self.label, "value", f"<div class='vp-label' title='"
                      f"{html.escape(_(field.doc))}'>{html.escape(label_text(field))}</div>")
            opts = [(n, n) for n in names]
            if list(self.name.options) != opts:
                self.name.options = opts
            self._set(self.name, "value", name)
            if versions or ver:
                if list(self.version.options) != versions:
                    self.version.options = versions
                self._set(self.version, "value", ver)
                self._set(self.version, "placeholder", _("latest"))
                self._set(self.version, "tooltip", _("Version: a change point, or your own "
                                                     "(the nearest earlier change point "
                                                     "applies)"))
            about = about_html(name) if name != DEFAULT else ""
            if versions or ver:
                kids = [self.name, self.version]
                if list(self.inputs.children) != kids:
                    self.inputs.children = kids
            if about:
                self._set(self.about, "value", about)
            self._kids = [self.label] + ([self.inputs] if versions or ver else [self.name]) + \
                ([self.about] if about else [])
            self.set_error(error)
        finally:
            self._syncing = False

    _set = staticmethod(set_if_changed)

    def set_error(self, text: str | None) -> None:
        html_text = show_message(self, text)
        kids = self._kids + ([self.message] if html_text else [])
        if list(self.children) != kids:
            self.children = kids
        (self.name.add_class if text else self.name.remove_class)("vp-input-error")

    @property
    def error(self) -> str:
        return self._error

    @property
    def value(self) -> str:
        """The key's value the field shows ('torchtitan@2025-06', 'hf', 'pytorch')."""
        ver = self._version.value if self._version is not None and \
            self._version in self.children_inputs() else ""
        return joined(self.name.value or DEFAULT, ver or "") or DEFAULT

    def children_inputs(self) -> tuple:
        """The inputs on show (the name, and the version box where the stack has versions)."""
        return tuple(self._inputs.children) if self._inputs in self.children else (self.name,)

    # ------------------------------------------------------------ widget -> state
    def _name_changed(self, change) -> None:
        if not self._syncing:           # another stack: its own versions, latest first
            self.on_edit(self.key, joined(change["new"] or DEFAULT, ""))

    def _version_changed(self, change) -> None:
        if not self._syncing:
            self.on_edit(self.key, joined(self.name.value or DEFAULT, change["new"] or ""))

    def set(self, value: Any) -> None:
        """As a person would: pick the name, then type or pick the version."""
        name, ver = split(value)
        if name != self.name.value:
            self.name.value = name
        if ver and ver != (self.version.value or ""):
            self.version.value = ver
