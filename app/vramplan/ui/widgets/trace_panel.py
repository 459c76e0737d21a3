"""'Trace this plan': the tracer (fake tensors on the CPU, no GPU needed: it works on Binder)
run on the page's plan in a process of its own, with its progress, a Cancel that stops it, and
its figures beside the estimate's (difference in bytes and %), the largest modules at its peak
and its timeline against the estimate's peak.

The state is `measure_state.Job` / `Worker` (no widgets); this file only draws it. A plan the
tracer cannot build gets the tracer's own sentence (`measure.buildable.check`), not a button.
"""
from __future__ import annotations

import html

import ipywidgets as W

from . import looks as L
from ..state import measure_state as M
from .chart import ChartPanel, prepare_altair
from ..state.i18n import _, current_lang, msg, speaking, speaking_for
from .jobs import Jobs, kernel
from .section import section
from ..state.text import message_html, size

STEPS = 2


def loop_poster(state):
    """`post` for a Worker: on the kernel's loop when there is one (else at once), in the
    page's language."""
    loop = getattr(kernel(), "io_loop", None)

    def run(fn):
        with speaking(getattr(state, "lang", "en")):
            fn()
    if loop is None:
        return run
    return lambda fn: loop.add_callback(lambda: run(fn))


def phase_label(key) -> str:
    """A phase key ('optimizer-step') as the page says it ('Optimizer step', '优化器步')."""
    from ...charts.theme import label
    return label(str(key), lang=current_lang())


def pct(v) -> str:
    return "–" if v is None else f"{v:+.1f}%".replace("-", "−")


def signed(n: int) -> str:
    return ("+" if n > 0 else "−" if n < 0 else "±") + size(abs(n))


class ProgressRow(W.HBox):
    """A job's progress bar, its phase in words and its Cancel button."""

    def __init__(self, on_cancel):
        self.bar = W.FloatProgress(value=0.0, min=0.0, max=1.0, layout=W.Layout(width="160px"))
        self.bar.add_class("vp-measure-bar")
        self.text = L.html()
        self.cancel = L.button(description=_("Cancel"))
        self.cancel.add_class("vp-measure-cancel")
        self.cancel.on_click(lambda _b: on_cancel())
        super().__init__([self.bar, self.text, self.cancel])
        self.add_class("vp-measure-progress")
        self.layout.display = "none"

    def show(self, job: M.Job, stop: bool = False) -> None:
        """Draw `job`; `stop`: the button reads "Stop" (a monitor has nothing to cancel)."""
        self.cancel.description = _("Stop") if stop else _("Cancel")
        running = job.running
        self.layout.display = "" if running else "none"
        self.cancel.disabled = not running
        if not running:
            return
        f = job.fraction
        self.bar.value = f if f is not None else 0.0
        self.bar.bar_style = "" if f is not None else "info"
        (self.bar.remove_class if f is not None else self.bar.add_class)("vp-indeterminate")
        self.text.value = (f"<span class='vp-measure-phase'>{html.escape(job.phase_text())}</span>"
                           f" <span class='vp-hint'>{job.seconds:.0f} s</span>")


def comparison_html(rows: list[dict], what: str) -> str:
    """The estimate against a trace / measurement, one row per figure."""
    head = (f"<tr><th></th><th>{html.escape(_('Estimate'))}</th><th>{html.escape(what)}</th>"
            f"<th>{html.escape(_('Difference'))}</th></tr>")
    body = "".join(
        f"<tr><td>{html.escape(_(r['label']))}</td><td class='vp-num'>{size(r['estimate_bytes'])}"
        f"</td><td class='vp-num'>{size(r['measured_bytes'])}</td><td class='vp-num'>"
        f"{signed(r['diff_bytes'])} ({pct(r['diff_pct'])})</td></tr>" for r in rows)
    return f"<table class='vp-table vp-measure-table'>{head}{body}</table>"


def modules_html(mods: list[dict]) -> str:
    if not mods:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(m['name'])}"
        + (f" <span class='vp-hint'>{html.escape(_('{n} blocks, {each} each at most').format(n=m['count'], each=size(m['each_bytes'])))}</span>"  # noqa: E501
           if m["count"] > 1 else "")
        + f"</td><td class='vp-num'>{size(m['bytes'])}</td></tr>" for m in mods)
    return (f"<div class='vp-measure-sub'>{html.escape(_('Largest modules at the traced peak'))}"
            f"</div><table class='vp-table vp-measure-modules'>{rows}</table>")


