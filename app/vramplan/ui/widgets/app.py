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

Languages: the header's EN / 中文 switch, `?lang=zh` in the link (kept in the address) or
`App(lang="zh")`; every string goes through `ui.i18n._`. A switch builds the page's widgets
again in the new language (the state, the address widget and later panels stay).
"""
from __future__ import annotations

import html

import ipywidgets as W

from . import looks as L
from ... import __version__
from ...errors import VramplanError
from ...i18n import LANG_NAMES, LANGS, normalise_lang
from ...scenario import Scenario
from .first_screen import HIDE, first_screen_html
from ..state.i18n import N_, _, set_lang, speaking
from .jobs import after_paint, kernel
from .notices import NoticeBar
from ..state.state import PlanState, default_gpu, notice  # noqa: F401 (default_gpu: the app's API)
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
    lazy_chart: make the panels below the verdict (advice, charts, details, GPU card, export,
        trace, live) and attach the charts after the first paint (default: in a kernel).
    charts: draw the charts at all (tests of the form leave them out: each costs ~0.3 s).
    lang: the page's language, "en" or "zh" (default: the link's `lang`, else English).
    """

    def __init__(self, gpu: str | None = None, db=None, lazy_chart: bool | None = None,
                 scenario=None, charts: bool = True, lang: str | None = None):
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
        elif set(query_params()) - {"gpu", "lang"}:
            st.load_query(qs)
        st.history.clear()
        self._listeners = []
        self._extra_controls: list = []
        self._extra_results: list = []
        self._charts, self._lazy = charts, lazy_chart
        wanted = lang if lang is not None else query_params().get("lang")
        try:
            st.lang = normalise_lang(wanted)
        except VramplanError:
            st.notices.append(notice(N_("The link's lang '{value}' is not a language of the "
                                        "page (lang=en or lang=zh); the page is in English."),
                                     "error", value=str(wanted)[:40]))
        self.url = UrlState(gpu=st.gpu or "", query=self._query())
        self.trace = self.live = None       # measure from the page (made with the later panels)
        with speaking(st.lang):
            self._build()
        st.on_change(self._on_state)

    def _build(self) -> None:
        """The page's first screen in the state's language (again after a switch): the
        controls, the notices and the verdict with its breakdown; the panels below it come
        after the first paint (`_build_later`)."""
        st = self.state
        old = list(self.children)
        self.later = False
        lazy = self._lazy if self._lazy is not None else kernel() is not None
        self.workload = WorkloadForm(st, later=("parallel",) if lazy else ())
        self.picker = None            # the GPU picker: made after the first paint (_below_fold)
        self.notices = NoticeBar(st)
        self.panel = EstimatePanel(st)
        self.lang_switch = W.ToggleButtons(options=[(LANG_NAMES[x], x) for x in LANGS], value=st.lang,
                                    tooltips=[_("Show the page in English"),
                                              _("Show the page in Chinese")])
        self.lang_switch.add_class("vp-lang")
        self.lang_switch.observe(lambda ch: set_lang(st, ch["new"]), "value")

        title, version = _header_html()
        shared = L.shared("layout")   # boxes never hidden by their layout: one model
        header = W.HBox([L.html(title), self.lang_switch, self.notices.undo, L.html(version)],
                        layout=shared)
        header.add_class("vp-top")
        self.controls = W.VBox([self.workload, *self._extra_controls], layout=shared)
        self.controls.add_class("vp-controls")
        self.results = W.VBox([self.notices, self.panel, *self._extra_results], layout=shared)
        self.results.add_class("vp-results")
        body = W.Box([self.controls, self.results], layout=shared)
        body.add_class("vp-body")
        style = L.html(style_tag() + HIDE)    # HIDE: the first screen's HTML copy goes
        if old:
            self.children = [style, header, body, self.url]
        else:
            super().__init__([style, header, body, self.url], layout=shared)
            self.add_class("vp-app")
            self.add_class(f"vp-lang-{st.lang}")
        for cls in (f"vp-lang-{x}" for x in LANGS):
            (self.add_class if cls == f"vp-lang-{st.lang}" else self.remove_class)(cls)
        self._render({"draft", "gpu", "estimate", "notices"})
        keep = {id(w) for w in (self.url, *self._extra_controls, *self._extra_results)}
        for w in old:                 # the last language's widgets (the address and the
            _close_tree(w, keep)      # later panels stay)
        if not lazy:
            self._later(background=False)
        else:                         # after the first paint: the panels, altair, the charts
            banner = self.panel.banner    # (a build a language switch replaced does nothing)
            after_paint(banner, lambda: self._current(banner) and self._later(background=True))

    def _below_fold(self) -> None:
        """The controls below the first screen: the form's parallelism section and the GPU
        picker (~60 widget models the browser then need not fetch before the first paint; the
        picker's module is imported here too). Made with the panels, after the breakdown's
        chart widget: made at the first paint, they delayed it."""
        from .gpu_picker import GpuPicker
        st = self.state
        with speaking(st.lang):
            self.picker = GpuPicker(self.db, st.gpu, on_pick=st.set_gpu, state=st,
                                    on_filter=st.set_gpu_filters)
            self.workload.show_all()
        self.controls.children = [self.workload, self.picker, *self._extra_controls]

    def _current(self, banner) -> bool:
        """Is the first screen of `banner` still the page's, its later panels not made yet?"""
        return self.panel.banner is banner and not self.later

    def _later(self, background: bool) -> None:
        """The panels below the verdict and the charts. In the background (in a kernel, after
        the first paint): the breakdown chart's widget first, then the panels (~170 models,
        their imports and first renders: made before the chart, they delayed it ~1 s). Not
        earlier: altair imported in a thread while the browser still loads the first screen
        slowed that screen (benchmarks/results/page-speed-2026-12-02.txt)."""
        if background and self._charts:
            banner = self.panel.banner
            self.panel.chart.load_in_background(
                then=lambda: self._current(banner) and self._panels())
            return
        self._panels()

    def _panels(self) -> None:
        self._below_fold()
        with speaking(self.state.lang):
            self._build_later()
        if not self._charts:
            return
        self.panel.chart.load()       # nothing when loaded already
        self._start_panels()

    # The browser fetches the state of every widget model when the page loads (Voila's widget
    # manager gives the kernel 4 s, then asks one widget at a time): the ~120 models of the
    # panels below the verdict are made once the verdict is on the page.
    def _build_later(self) -> None:
        """The panels below the verdict: advice, charts, details, the GPU card, export, and
        (once, kept across a language switch) the trace and live panels. Their modules are
        imported here: the advisor and numpy are ~40 % of the page's imports (the first
        screen does not need them; benchmarks/page_speed.py)."""
        from .advisor import AdvisorPanel
        from .cluster_view import ClusterView
        from .details import Details
        from .device_card import DeviceCard
        from .explore import ExplorePanel
        from .export import ExportPanel
        from .live_panel import LivePanel
        from .ranks_view import RanksView
        from .trace_panel import TracePanel
        st = self.state
        self.advisor = AdvisorPanel(st)
        self.explore = ExplorePanel(st)
        self.chart = self.explore.chart
        self.details = Details(st)
        self.ranks = RanksView(st)       # per pipeline stage (hidden with one kind of rank)
        self.cluster = ClusterView(st)   # GPUs needed (the cluster solver; training only)
        self.card = DeviceCard()
        self.export = ExportPanel(st)
        if self.trace is None:
            self.trace, self.live = TracePanel(st), LivePanel(st)
            self._extra_results[:0] = [self.trace, self.live]
        gpu_title = L.html(f"<div class='vp-group-title'>{_('The GPU')}</div>")
        self.results.children = [self.notices, self.panel, self.ranks, self.advisor, self.cluster,
                                 self.explore,
                                 self.details, gpu_title, self.card, self.export,
                                 *self._extra_results]
        self.later = True
        self._render_later({"gpu"})

    def _render_later(self, what: set) -> None:
        if not self.later:
            return
        dev = self.state.device
        if "gpu" in what and dev is not None:
            self.card.show(dev, self.db.sources)
        self.advisor.render()
        self.explore.render()
        self.details.render()
        self.ranks.render()
        self.cluster.render()
        self.export.render()

    def _start_panels(self) -> None:
        self.explore.enabled = self.advisor.enabled = True
        with speaking(self.state.lang):
            self.explore.update()
            self.advisor.render()

    # -- layout hooks for later panels
    def add_control(self, widget: W.Widget) -> None:
        """Append a widget (usually `section.section(...)`) to the left column (kept across a
        language switch; a panel that renders text re-renders on `on_change` "lang")."""
        self._extra_controls.append(widget)
        self.controls.children = [*self.controls.children, widget]

    def add_result(self, widget: W.Widget) -> None:
        """Append a widget to the right column, below the existing results."""
        self._extra_results.append(widget)
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
        if "lang" in what:
            self._build()             # in the new language (set_lang emits inside speaking)
            return
        self._render(what)

    def first_screen(self) -> str:
        """The first screen as plain HTML (`first_screen.py`): what the browser draws before
        the widgets have loaded."""
        with speaking(self.state.lang):
            title, version = _header_html()
            return first_screen_html(title + version, html.escape(_("Workload")),
                                     self.panel.snapshot(), self.state.lang)

    def _ipython_display_(self) -> None:
        """In a notebook or Voila: the first screen as plain HTML, then the page, which
        replaces it once its chart is drawn (the template takes it out; elsewhere its
        stylesheet hides it). The snapshot only for a plan with an estimate, while the page
        has never been on the screen (a second display of the same page shows the widgets
        alone)."""
        from IPython.display import display
        if not self.panel.banner._view_count and self.state.result is not None:
            display({"text/html": self.first_screen()}, raw=True)
        display(self._repr_mimebundle_(), raw=True)

    def set_lang(self, lang: str) -> None:
        """Show the page in `lang` ('en' / 'zh')."""
        set_lang(self.state, lang)

    def _query(self) -> str:
        """What the address holds: the plan's query, and `lang` when it is not English (a
        page setting, not a scenario key)."""
        q = "&".join(p for p in self.state.query.split("&") if p and
                     p.split("=", 1)[0] != "lang")
        if self.state.lang != "en":
            q = (q + "&" if q else "") + f"lang={self.state.lang}"
        return q

    def _render(self, what: set) -> None:
        st = self.state
        self.workload.render()
        self.notices.render()
        if "gpu" in what and self.picker is not None and self.picker.value != st.gpu:
            self.picker.value = st.gpu
        self.panel.render()
        self._render_later(what)
        q = self._query()
        if q and self.url.query != q:
            self.url.query = q
        if st.gpu and self.url.gpu != st.gpu:
            self.url.gpu = st.gpu
        if st.estimate is not None and not st.stale and "estimate" in what:
            for fn in self._listeners:
                fn(self)


def _header_html() -> tuple[str, str]:
    """The header's logo and tagline, and its version (in the current language)."""
    return ("<div class='vp-header'><div class='vp-logo'>vram<span>plan</span></div>"
            f"<div class='vp-tagline'>{_('GPU memory capacity planner · will it fit, how large can the batch be, how much bandwidth')}"
            "</div></div>", f"<div class='vp-version'>v{html.escape(__version__)}</div>")


def _close_tree(widget, keep: set) -> None:
    """Close `widget` and everything under it except the widgets whose id is in `keep`."""
    if id(widget) in keep:
        return
    for child in getattr(widget, "children", ()) or ():
        _close_tree(child, keep)
    widget.close()
