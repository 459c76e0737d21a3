"""The estimate's bandwidth figures and its notes, labelled and formatted (bytes in decimal
units with separators, rates, times, FLOPs); every key of `estimate.bandwidth` is shown, the
main ones first, the rest under "More figures". Notes meant for programs are left out.
"""
from __future__ import annotations

import html
import json
from typing import Any, Mapping

import ipywidgets as W

from . import looks as L
from ..state.i18n import N_, _, current_lang, msg
from .section import section
from ..state.stack_view import stack_html
from ..state.text import count, label_of, rate_gbs, seconds, size
from ...units import format_flop

_e = html.escape

LABELS = {
    "datasheet_bandwidth_gbs": N_("Datasheet bandwidth"),
    "achievable_bandwidth_gbs": N_("Achievable bandwidth"),
    "achievable_bytes_per_s": N_("Achievable bandwidth"),
    "bytes_per_step": N_("Bytes moved per step"), "bytes_per_token": N_("Bytes moved per token"),
    "bytes_per_image": N_("Bytes moved per image"), "bytes_per_frame": N_("Bytes moved per frame"),
    "bytes_per_pass": N_("Bytes moved per pass"), "bytes_per_s": N_("Bytes moved per second"),
    "weight_bytes_per_step": N_("Weights read per step"), "kv_bytes_per_step": N_("KV cache read per step"),
    "tokens_per_step": N_("Tokens per step"), "steps": N_("Steps"), "fps": N_("Frame rate"),
    "bound": N_("Bound by"), "compute_dtype": N_("Compute dtype"),
    "workload_kind": N_("Workload kind"),
    "min_step_time_s": N_("Step time floor (memory and compute)"),
    "min_step_time_datasheet_s": N_("Step time floor (datasheet bandwidth and compute)"),
    "memory_floor_s": N_("Memory time per step"), "compute_floor_s": N_("Compute time per step"),
    "max_tokens_per_s": N_("Tokens/s ceiling"), "memory_bound_tokens_per_s": N_("Tokens/s, memory bound"),
    "compute_bound_tokens_per_s": N_("Tokens/s, compute bound"),
    "flops_per_step": N_("FLOPs per step"), "prefill_flops": N_("Prefill FLOPs"),
    "flops_per_image": N_("FLOPs per image"), "min_time_per_image_s": N_("Time per image floor"),
    "max_images_per_s": N_("Images/s ceiling"),
    "arithmetic_intensity": N_("Arithmetic intensity"), "ridge_intensity": N_("GPU ridge point"),
    "needed_bandwidth_gbs": N_("Bandwidth to keep compute busy"), "peak_tflops": N_("Peak dense compute"),
    "attainable_tflops": N_("Attainable compute"), "kv_pool_bytes": N_("KV pool"),
    "kv_pool_tokens": N_("KV pool (tokens)"), "kv_bytes_per_token": N_("KV cache per token"),
    "context_tokens": N_("Context per sequence (tokens)"),
    "concurrent_sequences": N_("Sequences at full context"), "utilisation": N_("Bandwidth used"),
    "max_fps_by_bandwidth": N_("Frame rate ceiling by bandwidth"),
    "by_pass_per_frame": N_("Per pass, per frame"), "rule_of_thumb": N_("Rule of thumb"),
}
MAIN = ("bound", "datasheet_bandwidth_gbs", "achievable_bandwidth_gbs", "bytes_per_step",
        "bytes_per_frame", "bytes_per_pass", "bytes_per_token", "bytes_per_image",
        "min_step_time_s", "max_tokens_per_s", "fps", "bytes_per_s", "utilisation",
        "kv_pool_bytes", "kv_pool_tokens")


