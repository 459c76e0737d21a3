"""GPUs needed: the cluster solver's front for a transformer training plan that does not fit on
its GPU (or runs on several): per layout its GPU count, the layout, the step time and the
GPU-hours per billion tokens, each applied with one click on its point in the chart (GPUs
against step time) or its button (the plan becomes that layout's scenario, the same global
batch; through `PlanState.apply_change`). Computed off the kernel's loop (`advisor.cluster.solve`);
every layout on it fits every rank by the estimate.
"""
from __future__ import annotations

import html
from types import SimpleNamespace

import ipywidgets as W

from . import looks as L
from ...charts.cluster_front import FRONT_SELECTION
from .advisor import title_html
from .chart import ChartPanel
from ..state.i18n import _
from .jobs import Jobs
from .section import section
from ..state.text import count, gib, message_html

_e = html.escape
MAX_GPUS = 512
ROWS = 8
BUDGET = 1e9               # tokens: GPU-hours per billion tokens


def job_for(sc, dev, limit: int):
    """The solver's job for a training plan (None for one it does not take)."""
    from ...advisor.cluster import Job
    if sc is None or dev is None or sc.task not in ("train", "lora", "qlora") or \
            not sc.model or not isinstance(sc.precision, str) or not sc.seq_len:
        return None
    batch = int(sc.batch_size) * int(sc.gradient_accumulation or 1) * sc.parallel.data
    opts = tuple(sorted(set(sc.options) | {"chunked-loss"}))
    return Job(sc.model, int(sc.seq_len), batch, dev.id, sc.precision, sc.optimizer, MAX_GPUS,
               token_budget=BUDGET, options=opts, task=sc.task, base=sc.to_dict(),
               limit_bytes=int(limit))


def solve_for(job):
    from ...advisor.cluster import solve
    _, front = solve(job)
    return [o for o in front if o.estimate is not None]   # EP layouts set parallel.expert


class ClusterView(W.VBox):
    def __init__(self, state, background: bool | None = None):
        self.state = state
        self.jobs = Jobs("vramplan-cluster", background)
        self.status = L.html()
        self.rows = W.VBox()
        self.chart: ChartPanel | None = None   # made with the first front (fewer models)
        self.card = section(_("GPUs needed"), self.status, self.rows, cls="vp-cluster")
        super().__init__([self.card])
        self.layout.display = "none"
        self._asked = None
        self._rows: list[W.HBox] = []
        self.buttons: list[W.Button] = []
        self.front: list = []

    def render(self) -> None:
        st = self.state
        if st.result is None or self._asked is st.result:
            return
        self._asked = st.result
        est = st.estimate
        sc, dev = st.scenario, st.device
        want = est is not None and (not est.fits or sc.parallel.gpus > 1)
        job = job_for(sc, dev, self._limit(sc, dev)) if want else None
        if job is None:
            self.layout.display = "none"
            return
        self.layout.display = ""
        self.status.value = f"<div class='vp-hint'>{_('Sizing the cluster…')}</div>"
        self.rows.children = []
        result = st.result
        self.jobs.run(lambda: solve_for(job), lambda got: self._done(result, job, got))

    @staticmethod
    def _limit(sc, dev) -> int:
        """The plan's own memory limit (usable less its safety_margin), the one the verdict,
        max batch and the advisor use."""
        from ...estimate import memory_limit
        return int(memory_limit(sc, dev))

    def _done(self, result, job, got) -> None:
        if result is not self.state.result:
            return
        if isinstance(got, Exception):
            self.layout.display = "none"
            return
        self.front = got
        self.buttons = []
        self._chart(job, got)
        if not got:
            self.status.value = message_html(_("No layout on up to {n} GPUs fits every "
                                               "rank.").format(n=job.max_gpus), "info")
            self.rows.children = []
            return
        said = _("Layouts that keep the global batch of 1 sequence, fewest GPUs first, each "
                 "faster than every layout on fewer GPUs.") if job.global_batch == 1 else _(
            "Layouts that keep the global batch of {batch} sequences, fewest GPUs first, each "
            "faster than every layout on fewer GPUs.").format(batch=count(job.global_batch))
        self.status.value = "<div class='vp-hint'>" + _e(said) + "</div>"
        rows = []
        for i, o in enumerate(got[:ROWS]):
            row = self._row(i)
            figs = _("{step} s per step · {hours} GPU-hours per billion tokens · {used} per "
                     "GPU").format(step=f"{o.step_s:.2f}", hours=f"{o.gpu_hours:,.0f}",
                                   used=gib(o.device_used_bytes))
            row.children[0].value = (f"<div class='vp-change'><b>{title_html(o.layout.text())}"
                                     f"</b><div class='vp-hint'>{_e(figs)}</div></div>")
            b = row.children[1]
            b.vp_change = SimpleNamespace(scenario=o.estimate.scenario, title=o.layout.text())
            b.description = _("Apply this layout")
            self.buttons.append(b)
            rows.append(row)
        self.rows.children = rows

    def _chart(self, job, front) -> None:
        """The front as GPUs against step time (charts.cluster_front), or a message."""
        if not front:
            if self.chart is not None:
                self.chart.show_message(_("No layout to draw."))
            return
        if self.chart is None:
            self.chart = ChartPanel(lambda: None, height=220, cls="vp-cluster-chart")
            self.chart.on_select(FRONT_SELECTION, self._picked)
            kids = list(self.card.children)
            self.card.children = kids[:-1] + [self.chart, kids[-1]]    # above the rows
        try:
            from ...charts.cluster_front import cluster_front_chart
            from .chart import freeze, prepare_altair
            prepare_altair()
            chart = cluster_front_chart(front[:ROWS], gpus_now=(job.base.get("parallel") or {})
                                        .get("gpus"), lang=self.state.lang)
            self.chart.show(freeze(chart))
        except Exception as exc:  # the rows below still apply a layout
            self.chart.show_message(_("The chart could not be drawn: {error}").format(
                error=f"{type(exc).__name__}: {exc}"), "error")

    def _picked(self, selection) -> None:
        """A click on a front point: its layout applied through the state (as its button)."""
        from ...charts.cluster_front import picked_front
        got = picked_front(selection)
        if got and got[0] < len(self.buttons):
            self.state.apply_change(self.buttons[got[0]].vp_change)

    def _row(self, i: int) -> W.HBox:
        while len(self._rows) <= i:
            b = L.button()
            b.add_class("vp-apply")
            b.on_click(lambda btn: self.state.apply_change(btn.vp_change))
            row = W.HBox([L.html(), b])
            row.add_class("vp-change-row")
            self._rows.append(row)
        return self._rows[i]

    @property
    def value(self) -> str:
        return self.status.value + "".join(r.children[0].value for r in self.rows.children)
