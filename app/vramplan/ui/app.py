"""The planner page: layout and wiring only.

    App(gpu=None, scenario=None)  ->  header
        [controls]                 [results]
         WorkloadForm               NoticeBar (a link's problems, undo)
           ModelPicker + fields     EstimatePanel (verdict, figures, breakdown chart)
         GpuPicker                  AdvisorPanel (plans and changes, applied with one click)
                                    ExplorePanel (memory vs batch, GPUs compared, savings, ...)
                                    Details (bandwidth figures, notes)
                                    DeviceCard (the chosen GPU)
                                    ExportPanel (link, JSON downloads, scenario upload)

All state lives in `PlanState` (state.py, no widgets): every widget edits it and renders from
it after each change. The plan is kept in the address (`Scenario.to_query()`), so a link
reopens it. Later panels: `add_control(widget)`, `add_result(widget)`, `on_estimate(fn)`.
"""
from __future__ import annotations

import html

import ipywidgets as W

from .. import __version__
from ..scenario import Scenario
from .advisor import AdvisorPanel
from .details import Details
from .device_card import DeviceCard
from .explore import ExplorePanel
from .export import ExportPanel
from .gpu_picker import GpuPicker
from .jobs import kernel
from .notices import NoticeBar
from .state import PlanState, default_gpu  # noqa: F401 (default_gpu: the app's API)
from .style import style_tag
from .url import UrlState, query_params, query_string
from .verdict import EstimatePanel
from .workload import WorkloadForm


class App(W.VBox):
    """The vramplan planner. `App()` in a notebook or Voila; drive it in tests through
    `app.state` or by setting widget values (`app.workload.set("batch_size", "8")`).

    gpu: device id / alias to start with (default: the link's, else H100 SXM).
    scenario: a Scenario, a dict or a query string to start with (default: the link's query,
        else Llama-3.1-8B LoRA).
    db: a `HardwareDB` (default: `vramplan.hardware.default_db()`).
    lazy_chart: attach the charts after first paint (default: when running in a kernel).
    charts: draw the charts at all (tests of the form leave them out: each costs ~0.3 s).
    """

    def __init__(self, gpu: str | None = None, db=None, lazy_chart: bool | None = None,
                 scenario=None, charts: bool = True):
        qs = query_string()
        self.state = st = PlanState(db, gpu=gpu if gpu is not None else
                                    query_params().get("gpu"))
        self.db = st.db
        if isinstance(scenario, Scenario):
            scenario = scenario.to_query()
        if isinstance(scenario, dict):
            st.apply(scenario)
        elif isinstance(scenario, str):
            st.load_query(scenario)
        elif set(query_params()) - {"gpu"}:
            st.load_query(qs)
        st.history.clear()
        self._listeners = []

        self.workload = WorkloadForm(st)
        self.picker = GpuPicker(self.db, st.gpu, on_pick=st.set_gpu)
        self.notices = NoticeBar(st)
        self.panel = EstimatePanel(st)
        self.advisor = AdvisorPanel(st)
        self.explore = ExplorePanel(st)
        self.chart = self.explore.chart
        self.details = Details(st)
        self.card = DeviceCard()
        self.export = ExportPanel(st)
        self.url = UrlState(gpu=st.gpu or "", query=st.query)

        header = W.HBox([W.HTML(
            "<div class='vp-header'><div class='vp-logo'>vram<span>plan</span></div>"
            "<div class='vp-tagline'>GPU memory capacity planner · will it fit, how large "
            "can the batch be, how much bandwidth</div></div>"), self.notices.undo, W.HTML(
            f"<div class='vp-version'>v{html.escape(__version__)}</div>")])
        header.add_class("vp-top")
        self.controls = W.VBox([self.workload, self.picker])
        self.controls.add_class("vp-controls")
        gpu_title = W.HTML("<div class='vp-group-title'>The GPU</div>")
        self.results = W.VBox([self.notices, self.panel, self.advisor, self.explore,
                               self.details,
                               gpu_title, self.card, self.export])
        self.results.add_class("vp-results")
        body = W.Box([self.controls, self.results])
        body.add_class("vp-body")
        super().__init__([W.HTML(style_tag()), header, body, self.url])
        self.add_class("vp-app")

        st.on_change(self._on_state)
        self._render({"draft", "gpu", "estimate", "notices"})
        if not charts:
            return
        if lazy_chart is None:
            lazy_chart = kernel() is not None
        if lazy_chart:
            self.panel.chart.load_in_background()
        else:
            self.panel.chart.load()
        self.explore.enabled = self.advisor.enabled = True
        self.explore.update()
        self.advisor.render()

    # -- layout hooks for later panels
    def add_control(self, widget: W.Widget) -> None:
        """Append a widget (usually `section.section(...)`) to the left column."""
        self.controls.children = [*self.controls.children, widget]

    def add_result(self, widget: W.Widget) -> None:
        """Append a widget to the right column, below the existing results."""
        self.results.children = [*self.results.children, widget]

    def on_estimate(self, callback) -> None:
        """Call `callback(app)` after every good estimate."""
        self._listeners.append(callback)

    # -- state
    @property
    def gpu(self) -> str | None:
        return self.state.gpu

    @gpu.setter
    def gpu(self, name: str) -> None:
        self.state.set_gpu(name)

    @property
    def device(self):
        return self.state.device

    @property
    def scenario(self) -> Scenario | None:
        return self.state.scenario

    @property
    def estimate(self):
        return self.state.estimate

    def _on_state(self, state, what: set) -> None:
        self._render(what)

    def _render(self, what: set) -> None:
        st = self.state
        self.workload.render()
        self.notices.render()
        if "gpu" in what:
            if self.picker.value != st.gpu:
                self.picker.value = st.gpu
            dev = st.device
            if dev is not None:
                self.card.show(dev, self.db.sources)
        self.panel.render()
        self.advisor.render()
        self.explore.render()
        self.details.render()
        self.export.render()
        if st.query and self.url.query != st.query:
            self.url.query = st.query
        if st.gpu and self.url.gpu != st.gpu:
            self.url.gpu = st.gpu
        if st.estimate is not None and not st.stale and "estimate" in what:
            for fn in self._listeners:
                fn(self)
