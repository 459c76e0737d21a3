"""One altair chart in a reused `alt.JupyterChart` (each such widget carries ~1 MB of
JavaScript, so a panel creates it once and swaps its `.chart`). altair is imported only when
the chart is first needed, so the controls paint before it.

`ChartPanel(build)`: `build()` returns the chart for the current state (a `vramplan.charts`
builder bound to its data); `refresh()` swaps it in; `load()` creates the widget now;
`load_in_background()` prepares altair in a thread and creates the widget on the kernel's
event loop. `on_select(name, fn)` calls `fn(value)` when the chart's selection `name` changes
(kept across chart swaps: it observes the widget's own trait).
"""
from __future__ import annotations

import html
import threading
from typing import Any, Callable

import ipywidgets as W

from . import looks as L
from . import jobs
from ..state.i18n import _

_ALTAIR_READY = threading.Event()
_ALTAIR_LOCK = threading.Lock()
EMBED = {"renderer": "svg", "actions": False}


def prepare_altair() -> None:
    """The slow part of the first chart (~3-4 s): import altair, numpy, the builders and the
    sweep, bundle the offline JS. Once per process, in one thread at a time (two threads
    importing numpy at once see it half made)."""
    if _ALTAIR_READY.is_set():
        return
    with _ALTAIR_LOCK:
        if _ALTAIR_READY.is_set():
            return
        import numpy  # noqa: F401
        from .altair_offline import enable_offline
        enable_offline()
        from ... import charts, sweep  # noqa: F401
        _ALTAIR_READY.set()


def freeze(chart):
    """`chart` with its Vega-Lite dict computed now, without schema validation (~6x faster;
    the builders' specs are validated in tests/test_charts*.py), and pinned: the chart
    widget's observer calls `to_dict()` on the kernel's loop, where it then costs nothing.
    Call it where the chart is built (a worker thread), not where it is shown."""
    if chart is None or not hasattr(chart, "to_dict"):
        return chart
    spec = chart.to_dict(validate=False)
    object.__setattr__(chart, "to_dict", lambda *args, **kwargs: spec)
    return chart


