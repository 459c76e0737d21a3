"""Share and export: the link to this plan (`?` + `Scenario.to_query()`, exact and short), the
scenario and estimate as JSON downloads (data: URLs, no request leaves the page) and a
scenario.json upload (read with `vramplan.safejson.loads`; undo brings back the plan before).
"""
from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote

import ipywidgets as W

from .. import safejson
from ..errors import VramplanError
from .section import section
from .text import message_html

MAX_SCENARIO_BYTES = 1_000_000
_e = html.escape


def data_url(obj: Any) -> str:
    return "data:application/json;charset=utf-8," + quote(json.dumps(obj, indent=2))


def export_html(est: dict, query: str = "") -> str:
    sc = est.get("scenario") or {}
    link = ""
    if query:
        link = (f"<div class='vp-share'><span class='vp-k'>Link to this plan</span> "
                f"<a class='vp-share-link' href='?{_e(query)}'>?{_e(query)}</a></div>")
    return (
        f"{link}<div class='vp-downloads'>"
        f"<a class='vp-btn' download='scenario.json' href='{_e(data_url(sc))}'>"
        f"Download scenario.json</a>"
        f"<a class='vp-btn' download='estimate.json' href='{_e(data_url(est))}'>"
        f"Download estimate.json</a></div>"
        f"<details><summary>Scenario JSON</summary><pre class='vp-json vp-scenario-json'>"
        f"{_e(json.dumps(sc, indent=2))}</pre></details>"
        f"<details><summary>Estimate JSON</summary><pre class='vp-json vp-estimate-json'>"
        f"{_e(json.dumps(est, indent=2))}</pre></details>")


def read_scenario(data: bytes, name: str = "scenario.json") -> dict:
    """A scenario file's bytes -> the first scenario object (JSON or JSON Lines)."""
    if len(data) > MAX_SCENARIO_BYTES:
        raise VramplanError(f"{name} is {len(data):,} bytes; at most {MAX_SCENARIO_BYTES:,} "
                            "are read")
    text = safejson.decode_text(bytes(data), name)
    try:
        value = safejson.loads(text, name)
    except VramplanError:
        first = next((ln for ln in text.splitlines() if ln.strip()), "")
        value = safejson.loads(first, name)           # JSON Lines: the first plan
    if isinstance(value, list) and value and isinstance(value[0], dict):
        value = value[0]
    if not isinstance(value, dict):
        raise VramplanError(f"{name} must hold a scenario object, got {type(value).__name__}")
    return value


class ExportPanel(W.VBox):
    def __init__(self, state):
        self.state = state
        self.html = W.HTML()
        self.upload = W.FileUpload(accept=".json,.jsonl,application/json", multiple=False,
                                   description="Open scenario.json")
        self.message = W.HTML()
        self.upload.observe(self._on_upload, "value")
        super().__init__([section("Share and export", self.html, W.HBox(
            [self.upload], layout=W.Layout(flex_flow="row wrap")), self.message)])
        self.add_class("vp-export")
        self._shown = None

    def render(self) -> None:
        st = self.state
        if st.result is None or (st.result, st.query) == self._shown:
            return
        self._shown = (st.result, st.query)
        self.html.value = export_html(st.result, st.query)

    @property
    def value(self) -> str:
        return self.html.value

    def _on_upload(self, change) -> None:
        files = change["new"]
        if not files:
            return
        f = files[0]
        try:
            d = read_scenario(bytes(f["content"]), f.get("name") or "scenario.json")
        except VramplanError as exc:
            self.message.value = message_html(str(exc))
            return
        self.message.value = ""
        self.state.apply(d, label=f"Opened {f.get('name') or 'scenario.json'} (undo brings "
                                  "back the plan before).")
