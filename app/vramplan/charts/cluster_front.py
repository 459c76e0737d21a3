"""GPUs needed: the cluster solver's Pareto front (advisor/cluster.py) as GPUs against step time,
one point per layout, the plan's own GPU count marked. A click on a point selects it: the chart
carries the point selection `FRONT_SELECTION` on `i` (the layout's place on the front), which
the page reads back (`picked_front`) and applies through its state."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..i18n import gettext
from . import theme

FRONT_SELECTION = "layout_pick"


def front_rows(front: Iterable[Any]) -> list[dict]:
    """One row per solver `Option` (or a dict with the same fields): i, gpus, step_s,
    gpu_hours (per billion tokens where the job states that budget), used_gib (per GPU) and
    layout (its text)."""
    rows = []
    for i, o in enumerate(front):
        d = o if isinstance(o, Mapping) else {
            "gpus": o.layout.gpus, "step_s": o.step_s, "gpu_hours": o.gpu_hours,
            "used": o.device_used_bytes, "layout": o.layout.text()}
        rows.append({"i": i, "gpus": int(d["gpus"]), "step_s": float(d["step_s"]),
                     "gpu_hours": d.get("gpu_hours"), "used_gib": theme.gib(d.get("used") or 0),
                     "layout": str(d["layout"])})
    return rows


def cluster_front_chart(front: Iterable[Any], *, gpus_now: int | None = None,
                        width: int | str = "container", height: int = 220,
                        lang: str = "en"):
    """Points (GPUs, seconds per step) on log axes joined in GPU order; the plan's own GPU
    count (`gpus_now`) as a dashed rule. Clicking a point selects its layout."""
    import altair as alt

    def t(text: str) -> str:
        return gettext(text, lang)
    rows = front_rows(front)
    base = alt.Chart(alt.Data(values=rows))
    xs = [r["gpus"] for r in rows] + ([gpus_now] if gpus_now else [])
    ys = [r["step_s"] for r in rows] or [1.0]
    x = alt.X("gpus:Q", title=t("GPUs"), scale=alt.Scale(
        type="log", domain=[min(xs or [1]) / 1.3, max(xs or [1]) * 1.3], nice=False),
        axis=alt.Axis(grid=True, tickCount=6, format="~s"))
    y = alt.Y("step_s:Q", title=t("Seconds per step"), scale=alt.Scale(
        type="log", domain=[min(ys) / 1.4, max(ys) * 1.4], nice=False),
        axis=alt.Axis(grid=True, tickCount=5))
    pick = alt.selection_point(name=FRONT_SELECTION, fields=["i"], on="click",
                               clear="dblclick")
    tips = [alt.Tooltip("layout:N", title=t("Layout")),
            alt.Tooltip("step_s:Q", title=t("Seconds per step"), format=",.2f"),
            alt.Tooltip("gpu_hours:Q", title=t("GPU-hours per billion tokens"), format=",.0f"),
            alt.Tooltip("used_gib:Q", title=t("Device used (GiB per GPU)"),
                        format=theme.GIB_FORMAT)]
    line = base.mark_line(color=theme.LIGHT_COLOR, interpolate="step-after").encode(x=x, y=y)
    points = base.mark_point(filled=True, size=110, cursor="pointer",
                             color=theme.CHOSEN_COLOR).encode(
        x=x, y=y, tooltip=tips,
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.4))).add_params(pick)
    labels = base.mark_text(align="left", dx=7, dy=-7, fontSize=10.5, color=theme.INK).encode(
        x=x, y=y, text="gpus:Q")
    layers = [line, points, labels]
    if gpus_now:
        said = t("this plan: 1 GPU") if gpus_now == 1 else t("this plan: {n} GPUs").format(
            n=gpus_now)
        now = alt.Chart(alt.Data(values=[{"gpus": gpus_now, "text": said}]))
        layers[:0] = [now.mark_rule(color=theme.LIMIT_COLOR, strokeDash=[5, 3]).encode(
            x="gpus:Q", tooltip=[alt.Tooltip("text:N", title=t("Plan"))]),
            now.mark_text(align="left", baseline="top", dx=4, dy=2, color=theme.LIMIT_COLOR
                          ).encode(x="gpus:Q", y=alt.value(0), text="text:N")]
    return theme.finish(alt.layer(*layers), title_text=t("GPUs needed against step time"),
                        subtitle=t("click a point to apply that layout"), width=width,
                        height=height)


def picked_front(selection: Any) -> list[int]:
    """The front places (`i`) of a click selection (what `alt.JupyterChart` reports, or a
    list of `{"i": ...}` dicts); [] when nothing is picked."""
    value = getattr(selection, "value", selection)
    if not value:
        return []
    if isinstance(value, Mapping):
        got = value.get("i")
        if got is None:
            return []
        return [int(v) for v in got] if isinstance(got, (list, tuple)) else [int(got)]
    return [int(v["i"]) for v in value if isinstance(v, Mapping) and v.get("i") is not None]
