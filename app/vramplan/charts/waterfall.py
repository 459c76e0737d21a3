"""The advisor's recommendations as a waterfall: today's peak, each change's saving (and its
cost), down to what the plan needs after them, against the GPU's usable memory."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..i18n import gettext as _t
from ..i18n import translate_message
from . import theme
from .waterfall_pool import axis_words, pool_rows, serving_of

KIND_COLORS = {
    "today": theme.NEUTRAL_COLOR, "saving": theme.OKABE_ITO["sky_blue"],
    "increase": theme.NO_FIT_COLOR, "combined": theme.LIGHT_COLOR,
    "fits": theme.FIT_COLOR, "does not fit": theme.NO_FIT_COLOR,
}


NARROW_STEP_PX = 120      # the step names' width in a narrow chart (a phone)
NARROW_LIMIT_COLUMNS = 26  # the usable-memory line's text a line there
LIMIT_LINE_PX = 13         # its line height
LABEL_CHARS = 44          # a bar's label past this is cut with "…" (the tooltip has it all)
NO_COST = "no extra compute or traffic"      # a change whose every cost figure is nil
ADVISOR_COST_KEYS = ("compute_share", "bubble_share", "time_share", "accuracy_risk", "changes_job",
                     "score", "one_off", "uncertain")


def _pct(v: float) -> str:
    return f"{v:+.0%}"


def _share(v: float) -> str:
    """0.0088 -> '+0.9%', 0.33 -> '+33%' (a share under 10% keeps one decimal)."""
    return f"+{v:.1%}" if abs(v) < 0.0995 else f"+{v:.0%}"


def cost_text(cost: Any, lang: str = "en") -> str:
    """An advisor `Cost` (or its `to_dict()`) in words, the advisor's figures as the planner's
    cards print them: '+2.6% compute · +23% step time in transfers over PCIe Gen4 x16 ·
    accuracy risk medium · changes the job · 16 GPUs'; 'no extra compute or traffic' when
    every figure is nil. `lang`: the words in that language (`vramplan.i18n`; the report's
    catalogue). The one wording of a cost: the report and the page's advisor panel use it."""
    c = cost.to_dict() if hasattr(cost, "to_dict") else dict(cost or {})
    parts = []
    if theme.finite(c.get("compute_share")) and c["compute_share"] > 0:
        parts.append(_t("{share} compute", lang).format(share=_share(c["compute_share"])))
    if theme.finite(c.get("bubble_share")) and c["bubble_share"] > 0:
        parts.append(_t("{share} step time in the pipeline bubble", lang).format(
            share=_share(c["bubble_share"])))
    if theme.finite(c.get("time_share")) and c["time_share"] > 0:
        link = c.get("host_link") or c.get("link")
        link = translate_message(str(link), lang) if link else link
        text = "{share} step time in transfers over {link}" if link else \
            "{share} step time in transfers"
        parts.append(_t(text, lang).format(share=_share(c["time_share"]), link=link))
    if c.get("accuracy_risk") not in (None, "none"):
        risk = _t(f"accuracy risk {c['accuracy_risk']}", lang)
        parts.append(risk)
    if c.get("changes_job"):
        parts.append(_t("changes the job", lang))
    if theme.finite(c.get("gpus")) and c["gpus"] > 1:
        parts.append(_t("{n} GPUs", lang).format(n=int(c["gpus"])))
    if c.get("one_off"):
        parts.append(_t(str(c["one_off"]), lang))
    if c.get("uncertain"):
        parts.append(_t("the saving depends on the stack", lang))
    return " · ".join(parts) or _t(NO_COST, lang)


def cost_label(cost: Any, lang: str = "en") -> str:
    """A recommendation's cost in a few words: an advisor `Cost` (or its dict) as `cost_text`
    words; a string as is; another dict's `label` / `summary` / `text`, else its items
    ('step_time_fraction': 0.33 -> 'step time +33%'); '' when none."""
    if hasattr(cost, "to_dict") or (isinstance(cost, Mapping) and
                                    any(k in cost for k in ADVISOR_COST_KEYS)):
        return cost_text(cost, lang)
    if not cost:
        return ""
    if isinstance(cost, str):
        return cost
    if not isinstance(cost, Mapping):
        return str(cost)
    for k in ("label", "summary", "text"):
        if isinstance(cost.get(k), str) and cost[k]:
            return cost[k]
    parts = []
    for k, v in cost.items():
        name = str(k)
        if isinstance(v, bool) or v is None:
            continue
        if theme.finite(v) and name.endswith(("_fraction", "_pct", "_ratio")):
            name = name.rsplit("_", 1)[0]
            v = _pct(v / 100 if k.endswith("_pct") else v)
        elif theme.finite(v) and name.endswith("_bytes"):
            name, v = name[:-6], f"{v / theme.GiB:,.1f} GiB"
        elif theme.finite(v):
            v = f"{v:,.3g}"
        parts.append(f"{name.replace('_', ' ')} {v}")
    return ", ".join(parts)


