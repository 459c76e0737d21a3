"""The local GPU, when NVML sees one: what it is (name, memory, driver), "Detect my GPU" (the
hardware database's device for it, chosen in the GPU picker), "Measure this plan" and "Max
batch" on it (real tensors, in a process of its own), and a monitor of its memory over time;
each with its progress and a Cancel. With no NVML, no driver or no GPU: one plain sentence.

The probe runs off the kernel's loop (`jobs.Jobs`) and reads NVML only (no CUDA context); the
runs go through `measure_state.Worker` (`python -m vramplan.measure.worker`).
"""
from __future__ import annotations

import html

import ipywidgets as W

from . import looks as L
from ..state import measure_state as M
from .chart import ChartPanel, prepare_altair
from ..state.i18n import N_, _, current_lang, msg, speaking_for
from .jobs import Jobs
from .section import section
from ..state.text import message_html, size
from .trace_panel import ProgressRow, comparison_html, loop_poster

ACTIONS = {"measure": N_("Measure this plan"), "max_batch": N_("Max batch"),
           "monitor": N_("Monitor")}
MONITOR_INTERVAL = 1.0


class LivePanel(W.VBox):
    def __init__(self, state, probe=None, python: str | None = None, background=None):
        self.state = state
        self.info: dict | None = None          # probe_local's answer
        self.job = M.Job("live", translate=_)
        self.worker = M.Worker(self.job, post=loop_poster(state), python=python)
        self.action: str | None = None
        self.for_estimate: dict | None = None
        self.title = L.html()
        self.body = L.html()
        self.detect = L.button()
        self.detect.on_click(speaking_for(state, lambda _b: self.pick()))
        self.buttons = {}
        for key in ACTIONS:
            b = L.button()
            b.on_click(speaking_for(state, lambda _b, key=key: self.start(key)))
            self.buttons[key] = b
        self.row = W.HBox([self.detect, *self.buttons.values()])
        self.row.add_class("vp-live-actions")
        self.progress = ProgressRow(speaking_for(state, self.cancel))
        self.output = L.html()
        self.chart: ChartPanel | None = None
        self.chart_box = W.Box()
        self._charts = Jobs("vramplan-live-chart", background)
        self._drawn = 0
        super().__init__([section(None, self.title, self.body, self.row, self.progress,
                                  self.output, self.chart_box, cls="vp-live")])
        self.add_class("vp-live-panel")
        self.job.listen(lambda _j: self.render())
        state.on_change(lambda _s, what: self.render())
        self.render()
        Jobs("vramplan-probe", background).run(
            lambda: M.probe_local(state.db, probe), speaking_for(state, self._probed))

    @property
    def gpu(self) -> dict | None:
        gpus = (self.info or {}).get("gpus") or []
        return gpus[0] if gpus else None

    def _probed(self, info) -> None:
        if isinstance(info, Exception):    # probe_local does not raise; a guard all the same
            info = {"gpus": [], "message": M.NO_GPU.format(why=str(info))}
        self.info = info
        self.render()

    # -- actions
    def pick(self) -> None:
        g = self.gpu
        if g and g.get("hwdb_id"):
            self.state.set_gpu(g["hwdb_id"])

    def start(self, action: str) -> None:
        if self.job.running or self.gpu is None:
            return
        if action != "monitor" and self.state.scenario is None:
            return
        self.action, self.for_estimate = action, self.state.result
        opts = {"device": int(self.gpu.get("index") or 0)}
        if action == "monitor":
            opts["interval"] = MONITOR_INTERVAL
            request = {"job": "monitor", "options": opts}
        else:
            request = {"job": action, "scenario": self.state.scenario.to_dict(), "options": opts}
        self.chart_box.children = []
        self._drawn = 0
        self.worker.start(request)

    def cancel(self) -> None:
        self.worker.cancel()

    # -- drawing
    def render(self) -> None:
        self.title.value = (f"<div class='vp-section-title'>{html.escape(_('This machine’s GPU'))}"
                            "</div>")
        info = self.info
        has_gpu = self.gpu is not None
        self.row.layout.display = "" if has_gpu else "none"
        if info is None:
            self.body.value = f"<div class='vp-hint'>{html.escape(_('Looking for a GPU…'))}</div>"
        elif not has_gpu:
            self.body.value = f"<div class='vp-hint vp-no-gpu'>{html.escape(msg(info['message']))}</div>"
        else:
            self.body.value = self._gpu_html(self.gpu)
        g = self.gpu or {}
        running = self.job.running
        self.detect.description = _("Detect my GPU")
        self.detect.disabled = not g.get("hwdb_id") or g.get("hwdb_id") == self.state.gpu
        for key, b in self.buttons.items():
            b.description = _(ACTIONS[key])
            b.disabled = running or (key != "monitor" and self.state.scenario is None)
        self.progress.show(self.job, stop=self.action == "monitor")
        self.output.value = self._result_html()
        self._draw_monitor()

    def _gpu_html(self, g: dict) -> str:
        dev = self.state.db.get(g["hwdb_id"]) if g.get("hwdb_id") else None
        rows = [(_("Device"), g.get("name") or "–"),
                (_("GPU memory"), _("{total} total, {free} free").format(
                    total=size(g.get("memory_total_bytes")), free=size(g.get("memory_free_bytes")))),
                (_("Driver"), " · ".join(x for x in (g.get("driver_version"), (
                    "CUDA " + g["cuda_driver_version"]) if g.get("cuda_driver_version") else None)
                    if x) or "–"),
                (_("In the database"), dev.name if dev else _("not found"))]
        if g.get("other_processes_bytes"):
            rows.append((_("Other processes"), size(g["other_processes_bytes"])))
        n = len((self.info or {}).get("gpus") or [])
        more = (f"<div class='vp-hint'>{html.escape(_('{n} GPUs seen; runs use GPU 0.').format(n=n))}"
                "</div>") if n > 1 else ""
        return ("<table class='vp-table vp-live-gpu'>" + "".join(
            f"<tr><td>{html.escape(k)}</td><td class='vp-num'>{html.escape(str(v))}</td></tr>"
            for k, v in rows) + "</table>" + more)

    def _result_html(self) -> str:
        job, what = self.job, _(ACTIONS.get(self.action or "", "")) if self.action else ""
        if job.state == M.CANCELLED:
            if self.action == "monitor":
                return message_html(_("Monitor stopped after {n} samples.").format(
                    n=len(M.monitor_rows(job.samples))), "info")
            return message_html(_("Cancelled: {what} was stopped.").format(what=what), "info")
        if job.state == M.ERROR:
            return message_html(_("{what} failed: {error}").format(what=what, error=msg(job.error)))
        if job.state != M.DONE or not isinstance(job.result, dict):
            return ""
        r, est = job.result, self.for_estimate or {}
        if self.action == "measure":
            rows = M.compare(est, r)
            return comparison_html(rows, _("Measured")) if rows else ""
        if self.action == "max_batch":
            got, want = M.measured_max_batch(r), est.get("max_batch_size")
            line = _("Largest batch that ran: {got} (the estimate says {want})").format(
                got=got if got is not None else "–", want=want if want is not None else "–")
            return f"<div class='vp-measure-head'>{html.escape(line)}</div>"
        return ""

    def _draw_monitor(self) -> None:
        rows = M.monitor_rows(self.job.samples) if self.action == "monitor" else []
        if not rows or len(rows) == self._drawn:
            return
        self._drawn = len(rows)
        total = rows[-1].get("total_bytes")
        name = (self.gpu or {}).get("name")
        lang = current_lang()

        def build():
            prepare_altair()
            from ...charts.trace_timeline import monitor_chart
            return monitor_chart(rows, total_bytes=total, gpu_name=name, lang=lang)

        def done(chart):
            if isinstance(chart, Exception):
                return
            if self.chart is None:
                self.chart = ChartPanel(lambda: None, height=220, cls="vp-live-monitor")
            if self.chart_box.children != (self.chart,):
                self.chart_box.children = [self.chart]
            self.chart.show(chart)
        self._charts.run(build, speaking_for(self.state, done))
