"""The planner page: a left column of controls and a right column of results.

    App(gpu=None, scenario=None)  ->  header
        [controls column]              [results column]
         WorkloadControls               EstimatePanel: verdict, figures, breakdown chart,
           (workload, how it runs,        bandwidth, notes, export
            parallelism)                DeviceCard (the chosen GPU)
         GpuPicker                      ChartPanel (capacity vs bandwidth, every GPU)

Every edit rebuilds the scenario with `Scenario.from_dict(workload.scenario_dict(gpu))` and
renders `estimate(scenario).to_dict()`; a rejection is shown next to the control its key
names and the last good estimate stays on screen, dimmed. The scenario lives in the address
(`Scenario.to_query()`), so a link reopens the plan; `?gpu=` alone still works.

Later issues add panels with `add_control(widget)` and `add_result(widget)`; a panel that
depends on the chosen GPU observes `app.picker` (`value` is the device id) or reads
`app.device`; one that depends on the plan observes nothing and reads `app.scenario` /
`app.estimate` after `app.on_estimate(callback)`.
"""
from __future__ import annotations

import html

import ipywidgets as W

from .. import __version__
from ..catalog import list_models
from ..errors import UnknownIdError, VramplanError
from ..estimate import estimate
from ..hardware import default_db
from ..scenario import Scenario
from .controls import GpuPicker, message_html
from .panels import ChartPanel, DeviceCard, _kernel
from .results import EstimatePanel
from .style import style_tag
from .url import UrlState, query_params, query_string
from .workload import WorkloadControls

# first choice when the link names no GPU: the most common training GPU of the database
DEFAULT_GPUS = ("nvidia-h100-sxm5-80gb", "nvidia-h100-sxm", "H100 SXM", "nvidia-a100-sxm4-80gb")
# the plan the page starts with when the link names none
DEFAULT_WORKLOADS = ({"model": "meta-llama/Llama-3.1-8B", "task": "lora"},
                     {"model": "gpt2", "task": "train"})


def default_gpu(db) -> str | None:
    """The device id the page starts with when the link names none."""
    for name in DEFAULT_GPUS:
        try:
            return db.get(name).id
        except UnknownIdError:
            continue
    return db.devices[0].id if db.devices else None


def default_workload() -> dict:
    """The model + task the page starts with (the first of DEFAULT_WORKLOADS the catalog has)."""
    for d in DEFAULT_WORKLOADS:
        try:
            Scenario.from_dict(d)
            return dict(d)
        except VramplanError:
            continue
    models = list_models()
    return {"model": models[0].id} if models else {}


def _as_scenario(scenario) -> Scenario:
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, str):
        return Scenario.from_query(scenario)
    return Scenario.from_dict(scenario)