def shorten(text: str, limit: int = LABEL_CHARS) -> str:
    """`text` cut to `limit` characters at a word (or a ' · ' part) with '…' at the end."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ·,;:-") + "…"


def _device_used(est: Any) -> int | None:
    d = theme.as_dict(est) if est is not None else {}
    v = (d.get("per_gpu") or {}).get("device_used_bytes", d.get("device_used_bytes"))
    return int(v) if theme.finite(v) else None


def _plan_steps(advice: Mapping[str, Any], plan: Any) -> tuple[list[dict], int | None]:
    recs = [r for r in advice.get("recommendations") or [] if isinstance(r, Mapping)]
    if plan is None:
        return recs, None
    if isinstance(plan, int) and not isinstance(plan, bool):
        plan = (advice.get("plans") or [])[plan]
    by_id = {r.get("id"): r for r in recs}
    entries = next((plan.get(k) for k in ("recommendations", "steps", "ids")
                    if isinstance(plan.get(k), list)), [])
    steps = []
    for e in entries:
        if isinstance(e, Mapping):
            steps.append({**by_id.get(e.get("id"), {}), **e})
        elif e in by_id:
            steps.append(by_id[e])
    return steps, _device_used(plan.get("estimate"))


def _title(rec: Mapping[str, Any], lang: str) -> str:
    """A change's bar name in `lang`, as the advice tables say it (page, report, CLI)."""
    title = rec.get("title") or rec.get("id")
    return translate_message(str(title), lang) if title else _t("change", lang)


def _unpriced_row(recs: list, at: int, to: int, plan: Any, lang: str) -> dict:
    """One bar for a plan's steps without a saving of their own, from `at` to `to`, named by
    their titles; their costs, else the plan's when it is the only such step."""
    cost = [cost_label(r.get("cost"), lang) for r in recs if r.get("cost")]
    if not cost and len(recs) == 1 and isinstance(plan, Mapping):
        cost = [cost_label(plan.get("cost"), lang)]
    return {"step": " + ".join(_title(r, lang) for r in recs),
            "kind": "saving" if to <= at else "increase", "from": at, "to": to,
            "cost": " · ".join(c for c in cost if c),
            "id": "+".join(str(r.get("id")) for r in recs)}


