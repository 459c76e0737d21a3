"""The left column's workload sections: the model picker, then one widget per field the
scenario's form gives for the draft (`PlanState.fields`, from `vramplan.scenario.form`), in
the form's order, grouped into sections. A field the form does not list is not on the page;
a section without fields is hidden. Each edit goes to `PlanState.set`; the rejection of a key
is shown under its field, the value kept as typed.
"""
from __future__ import annotations

from typing import Any

import ipywidgets as W

from . import looks as L
from .fields import FieldBox
from ..state.i18n import N_, _, msg
from .model_picker import ModelPicker
from .objects import ObjectBox
from .section import section
from .stack_field import StackBox
from ..state.state import PlanState, draft_key
from ..state.text import message_html

# where each field goes (presentation only; which fields exist is the form's)
HOW = ("precision", "optimizer", "gradient_accumulation", "checkpointing", "attention",
       "offload", "options")
SECTIONS = (("workload", N_("Workload")), ("how", N_("How it runs")),
            ("serving", N_("Serving engine")), ("parallel", N_("Parallelism (per-GPU figures)")))
SKIP = ("model", "architecture", "gpu")     # the model picker and the GPU picker


def section_of(key: str) -> str:
    top = key.split(".")[0]
    if top in ("serving", "parallel"):
        return top
    if key in HOW or top == "lora":
        return "how"
    return "workload"


def field_errors(errors: dict, keys: list[str]) -> tuple[dict, dict]:
    """(problems by the field that shows them, each naming its key: 'arrays[0].shape' -> the
    arrays field; the problems no shown field takes)."""
    by: dict[str, str] = {}
    rest: dict[str, str] = {}
    shown = dict.fromkeys(keys, True)
    for k, text in errors.items():
        fk = k if k in shown else draft_key(k, shown)
        top = k.split(".")[0]
        if fk is None and top in ("lora", "parallel", "serving"):
            fk = next((x for x in keys if x.startswith(top + ".")), None)
        if fk is None:
            rest[k] = text
        else:
            by.setdefault(fk, f"{k}: {text}" if k else text)
    return by, rest


class WorkloadForm(W.VBox):
    """The form. `later`: sections whose fields are made only at `show_all()` (below the first
    screen: the page makes them after its first paint, fewer models for the browser to fetch
    first); until then such a section is hidden."""

    def __init__(self, state: PlanState, later: tuple[str, ...] = ()):
        self.state = state
        self.later = set(later)
        self.picker = ModelPicker(state)
        self.widgets: dict[str, Any] = {}
        self.message = L.html()
        self.grids = {name: W.GridBox(layout=L.shared("layout")) for name, _title in SECTIONS}
        for g in self.grids.values():
            g.add_class("vp-grid")
        self.sections = {}
        for name, title in SECTIONS:
            kids = [self.picker, self.grids[name], self.message] if name == "workload" \
                else [self.grids[name]]
            self.sections[name] = section(_(title), *kids, cls=f"vp-sec-{name}")
        super().__init__(list(self.sections.values()), layout=L.shared("layout"))
        self.add_class("vp-workload")
        self.render()

    def widget(self, key: str):
        if key not in self.widgets:
            cls = ObjectBox if key in ("render_targets", "arrays", "work_buffers", "video",
                                       "patch") else StackBox if key == "stack" else FieldBox
            self.widgets[key] = cls(key, self._edit)
        return self.widgets[key]

    def render(self) -> None:
        st = self.state
        keys = [f.key for f in st.fields if f.key not in SKIP]
        errs, rest = field_errors(st.errors, keys + list(SKIP))
        groups: dict[str, list] = {name: [] for name, _title in SECTIONS}
        for f in st.fields:
            if f.key in SKIP:
                continue
            if f.kind == "object" and f.key not in ("render_targets", "arrays", "work_buffers") \
                    and not st.given(f.key):
                continue                   # nothing to edit here unless a link set it
            if section_of(f.key) in self.later:
                continue                   # made at show_all()
            w = self.widget(f.key)
            w.show(f, st.value(f.key), errs.get(f.key, ""), given=st.given(f.key))
            groups[section_of(f.key)].append(w)
        for name, _title in SECTIONS:
            if list(self.grids[name].children) != groups[name]:
                self.grids[name].children = groups[name]
            self.sections[name].layout.display = "" if groups[name] or name == "workload" \
                else "none"
        text = "; ".join(f"{k}: {msg(v)}" if k else msg(v) for k, v in rest.items())
        self.message.value = message_html(text)
        self.picker.render()

    def show_all(self) -> None:
        """Make and show the sections left for later."""
        if self.later:
            self.later = set()
            self.render()

    # ------------------------------------------------------------ widgets -> state
    def _edit(self, key: str, value: Any) -> None:
        self.state.set(key, value)

    # ------------------------------------------------------------ convenience for tests
    @property
    def fields(self) -> dict:
        """The widgets on the page by key."""
        order = [w for g in self.grids.values() for w in g.children]
        by_widget = {id(w): k for k, w in self.widgets.items()}
        return {by_widget[id(w)]: w for w in order}

    def set(self, key: str, value: Any) -> None:
        """Set a control as a person would ('batch_size', 'model', 'task', 'params',
        'family', 'offload' ...)."""
        p = self.picker
        if key == "model":
            p.model.value = value
        elif key == "params":
            p.family.value = "size-only"
            p.size.value = value
        elif key == "family":
            p.family.value = value
        else:
            self.fields[key].set(value)

    @property
    def errors(self) -> dict[str, str]:
        out = {k: w.error for k, w in self.fields.items() if w.error}
        if self.message.value:
            out[""] = self.message.value
        if self.picker.message.value:
            out["model"] = self.picker.message.value
        return out
