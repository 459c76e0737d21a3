"""The verdict card: fits / does not fit, device used of usable, headroom, the key figures and
the breakdown chart, all from `Estimate.to_dict()` (the JSON of `vramplan estimate --format
json`). When the current input is rejected the last good plan stays on screen, dimmed, with
the reason above it.
"""
from __future__ import annotations

import html
from typing import Any, Mapping

import ipywidgets as W

from . import looks as L
from .chart import ChartPanel
from ..state.i18n import _, current_lang, msg
from .section import section
from ...report.ranks import decided_by
from ...report.words import engine_why, verdict as verdict_words
from ...vocab import phase_label
from ..state.text import count, format_params, gib, message_html

_e = html.escape


def layout_words(par: Mapping[str, Any]) -> str:
    """'dp 1, tp 8, pp 2, cp 2, ZeRO 1': dp x tp x pp x cp is the GPU count (contract_keys
    parallel.gpus), so context parallel is said when used (a 32-GPU plan read 'dp 1, tp 8,
    pp 2' without its cp 2); expert parallel too (it splits dp x cp, parallel_keys.py)."""
    dims = [("dp", par.get("data")), ("tp", par.get("tensor")), ("pp", par.get("pipeline"))]
    dims += [(name, par.get(key)) for name, key in (("cp", "context"), ("ep", "expert"))
             if (par.get(key) or 1) > 1]
    parts = [f"{name} {n}" for name, n in dims] + [f"ZeRO {par.get('zero')}"]
    return _(", ").join(parts)


def images_words(n: int, image_size: Any = None) -> str:
    """'2 images of 448×448 px' (the scenario's images / image_size, multimodal_keys.py)."""
    words = _("1 image") if n == 1 else _("{n} images").format(n=count(n))
    if image_size:
        words = _("{images} of {size} px").format(images=words,
                                                  size="×".join(str(x) for x in image_size))
    return words


def task_summary(sc: Mapping[str, Any], batched: bool = True) -> str:
    """'meta-llama/Llama-3.1-8B · lora · batch 1 × 2,048 tokens · bf16' from the scenario
    (`batched`: the form has a batch for it)."""
    arch = sc.get("architecture")
    model = sc.get("model") or (
        _("size-only decoder, {params} params").format(params=format_params(arch["params"]))
        if isinstance(arch, dict) and arch.get("params") else
        _("own config ({name})").format(name=arch.get("model_type", "config.json"))
        if isinstance(arch, dict) else "")
    task = sc.get("task", "")
    size = _("batch {n}").format(n=count(sc.get("batch_size", 1))) if batched else ""
    if sc.get("seq_len"):
        size += " × " + _("{n} tokens").format(n=count(sc["seq_len"]))
    if sc.get("new_tokens"):
        size += " + " + _("{n} new").format(n=count(sc["new_tokens"]))
    if sc.get("resolution"):
        size += (_(" at ") if size else "") + "×".join(str(x) for x in sc["resolution"])
    if sc.get("images"):            # a VLM's sample: its images add tokens and a tower pass
        size += ", " + images_words(sc["images"], sc.get("image_size"))
    if sc.get("frames") and sc["frames"] > 1:
        size += ", " + _("{n} frames").format(n=count(sc["frames"]))
    if sc.get("steps"):
        size += ", " + _("{n} steps").format(n=count(sc["steps"]))
    if sc.get("msaa", 1) > 1:
        size += f", MSAA {sc['msaa']}×"
    prec = sc.get("precision")
    prec = prec if isinstance(prec, str) else (prec or {}).get("default", "")
    if not model:          # model-less workloads: their element type, not a precision
        prec = sc.get("dtype", "")
    parts = [model, task, size, prec]
    if sc.get("checkpointing") not in (None, "none"):
        parts.append(_("{kind} checkpointing").format(kind=_(sc["checkpointing"])))
    par = sc.get("parallel") or {}
    if par.get("gpus", 1) > 1:
        parts.append(_("{gpus} GPUs ({layout})").format(gpus=par["gpus"],
                                                        layout=layout_words(par)))
    if sc.get("offload"):
        parts.append(_("offload {what}").format(what=", ".join(sc["offload"])))
    return " · ".join(_e(str(p)) for p in parts if p)