def waterfall_rows(advice: Mapping[str, Any], *, peak_bytes: int | None = None,
                   usable_bytes: int | None = None, estimate: Any = None, plan: Any = None,
                   until_fits: bool = True, lang: str = "en") -> list[dict]:
    """Bars of the waterfall, top to bottom: "Today" (0 to the peak), one per recommendation
    (from the running total down by its `saves_bytes`), "Combined effect" when a plan's own
    estimate differs from the sum of its steps, and the result (0 to what is left). A plan's
    steps are all named: one without a saving of its own (a scale-out layout, whose saving
    is the plan's estimate against the steps before it) takes that difference, with the
    plan's `cost` when it is the only such step.

    A serve plan (an `estimate` with a KV pool, no `peak_bytes`) is drawn in KV-pool tokens
    instead, up to one max_model_len request (waterfall_pool.pool_rows: what decides whether
    the engine starts). The peak is `peak_bytes`, else the device_used_bytes of `estimate`. `plan`: one of
    `advice["plans"]` (or its index) listing recommendation ids (`recommendations`, `steps` or
    `ids`) and optionally its `estimate`; without it every recommendation with a finite
    saving is taken in the advisor's order, stopping once the total fits (`until_fits`).
    Row: order, step, kind, start_gib, end_gib, bytes, text (the saving and the cost in
    words), label (`text` cut to LABEL_CHARS for the bar), cost, id. `lang`: the words in
    that language (`vramplan.i18n`)."""
    if isinstance(plan, int) and not isinstance(plan, bool):
        plan = (advice.get("plans") or [])[plan]
    sv = serving_of(advice, estimate) if not theme.finite(peak_bytes) else None
    if sv is not None:     # a serve plan: the KV pool's tokens (waterfall_pool.py)
        return pool_rows(advice, sv, _plan_steps(advice, plan)[0], plan,
                         plan.get("estimate") if isinstance(plan, Mapping) else None,
                         until_fits, lang, cost_label, _title)
    peak = peak_bytes if theme.finite(peak_bytes) else _device_used(estimate)
    if peak is None:
        return []
    steps, plan_used = _plan_steps(advice, plan)
    rows = [{"step": _t("Today's peak", lang), "kind": "today", "from": 0, "to": int(peak), "cost": "",
             "id": "today"}]
    at, unpriced = int(peak), []
    for rec in steps:
        saves = rec.get("saves_bytes")
        if not theme.finite(saves) or (saves == 0 and plan is None):
            if plan is not None:       # a plan's step with no saving of its own (a scale-out)
                unpriced.append(rec)
            continue
        if plan is None and until_fits and usable_bytes and at <= usable_bytes:
            break
        new = max(0, at - int(saves))
        rows.append({"step": _title(rec, lang), "kind": "saving" if saves >= 0 else "increase",
                     "from": at, "to": new, "cost": cost_label(rec.get("cost"), lang),
                     "id": rec.get("id")})
        at = new
    if unpriced:                       # named: the plan's own estimate less the steps above
        rows.append(_unpriced_row(unpriced, at, plan_used if plan_used is not None else at,
                                  plan, lang))
        at = rows[-1]["to"]
    if plan_used is not None and plan_used != at:
        rows.append({"step": _t("Combined effect", lang), "kind": "combined", "from": at,
                     "to": plan_used, "cost": _t("the plan's own estimate", lang),
                     "id": "combined"})
        at = plan_used
    fits = usable_bytes is None or at <= usable_bytes
    rows.append({"step": _t("After these changes" if len(rows) > 1 else "No change listed",
                            lang),
                 "kind": "fits" if fits else "does not fit", "from": 0, "to": at, "cost": "",
                 "id": "after"})
    out = []
    for i, r in enumerate(rows):
        delta = r["to"] - r["from"]
        if r["kind"] in ("today", "fits", "does not fit"):
            text = f"{r['to'] / theme.GiB:,.1f} GiB"
            if usable_bytes and r["kind"] != "today":
                text += " · " + (_t("fits", lang) if fits else _t(
                    "still {size} GiB over", lang).format(
                    size=f"{(at - usable_bytes) / theme.GiB:,.1f}"))
        else:
            text = f"{'-' if delta < 0 else '+'}{abs(delta) / theme.GiB:,.1f} GiB"
            if r["cost"]:
                text += f" · {r['cost']}"
        out.append({"order": i, "step": r["step"], "kind": r["kind"], "id": r["id"],
                     "start_gib": theme.gib(min(r["from"], r["to"])),
                     "end_gib": theme.gib(max(r["from"], r["to"])), "bytes": delta,
                     "cost": r["cost"], "text": text, "label": shorten(text),
                     "label_gib": theme.gib(max(r["from"], r["to"]))})
    return out


def _limit_layers(at_x: float, text: str, top_gib: float, lang: str) -> list:
    """The limit (the GPU's usable memory; a serve plan's max_model_len request) at `at_x` on
    the axis: a dashed line and its text above the plot; in a phone's narrow chart the text
    in lines, ending at the line where it would run past the plot's right edge (`top_gib`:
    the axis' end)."""
    import altair as alt
    line = theme.narrow_rows([{"usable_gib": at_x, "text": text}], "text", NARROW_LIMIT_COLUMNS)
    lbase = alt.Chart(alt.Data(values=line))
    at = at_x / top_gib
    # Vega puts a text's first line at y and the others below it: lift the lines above the plot
    up = line[0]["text_narrow"].count("\n") * LIMIT_LINE_PX
    long = (f"width * {1 - at:.4g} < ({theme.IS_NARROW} ? "
            f"{theme.text_px(line[0]['text_narrow']) + 4:.0f} : "
            f"{theme.text_px(line[0]['text']) + 4:.0f})")
    return [lbase.mark_rule(color=theme.LIMIT_COLOR, strokeWidth=2, strokeDash=[5, 3]).encode(
                x="usable_gib:Q", tooltip=[alt.Tooltip("text:N", title=_t("Limit", lang))]),
            lbase.transform_calculate(shown=theme.narrow_field("text")).mark_text(
                align={"expr": f"{long} ? 'right' : 'left'"}, dx={"expr": f"{long} ? -4 : 4"},
                y={"expr": f"{theme.IS_NARROW} ? {-4 - up} : -4"}, baseline="bottom",
                lineBreak="\n", lineHeight=LIMIT_LINE_PX, color=theme.LIMIT_COLOR).encode(
                x="usable_gib:Q", text="shown:N")]