def fmt(key: str, v: Any) -> str:
    """One figure by what its key says it is."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return _e(json.dumps(v) if isinstance(v, (dict, list)) else str(v))
    k = key.lower()
    if k.endswith("_gbs"):
        return rate_gbs(v)
    if "bytes" in k and k.endswith("_per_s"):
        return rate_gbs(v / 1e9)          # traffic: decimal GB/s, as bandwidth is quoted
    if k.startswith("bytes") or k.endswith("_bytes") or "_bytes_" in k:
        return size(v)                    # memory and bytes moved: GiB
    if k.endswith(("tokens_per_s", "images_per_s")) or k.endswith("_fps") or \
            k.startswith("max_fps"):
        return f"{count(round(v, 1))}/s"
    if k.endswith("_s"):
        return seconds(v)
    if k.endswith("tflops"):
        return f"{count(round(v, 1))} TFLOPS"
    if "flops" in k:
        return format_flop(v, current_lang())   # the notes' FLOP formatter (units.py)
    if "intensity" in k:
        return f"{count(round(v, 1))} FLOP/byte"
    if k in ("utilisation", "utilization") or k.endswith("_fraction"):
        return f"{v:.1%}"
    return count(round(v, 3) if isinstance(v, float) else v)


def _row(label: str, value: str, wrap: bool = False) -> str:
    cls = "vp-num vp-wrap" if wrap else "vp-num"
    return f"<tr><td>{_e(label)}</td><td class='{cls}'>{value}</td></tr>"


def bandwidth_html(bw: Mapping[str, Any]) -> str:
    """Every key of `estimate.bandwidth`: the main figures, then the others under a fold."""
    if not bw:
        return f"<div class='vp-hint'>{_('The estimate reports no bandwidth figures.')}</div>"
    main = [k for k in MAIN if k in bw]
    rest = [k for k in bw if k not in main]

    def rows(keys):
        out = []
        for k in keys:
            label = _(LABELS.get(k, label_of(k)))
            v = bw[k]
            if isinstance(v, dict):           # a group (per pass, a rule of thumb)
                for sk, sv in v.items():
                    key = "bytes" if k.startswith("by_pass") else sk
                    out.append(_row(f"{label}: {_(label_of(sk).lower())}",
                                    core_html(sv) if isinstance(sv, str) else fmt(key, sv),
                                    wrap=isinstance(sv, str)))
                continue
            extra = ""
            if k == "achievable_bandwidth_gbs" and bw.get("datasheet_bandwidth_gbs"):
                extra = (" <span class='vp-hint'>(" + _("{share} of datasheet").format(
                    share=f"{v / bw['datasheet_bandwidth_gbs']:.0%}") + ")</span>")
            out.append(_row(label, fmt(k, _(v) if isinstance(v, str) else v) + extra))
        return "".join(out)
    more = (f"<details class='vp-more'><summary>{_('More figures ({n})').format(n=len(rest))}</summary>"
            f"<table class='vp-table'>{rows(rest)}</table></details>") if rest else ""
    return f"<table class='vp-table'>{rows(main)}</table>{more}"


def _rec_text(r: Any) -> str:
    if isinstance(r, str):
        return r
    if isinstance(r, Mapping):
        for k in ("text", "summary", "label", "title"):
            if isinstance(r.get(k), str):
                return r[k]
    return json.dumps(r)


def core_html(text: str) -> str:
    """A note or change made by the estimate (English, values filled in) in the page's
    language where the catalogue has its pattern; else English, marked lang='en'."""
    t = msg(text)
    if t == text and current_lang() != "en":
        return f"<span lang='en'>{_e(text)}</span>"
    return _e(t)


def notes_html(recommendations, notes) -> str:
    out = ""
    if recommendations:
        items = "".join(f"<li>{core_html(_rec_text(r))}</li>" for r in recommendations)
        out += (f"<div class='vp-sub-title'>{_('What to change')}</div>"
                f"<ul class='vp-list'>{items}</ul>")
    if notes:
        items = "".join(f"<li>{core_html(str(n))}</li>" for n in notes)
        out += f"<ul class='vp-list vp-notes'>{items}</ul>"
    return out or f"<div class='vp-hint'>{_('No notes.')}</div>"


class Details(W.GridBox):
    """Bandwidth and notes side by side (stacked on narrow screens)."""

    def __init__(self, state):
        self.state = state
        self.bandwidth = L.html()
        self.notes = L.html()
        super().__init__([section(_("Bandwidth"), self.bandwidth, cls="vp-bandwidth"),
                          section(_("Assumptions and notes"), self.notes, cls="vp-notes-card")])
        self.add_class("vp-row")
        self._shown = None

    def render(self) -> None:
        st = self.state
        (self.add_class if st.stale else self.remove_class)("vp-stale")
        if st.result is None or st.result is self._shown:
            return
        self._shown = st.result
        self.bandwidth.value = bandwidth_html(st.result.get("bandwidth") or {})
        self.notes.value = stack_html(st.result.get("stack")) + \
            notes_html(st.result.get("recommendations") or [], st.notes())

    @property
    def value(self) -> str:
        return self.bandwidth.value + self.notes.value