class TracePanel(W.VBox):
    def __init__(self, state, python: str | None = None):
        self.state = state
        self.job = M.Job("trace", translate=_)
        self.worker = M.Worker(self.job, post=loop_poster(state), python=python)
        self.for_scenario = None          # the plan the shown trace is of
        self.for_estimate: dict | None = None
        self.title = L.html()
        self.intro = L.html()
        self.button = L.button(button_style="primary")
        self.button.add_class("vp-trace-button")
        self.button.on_click(speaking_for(state, lambda _b: self.start()))
        self.progress = ProgressRow(speaking_for(state, self.cancel))
        self.output = L.html()
        self.output.add_class("vp-trace-result")
        self.chart: ChartPanel | None = None
        self.chart_box = W.Box()
        self.chart_box.add_class("vp-trace-chart")
        self._charts = Jobs("vramplan-trace-chart")
        super().__init__([section(None, self.title, self.intro, W.HBox([self.button]),
                                  self.progress, self.output, self.chart_box,
                                  cls="vp-trace")])
        self.job.listen(lambda _j: self.render())
        state.on_change(lambda _s, what: self.render())
        self.render()

    # -- actions
    def start(self) -> None:
        sc = self.state.scenario
        if self.job.running or M.trace_refusal(sc) is not None:
            return
        self.for_scenario, self.for_estimate = sc, self.state.result
        self.chart_box.children = []
        self.worker.start({"job": "trace", "scenario": sc.to_dict(), "options": {"steps": STEPS}})

    def cancel(self) -> None:
        self.worker.cancel()

    # -- drawing
    def render(self) -> None:
        job, sc = self.job, self.state.scenario
        self.title.value = (f"<div class='vp-section-title'>{html.escape(_('Trace this plan'))}"
                            "</div>")
        refusal = M.trace_refusal(sc)
        self.intro.value = message_html(msg(refusal), "info") if refusal else (
            "<div class='vp-hint'>" + html.escape(_(
                "Builds the model as a torch module and runs two steps under fake tensors on "
                "the CPU (no GPU needed), counting every byte it allocates.")) + "</div>")
        self.button.description = _("Trace this plan")
        self.button.disabled = job.running or refusal is not None
        self.progress.show(job)
        self.output.value = self._result_html()

    def _result_html(self) -> str:
        job = self.job
        if job.state == M.CANCELLED:
            return message_html(_("Cancelled: the trace's process was stopped."), "info")
        if job.state == M.ERROR:
            return message_html(_("The trace failed: {error}").format(error=msg(job.error)))
        if job.state != M.DONE or not isinstance(job.result, dict):
            return ""
        r = job.result
        t = r.get("trace") or {}
        peak = (r.get("per_gpu") or {}).get("peak_allocated_bytes")
        parts = []
        if self.for_scenario is not None and self.state.scenario is not None and \
                self.for_scenario.to_query() != self.state.scenario.to_query():
            parts.append(message_html(_("This trace is of an earlier plan: trace again to "
                                        "compare it with this one."), "warn"))
        head = _("Traced peak {peak}: {phase}, step {step}").format(
            peak=size(peak), phase=phase_label(t.get("peak_phase", "?")), step=t.get("peak_step", "?"))
        took = _("{ops} ops in {seconds} s").format(ops=f"{t.get('ops', 0):,}",
                                                    seconds=f"{t.get('seconds', 0):.1f}")
        parts.append(f"<div class='vp-measure-head'>{html.escape(head)} "
                     f"<span class='vp-hint'>{html.escape(took)}</span></div>")
        est = self.for_estimate or {}
        rows = M.compare(est, r)
        if rows:
            parts.append(comparison_html(rows, _("Trace")))
            ep = M.peak_phase(est)
            if ep:
                parts.append("<div class='vp-hint'>" + html.escape(
                    _("The estimate's peak: {phase}.").format(phase=phase_label(ep))) + "</div>")
        parts.append(modules_html(M.largest_modules(r)))
        for note in t.get("notes") or []:
            parts.append(f"<div class='vp-hint'>{html.escape(msg(note))}</div>")
        self._draw_timeline(r, est)
        return "".join(parts)

    def _draw_timeline(self, r: dict, est: dict) -> None:
        events = M.timeline(r)
        key = id(r)
        if not events or getattr(self, "_drawn", None) == key:
            return
        self._drawn = key
        dev = self.state.device
        est_peak = (est.get("per_gpu") or {}).get("peak_allocated_bytes")
        top = max([b for _e, _p, b in events] + [est_peak or 0])
        if dev is not None and top < dev.usable_bytes / 2:
            dev = None            # far below the GPU's line: draw the step, not the GPU

        lang = current_lang()

        def build():
            prepare_altair()
            from ...charts.trace_timeline import trace_timeline_chart
            return trace_timeline_chart(events, estimate_peak_bytes=est_peak,
                                        usable_bytes=dev.usable_bytes if dev else None,
                                        gpu_name=dev.name if dev else None, lang=lang)

        def done(chart):
            if isinstance(chart, Exception):
                self.chart_box.children = [L.html(message_html(
                    _("The timeline could not be drawn: {error}").format(error=chart)))]
                return
            if self.chart is None:
                self.chart = ChartPanel(lambda: None, height=260, cls="vp-trace-timeline")
            self.chart_box.children = [self.chart]
            self.chart.show(chart)
        self._charts.run(build, speaking_for(self.state, done))