class ChartPanel(W.VBox):
    def __init__(self, build: Callable[[], Any], height: int = 300, cls: str = "",
                 static: Callable[[], str] | None = None):
        self.build = build
        self.static = static          # the chart as plain SVG until the widget has loaded
        self.widget = None            # the alt.JupyterChart, once loaded
        self.error: str | None = None
        self.height = height
        self._lock = threading.Lock()
        self._select: dict[str, Callable] = {}
        self._jobs = jobs.Jobs("vramplan-chart-build")
        self.placeholder = L.html(self._wait_html(_("Loading chart…")))
        self.holder = W.Box([self.placeholder], layout=L.shared("layout"))
        self.holder.add_class("vp-chart")
        super().__init__([self.holder], layout=L.shared("layout"))
        self.add_class("vp-chart-panel")
        if cls:
            self.add_class(cls)

    def _wait_html(self, text: str) -> str:
        return (f"<div class='vp-chart-loading' style='height:{self.height}px'>"
                f"{html.escape(text)}</div>")

    def show_static(self) -> None:
        """Until the chart widget exists: the chart drawn as plain SVG (`static()`), so the
        first chart needs neither altair nor the widget's JavaScript."""
        if self.widget is not None or self.static is None:
            return
        try:
            svg = self.static()
        except Exception as exc:  # the widget will draw it, or say why
            svg = html.escape(f"{type(exc).__name__}: {exc}")
        self.placeholder.value = (f"<div class='vp-chart-static' style='min-height:"
                                  f"{self.height}px'>{svg}</div>")

    @property
    def loaded(self) -> bool:
        return self.widget is not None

    def load(self) -> None:
        """Create the chart widget now (idempotent)."""
        with self._lock:
            if self.widget is not None:
                return
            try:
                prepare_altair()
                import altair as alt
                chart = self._ready if self._ready is not None else freeze(self.build())
                self._ready = None
                if chart is None:
                    return
                self.widget = alt.JupyterChart(chart, embed_options=EMBED)
                self.widget.observe(self._on_selections, "_vl_selections")
            except Exception as exc:  # a chart failure must not take the page down
                self._fail(exc)
                return
            self.error = None
            self.holder.children = [self.widget]

    def prepare_in_background(self) -> None:
        """Start importing altair and building the chart in a thread now (inside a kernel;
        else nothing), once: `load_in_background()` waits for it, then creates the widget."""
        if self._prepared is not None or getattr(jobs.kernel(), "io_loop", None) is None:
            return
        gen = self._gen

        def work():
            try:
                prepare_altair()
                ready = freeze(self.build())          # built here, off the kernel's loop
                if gen == self._gen:                  # else the plan changed meanwhile
                    self._ready = ready
            except Exception:  # load() reports it
                self._ready = None

        self._prepared = threading.Thread(target=work, name="vramplan-chart", daemon=True)
        self._prepared.start()

    def load_in_background(self, then: Callable[[], None] | None = None) -> None:
        """Prepare altair in a thread (`prepare_in_background`, if not started yet), then
        create the widget on the kernel's loop and call `then()` after it (outside a kernel:
        `load()` and `then()` at once)."""
        loop = getattr(jobs.kernel(), "io_loop", None)
        if loop is None:
            self.load()
            if then is not None:
                then()
            return
        self.prepare_in_background()
        prepared = self._prepared

        def loaded():
            self.load()
            if then is not None:
                then()

        def wait():
            prepared.join()
            loop.add_callback(loaded)

        threading.Thread(target=wait, name="vramplan-chart-wait", daemon=True).start()

    def _fail(self, exc: Exception) -> None:
        self.error = f"{type(exc).__name__}: {exc}"
        self.show_message(_("The chart could not be drawn: {error}").format(error=self.error),
                          "error")

    def show_message(self, text: str, kind: str = "info") -> None:
        """Put a message where the chart is (e.g. 'no chart for this plan')."""
        self.placeholder.value = (f"<div class='vp-chart-loading vp-chart-{kind}' "
                                  f"style='height:{self.height}px'>{html.escape(text)}</div>")
        if self.holder.children != (self.placeholder,):
            self.holder.children = [self.placeholder]

    def show(self, chart: Any) -> None:
        """Show `chart`: creates the widget on first use, else swaps it in."""
        if self.widget is None:
            build, self.build = self.build, (lambda: chart)
            try:
                self.load()
            finally:
                self.build = build
            return
        self.refresh(chart)

    _ready = None                     # a chart built off the loop for load()
    _prepared: threading.Thread | None = None   # the thread building it
    _gen = 0                          # plan changes seen before the widget exists

    def refresh(self, chart: Any = None) -> None:
        """Swap in `chart` (default: `build()`, made in a worker thread inside a kernel so
        the page answers the next change meanwhile) and show it."""
        if self.widget is None:
            self._gen += 1
            self._ready = None
            return          # load() builds from the state current at that time
        if chart is None:
            self._jobs.run(lambda: freeze(self.build()), self._swap)
            return
        self._swap(chart)

    def _swap(self, chart: Any) -> None:
        if isinstance(chart, Exception):
            self._fail(chart)
            return
        try:
            if chart is None:
                return
            self.widget.chart = chart
        except Exception as exc:
            self._fail(exc)
            return
        self.error = None
        if self.holder.children != (self.widget,):
            self.holder.children = [self.widget]

    def on_select(self, name: str, fn: Callable[[Any], None]) -> None:
        self._select[name] = fn

    def _on_selections(self, change) -> None:
        """After altair has read the front end's selection (its observer runs first): the
        selection object (`.value`: a point selection's rows)."""
        new, old = change["new"] or {}, change["old"] or {}
        for name, fn in self._select.items():
            if name in new and (new.get(name) or {}).get("value") != \
                    (old.get(name) or {}).get("value"):
                fn(getattr(self.widget.selections, name, None))

    @property
    def spec(self) -> dict | None:
        """The Vega-Lite spec on display (None before load)."""
        return None if self.widget is None else self.widget.spec
