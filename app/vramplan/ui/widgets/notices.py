"""Page notices (a link's problems, an unknown GPU with the ids to pick instead, what was just
applied) and the undo button, above the results."""
from __future__ import annotations

import ipywidgets as W

from . import looks as L
from ..state.i18n import _, msg, msg_joined
from ..state.text import message_html


def notice_text(n) -> str:
    """A notice in the page's language (its values translated where they are messages)."""
    if not n.template:
        return msg(n.text)
    return _(n.template).format(**{k: msg_joined(v) for k, v in n.params})


class NoticeBar(W.VBox):
    def __init__(self, state):
        self.state = state
        self.text = L.html()
        self.choices = W.Box(layout=W.Layout(flex_flow="row wrap"))
        self.choices.add_class("vp-choices")
        self.undo = L.button(description=_("Undo"), icon="",
                             tooltip=_("Bring back the plan before the last change"))
        self.undo.add_class("vp-undo")
        self.undo.on_click(lambda _: self.state.undo())
        self._buttons: dict[str, W.Button] = {}
        super().__init__([self.text, self.choices])
        self.add_class("vp-notices")

    def _button(self, gpu: str) -> W.Button:
        if gpu not in self._buttons:
            dev = self.state.db.get(gpu)
            b = L.button(description=dev.name, tooltip=gpu)
            b.add_class("vp-choice")
            b.on_click(lambda _, g=gpu: self.state.set_gpu(g))
            self._buttons[gpu] = b
        return self._buttons[gpu]

    def render(self) -> None:
        st = self.state
        html = "".join(message_html(notice_text(n), "error" if n.kind == "error" else "info")
                       for n in st.notices)
        if self.text.value != html:
            self.text.value = html
        kids = [self._button(g) for n in st.notices for g in n.choices]
        if list(self.choices.children) != kids:
            self.choices.children = kids
        self.layout.display = "" if st.notices else "none"
        self.undo.disabled = not st.can_undo

    @property
    def value(self) -> str:
        return self.text.value
