"""Share and export: the link to this plan (the page's full URL with `Scenario.to_query()`,
exact and short; built in the browser by `share.ShareLink`), the scenario and estimate as JSON
downloads (data: URLs, no request leaves the page) and a scenario.json upload (read with
`vramplan.safejson.loads`; undo brings back the plan before).

The sweep CSV (every GPU at batch sizes 1, 2, 4, ...: memory, fit, max batch) and the report
(Markdown, or one self-contained HTML file with the charts as SVG) are made when asked: each
button builds its file off the kernel's loop (`jobs.Jobs`), then the browser downloads it
(`share.Download`: one click saves the file) and a data: link stays to save it again, so the
first paint never waits for vl-convert. No file is written on the server.
"""
from __future__ import annotations

import base64
import html
import json
from typing import Any
from urllib.parse import quote

import ipywidgets as W

from . import looks as L
from ... import safejson
from ...errors import VramplanError
from ..state.i18n import _, speaking, speaking_for
from .jobs import Jobs
from .section import section
from .share import Download, ShareLink
from ..state.text import message_html

MAX_SCENARIO_BYTES = 1_000_000
_e = html.escape


def data_url(obj: Any) -> str:
    return "data:application/json;charset=utf-8," + quote(json.dumps(obj, indent=2))


def export_html(est: dict) -> str:
    sc = est.get("scenario") or {}
    return (
        f"<div class='vp-downloads'>"
        f"<a class='vp-btn' download='scenario.json' href='{_e(data_url(sc))}'>"
        f"{_e(_('Download scenario.json'))}</a>"
        f"<a class='vp-btn' download='estimate.json' href='{_e(data_url(est))}'>"
        f"{_e(_('Download estimate.json'))}</a></div>"
        f"<details><summary>{_e(_('Scenario JSON'))}</summary>"
        f"<pre class='vp-json vp-scenario-json'>"
        f"{_e(json.dumps(sc, indent=2))}</pre></details>"
        f"<details><summary>{_e(_('Estimate JSON'))}</summary>"
        f"<pre class='vp-json vp-estimate-json'>"
        f"{_e(json.dumps(est, indent=2))}</pre></details>")


# what each download button makes: (file name, MIME type)
FILES = {"csv": ("vramplan-sweep.csv", "text/csv"),
         "md": ("vramplan-report.md", "text/markdown"),
         "html": ("vramplan-report.html", "text/html")}


def file_url(text: str, mime: str) -> str:
    """`text` as a base64 data: URL (the browser saves it; nothing goes to a server)."""
    return (f"data:{mime};charset=utf-8;base64,"
            + base64.b64encode(text.encode("utf-8")).decode("ascii"))


def make_file(kind: str, snap: dict) -> str:
    """The text of one download for a snapshot of the state (plain values: safe in a
    thread): the sweep CSV, or the report as Markdown or HTML in the page's language. The
    advisor's advice is the page's when it has it, else asked here."""
    from ...report import assemble, model_source, sweep_csv, to_html, to_markdown
    if kind == "csv":
        return sweep_csv(snap["scenario"])
    advice = snap.get("advice")
    if advice is None:
        from ...advisor import advise
        advice = advise(snap["scenario"], snap["device"], gpu_table_too=False)
    r = assemble(snap["result"], snap["device"].to_dict(), advice=advice,
                 lang=snap.get("lang") or "en", query=snap.get("query") or "",
                 model_source=model_source(snap["scenario"]),
                 base_url=snap.get("base_url") or "")   # the page's own address, if known
    return to_markdown(r) if kind == "md" else to_html(r)


def download_link(kind: str, text: str) -> str:
    name, mime = FILES[kind]
    return (f"<a class='vp-btn vp-save vp-save-{kind}' download='{name}' "
            f"href='{file_url(text, mime)}'>{html.escape(_('Save {name}').format(name=name))}"
            f"</a> <span class='vp-hint'>{len(text.encode('utf-8')):,} B</span>")


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
    def __init__(self, state, background: bool | None = None):
        self.state = state
        self.jobs = Jobs("vramplan-export", background)
        self.buttons = {kind: L.button(description=label)
                        for kind, label in (("csv", _("Download sweep CSV")),
                                            ("md", _("Download report (Markdown)")),
                                            ("html", _("Download report (HTML)")))}
        for kind, b in self.buttons.items():
            b.add_class(f"vp-make-{kind}")
            b.on_click(speaking_for(state, lambda _b, kind=kind: self.prepare(kind)))
        self.links = L.html()
        self.html = L.html()
        self.share = ShareLink(label=_("Link to this plan"))
        self.share.add_class("vp-share-box")
        self.download = Download()
        self.upload = W.FileUpload(accept=".json,.jsonl,application/json", multiple=False,
                                   description=_("Open scenario.json"))
        self.message = L.html()
        self.upload.observe(self._on_upload, "value")
        super().__init__([section(_("Share and export"), self.share, self.html, W.HBox(
            [*self.buttons.values(), self.upload], layout=W.Layout(flex_flow="row wrap")),
            self.links, self.message), self.download])
        self.add_class("vp-export")
        self._shown = None

    def render(self) -> None:
        st = self.state
        if st.result is None or (st.result, st.query) == self._shown:
            return
        self._shown = (st.result, st.query)
        self.share.label = _("Link to this plan")
        self.share.query = st.query
        self.html.value = export_html(st.result)
        self.links.value = ""               # a file made for the plan before is stale

    def prepare(self, kind: str) -> None:
        """Make one download (off the loop), then show its link."""
        st = self.state
        if st.result is None:
            return
        snap = {**st.snapshot(), "advice": st.advice, "lang": st.lang, "query": st.query,
                "base_url": self.share.base}
        shown = st.result
        self.links.value = f"<div class='vp-hint'>{html.escape(_('Preparing…'))}</div>"
        self.jobs.run(lambda: make_file(kind, snap),
                      lambda text: self._ready(kind, text, shown, snap["lang"]))

    def _ready(self, kind: str, text, shown, lang: str) -> None:
        if shown is not self.state.result:
            return                          # the plan moved on while the file was made
        with speaking(lang):
            if isinstance(text, Exception):
                self.links.value = message_html(
                    _("The file could not be made: {error}").format(
                        error=f"{type(text).__name__}: {text}"))
                return
            self.links.value = download_link(kind, text)
            self.download.save(*FILES[kind], text)      # the browser saves it now

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
        self.state.apply(d, label=_("Opened {name} (undo brings back the plan before).")
                         .format(name=f.get("name") or "scenario.json"))
