"""The charts panel: one reused chart widget and a choice of views of the current plan, each a
`vramplan.charts` builder fed by the estimate, the sweep or the hardware database:

    curve      device memory against the batch size, the usable memory of the GPU and of the
               next larger ones, the max batch
    compare    every GPU on this plan (headroom, max batch or usable memory); click to choose
    bandwidth  what a step needs against what the GPU sustains
    roofline   arithmetic intensity against the GPU's compute and memory ceilings
    phases     memory by component at the top of each phase of the step
    savings    the advisor's changes as a waterfall from today's peak to what fits
    hierarchy  the chosen GPU's memory hierarchy
    landscape  capacity against bandwidth of every GPU in the database

Views a plan cannot draw are not offered. The data and the chart are computed off the
kernel's loop (`jobs.Jobs`), so the controls never wait on a sweep.
"""
from __future__ import annotations

from typing import Any

import ipywidgets as W

from . import looks as L
from ...advisor.compare import gpu_rows as comparison_rows
from ...advisor.compare import larger_gpus
from .chart import ChartPanel, freeze, prepare_altair
from ..state.i18n import N_, _, speaking_for
from .jobs import Jobs
from .section import section
from ..state.text import message_html

VIEWS = {"curve": N_("Memory vs batch"), "compare": N_("GPUs compared"), "savings": N_("Savings"),
         "bandwidth": N_("Bandwidth"), "roofline": N_("Roofline"), "phases": N_("Phases"),
         "hierarchy": N_("Memory hierarchy"), "landscape": N_("All GPUs")}
METRICS = {"headroom": N_("headroom"), "max_batch": N_("max batch"),
           "usable": N_("usable memory"), "step_time": N_("shortest time per step")}
TOP = 24                 # bars in the comparison chart (the chosen GPU always stays); the
                         # table below it lists every GPU that passes the GPU filters
CURVE_CAP = 8192


def available(state) -> list[str]:
    """The views the current plan can draw."""
    est = state.result or {}
    bw = est.get("bandwidth") or {}
    out = []
    if state.shown("batch_size") and est:
        out.append("curve")
    if est:
        out.append("compare")
    adv = state.advice
    if adv is not None and any(r.saves_bytes > 0 for r in adv.recommendations) and (
            adv.plans or not adv.fits):
        out.append("savings")
    if bw.get("bytes_per_step") or bw.get("needed_bandwidth_gbs"):
        out.append("bandwidth")
    if bw.get("flops_per_step") and bw.get("bytes_per_step"):
        out.append("roofline")
    if len(est.get("phases") or {}) >= 1:
        out.append("phases")
    return out + ["hierarchy", "landscape"]


def batch_values(max_batch: int) -> list[int]:
    """1, 2, 4, ... past the max batch (so the curve crosses the GPU's line), and the max
    batch and the one after it exactly."""
    top = min(max(16, 4 * max(max_batch, 1)), CURVE_CAP)
    vals, b = set(), 1
    while b <= top:
        vals.add(b)
        b *= 2
    if 0 < max_batch < CURVE_CAP:
        vals |= {max_batch, max_batch + 1}
    return sorted(vals)


def takes_lang(builder) -> bool:
    """Whether a chart builder takes `lang=` (every one of charts/ should)."""
    import inspect
    return "lang" in inspect.signature(builder).parameters


def curve_chart(sc, est: dict, device, db, lang: str = "en") -> Any:
    """Device memory against the batch on the chosen GPU, with its usable memory and that of
    the next larger GPUs, and the max batch marked."""
    from ...charts import memory_curve_chart
    from ...sweep import sweep
    mb = int(est.get("max_batch_size") or 0)
    # each point's fit is the estimate's (the one memory limit, a serving engine's start-up
    # check), not its bytes against usable memory: a vLLM plan whose pool holds no
    # max_model_len request showed 'fits' at every batch under a 'Does not fit' verdict
    r = sweep(sc, {"batch_size": batch_values(mb)}, gpus=[device.id])
    points = [{"x": p["batch_size"], "device_used_bytes": int(r.used[i, 0]),
               "fits": bool(r.fits[i, 0])}
              for i, p in enumerate(r.points) if (i, 0) not in r.errors]
    return memory_curve_chart(points, gpu=device.to_dict(),
                              pinned=[d.to_dict() for d in larger_gpus(db, device)],
                              max_x=mb or None, x_title="Batch size", x_unit="per GPU",
                              lang=lang)


def build(view: str, snap: dict) -> Any:
    """The chart of one view for a snapshot of the state (plain values: safe in a thread)."""
    prepare_altair()
    from ... import charts as C
    sc, est, dev, db = snap["scenario"], snap["result"], snap["device"], snap["db"]
    lang = snap.get("lang", "en")
    kw = {"lang": lang}
    if view == "curve":
        return curve_chart(sc, est, dev, db, lang)
    if view == "compare":
        rows = snap["rows"] if "rows" in snap else compare_rows(snap)
        return C.gpu_comparison_chart(rows, metric=compare_metric(snap), selected=dev.id,
                                      top=TOP, **kw)
    if view == "savings":
        adv = snap["advice"]
        plan = None
        if adv.plans:
            p = adv.plans[0]
            plan = {"steps": p.changes, "estimate": p.estimate.to_dict(),
                    "cost": p.cost.to_dict()}
        return C.savings_waterfall_chart(adv.to_dict(full=False), estimate=est, plan=plan,
                                         usable_bytes=dev.usable_bytes, gpu_name=dev.name,
                                         **(kw if takes_lang(C.savings_waterfall_chart) else {}))
    if view == "bandwidth":
        return C.bandwidth_chart(est, gpu_name=dev.name, **kw)
    if view == "roofline":
        prec = sc.precision if isinstance(sc.precision, str) else sc.precision_for("default")
        return C.roofline_chart(est, dev.to_dict(), precision=prec, **kw)
    if view == "phases":
        return C.phases_chart(est, **kw)
    if view == "hierarchy":
        return C.hierarchy_chart(dev.to_dict(), **kw)
    return landscape_chart(db.devices, dev.id, lang)