def savings_waterfall_chart(advice: Mapping[str, Any], *, peak_bytes: int | None = None,
                            usable_bytes: int | None = None, gpu_name: str | None = None,
                            estimate: Any = None, plan: Any = None, until_fits: bool = True,
                            width: int | str = "container", row_height: int = 28,
                            lang: str = "en"):
    """Floating horizontal bars (GiB per GPU), one row per step of `waterfall_rows`, with each
    step's saving and cost as a label and a dashed line at the usable memory (`usable_bytes`,
    else the estimate's GPU). The usable memory and GPU name default to `estimate["gpu"]`."""
    import altair as alt

    gpu = (theme.as_dict(estimate).get("gpu") if estimate is not None else None) or {}
    usable = usable_bytes if theme.finite(usable_bytes) else theme.usable_of(gpu)
    name = gpu_name or gpu.get("name") or "GPU"
    rows = waterfall_rows(advice, peak_bytes=peak_bytes, usable_bytes=usable,
                          estimate=estimate, plan=plan, until_fits=until_fits, lang=lang)
    pool = bool(rows) and rows[0].get("unit") == "tokens"
    words = axis_words(rows[0]["need"], lang) if pool else {}
    line_at = rows[0]["need"] if pool else theme.gib(usable) if usable else 0
    ext = max([r["end_gib"] for r in rows] + [line_at, 1.0])
    order = [r["step"] for r in rows]
    kinds = [k for k in KIND_COLORS if any(r["kind"] == k for r in rows)] or ["today"]
    y = alt.Y("step:N", sort=order, title=None,  # long step names end in "…" (tooltip: all)
              axis=alt.Axis(labelLimit=theme.when_narrow(NARROW_STEP_PX, 220), ticks=False,
                            domain=False))
    x = alt.X("start_gib:Q", title=words.get("x") or _t(
        "Device memory at the peak (GiB per GPU)", lang), scale=alt.Scale(
        domain=[0, round(ext * 1.55, 3)], nice=False), axis=alt.Axis(
        titleAnchor="end", format=",d") if pool else theme.gib_axis(titleAnchor="end"))
    tooltip = [alt.Tooltip("step:N", title=_t("Change", lang)),
               alt.Tooltip("text:N", title=_t("Effect", lang)),
               alt.Tooltip("cost:N", title=_t("Cost", lang))]
    base = alt.Chart(alt.Data(values=rows))
    bars = base.mark_bar(height={"band": 0.7}, cornerRadius=2).encode(
        x=x, x2="end_gib:Q", y=y,
        color=alt.Color("kind:N", legend=None, scale=alt.Scale(
            domain=kinds, range=[KIND_COLORS[k] for k in kinds])),
        tooltip=tooltip)
    # a label starts at most at 1/1.55 of the width: what is left (less dx and a margin) is
    # its limit, so it ends in "…" inside the plot instead of being clipped at its edge
    labels = base.mark_text(align="left", dx=5, limit={"expr": "max(40, width * 0.35 - 10)"}
                            ).encode(x="label_gib:Q", y=y, text="label:N", tooltip=tooltip)
    # the limit line first: bars and labels are drawn over it
    text = words.get("line") or _t("{gpu}: {size} GiB usable", lang).format(
        gpu=name, size=f"{(usable or 0) / theme.GiB:,.1f}")
    layers = _limit_layers(line_at, text, round(ext * 1.55, 3), lang) if line_at else []
    layers += [bars, labels]
    n = sum(r["kind"] in ("saving", "increase") for r in rows)
    sub = (words.get("sub") or _t("{n} change(s); savings as the advisor estimates each one",
                                  lang).format(n=n)
           if plan is None else _t("one plan's changes applied in turn", lang))
    return theme.finish(alt.layer(*layers), title_text=words.get("title") or _t(
        "From today's peak to what fits (GiB per GPU)", lang),
        subtitle=sub, width=width, height=max(2, len(rows)) * row_height)


def waterfall_steps(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The step names of waterfall rows, top to bottom (for tests and the report)."""
    return [r["step"] for r in sorted(rows, key=lambda r: r["order"])]