def verdict_html(est: Mapping[str, Any], usable_bytes: int | None = None,
                 batched: bool = True) -> str:
    """The verdict banner and the key figures. `usable_bytes`: the GPU's usable memory
    (default: device used + headroom, the same number); `batched`: the task has a batch."""
    per = est["per_gpu"]
    used, head = per["device_used_bytes"], est["headroom_bytes"]
    usable = usable_bytes if usable_bytes is not None else used + head
    words = verdict_words(est, usable, current_lang())   # the report's and the CLI's too
    fits, title, detail = words["fits"], _e(words["title"]), words["detail"]
    margin = (est.get("memory_limit") or {}).get("safety_margin_bytes") or 0
    if margin:                       # the one limit: usable less the plan's safety margin
        detail += " · " + _("{size} safety margin kept").format(size=gib(margin))
    by = decided_by(est, current_lang())   # the rank with the most memory, when ranks differ
    if by:
        detail += " · " + by
    if engine_why(est, current_lang()):   # vLLM's start-up check: the words' detail alone
        detail = words["detail"]
    pct = used / usable if usable else 0
    banner = (
        f"<div class='vp-verdict {'vp-fits' if fits else 'vp-nofit'}'>"
        f"<div class='vp-verdict-icon'>{'✓' if fits else '✕'}</div>"
        f"<div class='vp-verdict-main'><div class='vp-verdict-title'>{title}</div>"
        f"<div class='vp-verdict-sub'>{task_summary(est.get('scenario') or {}, batched)}</div></div>"
        f"<div class='vp-verdict-fig'><div class='vp-verdict-used'>{gib(used)} "
        f"<span>{_('of {size}').format(size=gib(usable))}</span></div>"
        f"<div class='vp-verdict-detail'>{_('device used ({pct})').format(pct=f'{pct:.0%}')}"
        f" · {detail}</div></div></div>")
    mb = est.get("max_batch_size")
    if not batched:
        mb_txt, mb_sub = "–", _("the task has no batch")
    elif mb is None:                    # the estimate's null: memory does not grow with it
        mb_txt, mb_sub = _("no limit"), _("memory does not grow with the batch")
    else:
        mb_txt = count(mb) if mb else _("none")
        mb_sub = _("largest batch that fits") if mb else _("batch 1 does not fit")
    phase = _e(_(phase_label(est["peak_phase"])) if est.get("peak_phase") else "–")
    kpis = [
        (_("Peak allocated"), gib(per["peak_allocated_bytes"]), _("live tensors at the peak"), ""),
        (_("Peak reserved"), gib(per["peak_reserved_bytes"]), _("allocator segments"), ""),
        (_("Device used"), gib(used), _("what nvidia-smi shows"), ""),
        (_("Max batch size"), mb_txt, mb_sub, ""),
        (_("Peak phase"), phase, _("where memory peaks"), " vp-kpi-word"),
    ]
    ctx = est.get("max_context")   # generate / serve: estimate.longest_context
    if ctx is not None:
        kpis.insert(4, (_("Longest context"), count(ctx) if ctx else _("none"),
                        _("tokens that fit"), ""))
    serving = est.get("serving")
    if serving and serving.get("concurrent_sequences") is not None:
        kpis = kpis[:3] + _serving_kpis(serving) + kpis[-1:]   # the engine's words (20.7)
    cells = "".join(
        f"<div class='vp-kpi{cls}'>"
        f"<div class='vp-k'>{k}</div><div class='vp-v' title='{v}'>{v}</div>"
        f"<div class='vp-d'>{d}</div></div>" for k, v, d, cls in kpis)
    return f"<div class='vp-estimate'>{banner}<div class='vp-figs'>{cells}</div></div>"