class App(W.VBox):
    """The vramplan planner. `App()` in a notebook or Voila; drive it in tests by setting
    widget values (`app.workload.set("batch_size", "8")`, `app.picker.value = "<id>"`).

    gpu: device id / alias to start with (default: the link's, else H100 SXM).
    scenario: a Scenario, a dict or a query string to start with (default: the link's
        `?model=...` query, else Llama-3.1-8B LoRA).
    db: a `HardwareDB` (default: `vramplan.hardware.default_db()`).
    lazy_chart: attach the charts after first paint (default: when running in a kernel).
    """

    def __init__(self, gpu: str | None = None, db=None, lazy_chart: bool | None = None,
                 scenario=None):
        self.db = db if db is not None else default_db()
        self.scenario: Scenario | None = None
        self.estimate = None                     # the last good Estimate
        self._listeners = []
        notices = []
        start = None
        qs = query_string()
        if scenario is None and set(query_params()) - {"gpu"}:
            scenario = qs
        if scenario is not None:
            try:
                start = _as_scenario(scenario)
            except VramplanError as exc:
                notices.append(f"The link's plan was rejected ({exc}); showing the default plan.")
        wanted = gpu if gpu is not None else (start.gpu if start is not None and start.gpu
                                              else query_params().get("gpu"))
        initial, notice = self._resolve(wanted)
        if notice:
            notices.append(notice)

        self.notice = W.HTML("".join(message_html(n) if not n.startswith("<") else n
                                     for n in notices),
                             layout=W.Layout(display="" if notices else "none"))
        self.picker = GpuPicker(self.db, initial)
        self.picker.add_class("vp-gpu-picker")
        self.card = DeviceCard()
        self.chart = ChartPanel(self._chart_spec)
        self.url = UrlState(gpu=initial or "")
        self.panel = EstimatePanel()
        self.workload = WorkloadControls(list_models(), on_change=self._on_workload,
                                         gpu=lambda: self.gpu)

        header = W.HTML(
            "<div class='vp-header'><div class='vp-logo'>vram<span>plan</span></div>"
            "<div class='vp-tagline'>GPU memory capacity planner · will it fit, how large "
            "can the batch be, how much bandwidth</div><div class='vp-hint' "
            f"style='margin-left:auto'>v{html.escape(__version__)}</div></div>")
        self.controls = W.VBox([self.workload, self.picker],
                               layout=W.Layout(flex="0 0 360px", width="360px"))
        self.controls.add_class("vp-controls")
        gpu_title = W.HTML("<div class='vp-group-title'>The GPU</div>")
        self.results = W.VBox([self.notice, self.panel, gpu_title, self.card, self.chart],
                              layout=W.Layout(flex="1 1 auto", min_width="0"))
        self.results.add_class("vp-results")
        body = W.HBox([self.controls, self.results], layout=W.Layout(width="100%"))
        body.add_class("vp-body")
        super().__init__([W.HTML(style_tag()), header, body, self.url],
                         layout=W.Layout(width="100%"))
        self.add_class("vp-app")

        self.picker.observe(self._on_gpu, "value")
        self._show_device()
        self.workload._syncing = True
        try:
            if start is not None:
                self.workload.load(start)
            else:
                self.workload.load(Scenario.from_dict(default_workload()))
        finally:
            self.workload._syncing = False
        self.recompute()
        if lazy_chart is None:
            lazy_chart = _kernel() is not None
        for chart in (self.panel.chart, self.chart):
            if lazy_chart:
                chart.load_in_background()
            else:
                chart.load()

    # -- layout hooks for later panels
    def add_control(self, widget: W.Widget) -> None:
        """Append a widget (usually `panels.section(...)`) to the left column."""
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
        """The chosen device id."""
        return self.picker.value

    @gpu.setter
    def gpu(self, name: str) -> None:
        self.picker.value = self.db.get(name).id

    @property
    def device(self):
        """The chosen `Device` (what every panel renders from)."""
        return self.db.get(self.gpu) if self.gpu else None

    def _resolve(self, wanted: str | None) -> tuple[str | None, str]:
        if wanted:
            try:
                return self.db.get(wanted).id, ""
            except UnknownIdError as exc:
                fallback = default_gpu(self.db)
                return fallback, message_html(f"{exc}. Showing {fallback} instead.")
        return default_gpu(self.db), ""

    # -- the plan
    def recompute(self, drop_rejected: bool = False) -> bool:
        """Scenario.from_dict(the controls) -> estimate -> panels. On a rejection: the
        message next to the control its key names, the last good estimate dimmed. With
        `drop_rejected` (after a model or task change) entries the new choice rejects are
        forgotten instead. True when a new estimate is shown."""
        for _ in range(len(self.workload.entries) + 1):
            try:
                sc = Scenario.from_dict(self.workload.scenario_dict(self.gpu))
                est = estimate(sc, self.device)
            except VramplanError as exc:
                key = getattr(exc, "key", None)
                if drop_rejected and self.workload.drop_entry(key):
                    continue
                self.workload.show_error(key, str(exc))
                self.panel.stale("The plan is not valid: " + str(exc))
                return False
            except Exception as exc:  # an estimator bug must not take the page down
                msg = f"The estimate failed: {type(exc).__name__}: {exc}"
                self.workload.show_error(None, msg)
                self.panel.stale(msg)
                return False
            break
        else:
            return False
        self.scenario, self.estimate = sc, est
        self.workload.clear_errors()
        self.workload.sync(sc)
        query = sc.to_query()
        self.url.query = query
        self.panel.show(est.to_dict(), self.device.usable_bytes, query)
        for fn in self._listeners:
            fn(self)
        return True

    def _on_workload(self, kind: str) -> None:
        self.recompute(drop_rejected=kind == "model")

    def _on_gpu(self, change) -> None:
        self.notice.value = ""
        self.notice.layout.display = "none"
        self.url.gpu = change["new"] or ""
        self._show_device()
        self.chart.refresh()
        self.recompute()

    def _show_device(self) -> None:
        dev = self.device
        if dev is None:
            self.card.html.value = message_html("The hardware database is empty.", "info")
            return
        self.card.show(dev, self.db.sources)

    def _chart_spec(self):
        from ..charts import capacity_bandwidth_chart
        return capacity_bandwidth_chart(self.db.devices, self.gpu)
