"""The planner page: a left column of controls and a right column of results.

    App(gpu=None)  ->  header
                       [controls column] [results column]
                        GpuPicker          DeviceCard
                        (later: workload)  ChartPanel (capacity vs bandwidth)
                                           (later: estimate, bandwidth, advice)

Later issues add panels with `add_control(widget)` and `add_result(widget)`; a panel that
depends on the chosen GPU observes `app.picker` (`value` is the device id) or overrides
nothing at all and reads `app.device`.
"""
from __future__ import annotations

import html

import ipywidgets as W

from .. import __version__
from ..errors import UnknownIdError
from ..hardware import default_db
from .controls import GpuPicker, message_html
from .panels import ChartPanel, DeviceCard, _kernel
from .style import style_tag
from .url import UrlState, query_params

# first choice when the link names no GPU: the most common training GPU of the database
DEFAULT_GPUS = ("nvidia-h100-sxm5-80gb", "nvidia-h100-sxm", "H100 SXM", "nvidia-a100-sxm4-80gb")


def default_gpu(db) -> str | None:
    """The device id the page starts with when the link names none."""
    for name in DEFAULT_GPUS:
        try:
            return db.get(name).id
        except UnknownIdError:
            continue
    return db.devices[0].id if db.devices else None


class App(W.VBox):
    """The vramplan planner. `App()` in a notebook or Voila; drive it in tests by setting
    `app.picker.value = "<device id>"`.

    gpu: device id / alias to start with (default: `?gpu=` of the Voila URL, else H100 SXM).
    db: a `HardwareDB` (default: `vramplan.hardware.default_db()`).
    lazy_chart: attach the chart after first paint (default: when running in a kernel).
    """

    def __init__(self, gpu: str | None = None, db=None, lazy_chart: bool | None = None):
        self.db = db if db is not None else default_db()
        wanted = gpu if gpu is not None else query_params().get("gpu")
        initial, notice = self._resolve(wanted)

        self.notice = W.HTML(notice, layout=W.Layout(display="" if notice else "none"))
        self.picker = GpuPicker(self.db, initial)
        self.card = DeviceCard()
        self.chart = ChartPanel(self._chart_spec)
        self.url = UrlState(gpu=initial or "")

        header = W.HTML(
            "<div class='vp-header'><div class='vp-logo'>vram<span>plan</span></div>"
            "<div class='vp-tagline'>GPU memory capacity planner · pick a GPU to see its "
            f"memory, bandwidth and sources</div><div class='vp-hint' style='margin-left:auto'>"
            f"v{html.escape(__version__)}</div></div>")
        self.controls = W.VBox([self.picker], layout=W.Layout(flex="0 0 350px", width="350px"))
        self.controls.add_class("vp-controls")
        self.results = W.VBox([self.notice, self.card, self.chart],
                              layout=W.Layout(flex="1 1 auto", min_width="0"))
        self.results.add_class("vp-results")
        body = W.HBox([self.controls, self.results], layout=W.Layout(width="100%"))
        body.add_class("vp-body")
        super().__init__([W.HTML(style_tag()), header, body, self.url],
                         layout=W.Layout(width="100%"))
        self.add_class("vp-app")

        self.picker.observe(self._on_gpu, "value")
        self._show_device()
        if lazy_chart is None:
            lazy_chart = _kernel() is not None
        if lazy_chart:
            self.chart.load_in_background()
        else:
            self.chart.load()

    # -- layout hooks for later panels
    def add_control(self, widget: W.Widget) -> None:
        """Append a widget (usually `panels.section(...)`) to the left column."""
        self.controls.children = [*self.controls.children, widget]

    def add_result(self, widget: W.Widget) -> None:
        """Append a widget to the right column, below the existing results."""
        self.results.children = [*self.results.children, widget]

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

    def _on_gpu(self, change) -> None:
        self.notice.value = ""
        self.notice.layout.display = "none"
        self.url.gpu = change["new"] or ""
        self._show_device()
        self.chart.refresh()

    def _show_device(self) -> None:
        dev = self.device
        if dev is None:
            self.card.html.value = message_html("The hardware database is empty.", "info")
            return
        self.card.show(dev, self.db.sources)

    def _chart_spec(self):
        from ..charts import capacity_bandwidth_chart
        return capacity_bandwidth_chart(self.db.devices, self.gpu)