def _serving_kpis(serving: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """A serving engine's capacity (estimate's `serving` section): the sequences of the chosen
    context its KV pool holds at once, and the longest request it holds (was 'Max batch size
    none, batch 1 does not fit' for vLLM's pool of 12,126 tokens under a 131,072 context)."""
    ctx = count(serving.get("context_tokens") or 0)
    longest = serving.get("longest_context_tokens")
    return [(_("Concurrent sequences"), count(serving["concurrent_sequences"]),
             _("of {n} tokens in the KV pool at once").format(n=ctx), ""),
            (_("Longest context"), count(longest) if longest else _("none"),
             _("tokens of one request the KV pool holds"), "")]


def legend_html(components: Mapping[str, int]) -> str:
    """The breakdown's legend as wrapping HTML (the chart's own legend has fixed columns,
    which a narrow card clips): a swatch, the component and its size, in the chart's order."""
    from ...charts import breakdown_rows
    from ...charts.theme import component_color
    items = "".join(
        f"<span class='vp-legend-item'><i style='background:"
        f"{component_color(r['component'])}'></i>"
        f"{_e(r['label'])} <b>{_e(r['size'])}</b></span>"
        for r in breakdown_rows(components, lang=current_lang()))
    return f"<div class='vp-legend'>{items}</div>"


class EstimatePanel(W.VBox):
    """Verdict, figures and the breakdown chart of `state.result`. `render()` after a state
    change; `value` is the panel's HTML (tests read it)."""

    def __init__(self, state):
        self.state = state
        self.banner = L.html()
        self.status = W.HTML(layout=W.Layout(display="none"))
        self.chart = ChartPanel(self._chart, height=110, cls="vp-breakdown", static=self._svg)
        self.legend = L.html()
        self.subtitle = L.html(f"<div class='vp-sub-title'>{_('Memory at the peak, per GPU')}"
                               "</div>")
        self.card = section(None, self.status, self.banner, self.subtitle, self.chart,
                            self.legend, cls="vp-estimate-card", layout=L.shared("layout"))
        super().__init__([self.card], layout=L.shared("layout"))
        self.add_class("vp-estimate-panel")
        self._shown = None

    def render(self) -> None:
        st = self.state
        est = st.result
        if st.stale:
            self.add_class("vp-stale")
            first = next(iter(st.errors.items()), ("", ""))
            why = f"{first[0]}: {msg(first[1])}" if first[0] else msg(first[1])
            self.status.value = message_html(_("The plan is not valid ({why}). Showing the "
                                               "last valid plan.").format(why=why))
            self.status.layout.display = ""
        else:
            self.remove_class("vp-stale")
            self.status.value = ""
            self.status.layout.display = "none"
        if est is None or est is self._shown:
            return
        self._shown = est
        usable = st.device.usable_bytes if st.device is not None else None
        self.banner.value = verdict_html(est, usable, batched=st.shown("batch_size"))
        self.legend.value = legend_html(est["per_gpu"]["components"])
        self.chart.refresh()
        self.chart.show_static()

    def snapshot(self) -> list[str]:
        """The card's parts as HTML, in order (the page's first screen as plain HTML,
        `first_screen.py`): the problem while the plan is stale, the verdict and figures,
        the chart's title, the chart (static SVG until the widget exists) and the legend."""
        status = [self.status.value] if self.status.layout.display != "none" else []
        return [*status, self.banner.value, self.subtitle.value,
                "<div class='vp-chart-panel vp-breakdown'><div class='vp-chart'>"
                f"{self.chart.placeholder.value}</div></div>", self.legend.value]

    @property
    def is_stale(self) -> bool:
        return "vp-stale" in self._dom_classes

    @property
    def value(self) -> str:
        return self.status.value + self.banner.value

    def _svg(self) -> str:
        """The breakdown as plain SVG (charts.breakdown_svg): the first chart on the page."""
        from ...charts.breakdown_svg import breakdown_svg
        est = self.state.result
        usable = self.state.device.usable_bytes if self.state.device is not None else None
        return breakdown_svg(est["per_gpu"]["components"], usable, gpu_name=est["gpu"]["name"],
                             fits=est["fits"], lang=self.state.lang)

    def _chart(self):
        from ...charts import breakdown_chart
        est = self.state.result
        if est is None:
            return breakdown_chart({}, None, lang=self.state.lang)
        usable = self.state.device.usable_bytes if self.state.device is not None else None
        chart = breakdown_chart(est["per_gpu"]["components"], usable,
                                gpu_name=est["gpu"]["name"], fits=est["fits"],
                                lang=self.state.lang)
        return without_legend(chart)


def without_legend(chart):
    """The chart with its colour legends off (`legend_html` shows the same, wrapping)."""
    import altair as alt
    for layer in getattr(chart, "layer", [chart]):
        enc = getattr(layer, "encoding", alt.Undefined)
        color = getattr(enc, "color", alt.Undefined) if enc is not alt.Undefined else enc
        if color is not alt.Undefined:
            color.legend = None
    return chart