def compare_metric(snap: dict) -> str:
    metric = snap.get("metric", "headroom")
    return "headroom" if metric == "max_batch" and not snap["batched"] else metric


def compare_rows(snap: dict) -> list[dict]:
    """The comparison's rows: every GPU that passes the picker's filters, with the plan's
    shortest step on it (advisor.compare.gpu_rows)."""
    return comparison_rows(snap["scenario"], snap["db"], snap["batched"],
                           filters=snap.get("gpu_filters"),
                           bandwidth=(snap["result"] or {}).get("bandwidth"))


def compare_view(snap: dict):
    """(the chart, the table's HTML) of the comparison (safe in a thread)."""
    from ..state.gpu_table import gpu_table_html
    rows = compare_rows(snap)
    table = gpu_table_html(rows, compare_metric(snap), snap["device"].id,
                           snap.get("gpu_filters"), snap["batched"])
    return freeze(build("compare", {**snap, "rows": rows})), table


def landscape_chart(devices, gpu: str, lang: str = "en"):
    """`charts.capacity_bandwidth_chart`: capacity against bandwidth of every GPU, the chosen
    one ringed and named (the builder draws no empty layer, so Vega has no extent to warn
    about)."""
    from ... import charts as C
    kw = {"lang": lang} if takes_lang(C.capacity_bandwidth_chart) else {}
    return C.capacity_bandwidth_chart(devices, gpu, **kw)


class ExplorePanel(W.VBox):
    def __init__(self, state, background: bool | None = None):
        self.state = state
        self.jobs = Jobs("vramplan-charts", background)
        self.view = W.ToggleButtons(options=[(_(VIEWS[v]), v) for v in available(state)],
                                    value="curve" if "curve" in available(state) else None)
        self.view.add_class("vp-views")
        self.metric = W.Dropdown(options=[(_("Sort by {metric}").format(metric=_(t)), k)
                                          for k, t in METRICS.items()],
                                 value="headroom", layout=W.Layout(width="auto"))
        self.metric.add_class("vp-metric")
        self.status = L.html()
        self.chart = ChartPanel(lambda: None, height=320, cls="vp-explore-chart")
        self.chart.on_select("gpu_pick", self._picked)
        self.table = L.html()           # the comparison: every GPU the filters pass
        self.view.observe(speaking_for(state, lambda _c: self.update()), "value")
        self.metric.observe(speaking_for(state, lambda _c: self.update()), "value")
        super().__init__([section(_("Charts"), self.view, self.metric, self.status, self.chart,
                                  self.table, cls="vp-explore")])
        self._key = None
        self.shown_view: str | None = None
        self.enabled = False              # the app turns it on after first paint

    def render(self) -> None:
        views = available(self.state)
        opts = [(_(VIEWS[v]), v) for v in views]
        if list(self.view.options) != opts:
            keep = self.view.value if self.view.value in views else views[0]
            self.view.options = opts
            self.view.value = keep
        self.metric.layout.display = "" if self.view.value == "compare" else "none"
        (self.add_class if self.state.stale else self.remove_class)("vp-stale")
        self.update()

    def update(self) -> None:
        st = self.state
        if not self.enabled or st.result is None or self.view.value is None:
            return
        view = self.view.value
        self.metric.layout.display = "" if view == "compare" else "none"
        key = (view, id(st.result), st.gpu, self.metric.value,
               id(st.advice) if view == "savings" else None,
               tuple(sorted(st.gpu_filters.items())) if view == "compare" else None)
        if key == self._key:
            return
        self._key = key
        snap = {**st.snapshot(), "metric": self.metric.value, "advice": st.advice,
                "lang": st.lang}
        self.status.value = f"<div class='vp-hint'>{_('Computing…')}</div>"
        if view == "compare":
            self.jobs.run(lambda: compare_view(snap), lambda got: self._done(view, got))
        else:
            self.jobs.run(lambda: freeze(build(view, snap)), lambda chart: self._done(view, chart))

    def _done(self, view: str, chart) -> None:
        table = ""
        if isinstance(chart, tuple):
            chart, table = chart
        self.table.value = table        # empty (nothing shown) for the other views
        if isinstance(chart, Exception):
            self.status.value = message_html(_("The {view} chart could not be drawn: {error}")
                                             .format(view=_(VIEWS[view]),
                                                     error=f"{type(chart).__name__}: {chart}"))
            return
        self.status.value = ""
        self.shown_view = view
        self.chart.show(chart)

    def _picked(self, value) -> None:
        from ...charts import picked_ids
        ids = picked_ids(value)
        if ids and ids[0] != self.state.gpu:
            self.state.set_gpu(ids[0])
