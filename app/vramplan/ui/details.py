"""The estimate's bandwidth figures and its notes, labelled and formatted (bytes in decimal
units with separators, rates, times, FLOPs); every key of `estimate.bandwidth` is shown, the
main ones first, the rest under "More figures". Notes meant for programs are left out.
"""
from __future__ import annotations

import html
import json
from typing import Any, Mapping

import ipywidgets as W

from .section import section
from .text import count, human_bytes, label_of, rate_gbs, seconds, si

_e = html.escape

LABELS = {
    "datasheet_bandwidth_gbs": "Datasheet bandwidth",
    "achievable_bandwidth_gbs": "Achievable bandwidth",
    "achievable_bytes_per_s": "Achievable bandwidth",
    "bytes_per_step": "Bytes moved per step", "bytes_per_token": "Bytes moved per token",
    "bytes_per_image": "Bytes moved per image", "bytes_per_frame": "Bytes moved per frame",
    "bytes_per_pass": "Bytes moved per pass", "bytes_per_s": "Bytes moved per second",
    "weight_bytes_per_step": "Weights read per step", "kv_bytes_per_step": "KV cache read per step",
    "tokens_per_step": "Tokens per step", "steps": "Steps", "fps": "Frame rate",
    "bound": "Bound by", "compute_dtype": "Compute dtype",
    "min_step_time_s": "Step time floor (achievable bandwidth)",
    "min_step_time_datasheet_s": "Step time floor (datasheet bandwidth)",
    "memory_floor_s": "Memory time per step", "compute_floor_s": "Compute time per step",
    "max_tokens_per_s": "Tokens/s ceiling", "memory_bound_tokens_per_s": "Tokens/s, memory bound",
    "compute_bound_tokens_per_s": "Tokens/s, compute bound",
    "flops_per_step": "FLOPs per step", "prefill_flops": "Prefill FLOPs",
    "arithmetic_intensity": "Arithmetic intensity", "ridge_intensity": "GPU ridge point",
    "needed_bandwidth_gbs": "Bandwidth to keep compute busy", "peak_tflops": "Peak dense compute",
    "attainable_tflops": "Attainable compute", "kv_pool_bytes": "KV pool",
    "kv_pool_tokens": "KV pool (tokens)", "kv_bytes_per_token": "KV cache per token",
    "context_tokens": "Context per sequence (tokens)",
    "concurrent_sequences": "Sequences at full context", "utilisation": "Bandwidth used",
    "max_fps_by_bandwidth": "Frame rate ceiling by bandwidth",
    "by_pass_per_frame": "Per pass, per frame", "rule_of_thumb": "Rule of thumb",
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
        return human_bytes(v) + "/s"
    if k.startswith("bytes") or k.endswith("_bytes") or "_bytes_" in k:
        return human_bytes(v)
    if k.endswith("tokens_per_s") or k.endswith("_fps") or k.startswith("max_fps"):
        return f"{count(round(v, 1))}/s"
    if k.endswith("_s"):
        return seconds(v)
    if k.endswith("tflops"):
        return f"{count(round(v, 1))} TFLOPS"
    if "flops" in k:
        return si(v, "FLOP")
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
        return "<div class='vp-hint'>The estimate reports no bandwidth figures.</div>"
    main = [k for k in MAIN if k in bw]
    rest = [k for k in bw if k not in main]

    def rows(keys):
        out = []
        for k in keys:
            label = LABELS.get(k, label_of(k))
            v = bw[k]
            if isinstance(v, dict):           # a group (per pass, a rule of thumb)
                for sk, sv in v.items():
                    key = "bytes" if k.startswith("by_pass") else sk
                    out.append(_row(f"{label}: {label_of(sk).lower()}",
                                    fmt(key, sv), wrap=isinstance(sv, str)))
                continue
            extra = ""
            if k == "achievable_bandwidth_gbs" and bw.get("datasheet_bandwidth_gbs"):
                extra = (f" <span class='vp-hint'>({v / bw['datasheet_bandwidth_gbs']:.0%}"
                         " of datasheet)</span>")
            out.append(_row(label, fmt(k, v) + extra))
        return "".join(out)
    more = (f"<details class='vp-more'><summary>More figures ({len(rest)})</summary>"
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


def notes_html(recommendations, notes) -> str:
    out = ""
    if recommendations:
        items = "".join(f"<li>{_e(_rec_text(r))}</li>" for r in recommendations)
        out += f"<div class='vp-sub-title'>What to change</div><ul class='vp-list'>{items}</ul>"
    if notes:
        items = "".join(f"<li>{_e(str(n))}</li>" for n in notes)
        out += f"<ul class='vp-list vp-notes'>{items}</ul>"
    return out or "<div class='vp-hint'>No notes.</div>"


class Details(W.GridBox):
    """Bandwidth and notes side by side (stacked on narrow screens)."""

    def __init__(self, state):
        self.state = state
        self.bandwidth = W.HTML()
        self.notes = W.HTML()
        super().__init__([section("Bandwidth", self.bandwidth, cls="vp-bandwidth"),
                          section("Assumptions and notes", self.notes, cls="vp-notes-card")])
        self.add_class("vp-row")
        self._shown = None

    def render(self) -> None:
        st = self.state
        (self.add_class if st.stale else self.remove_class)("vp-stale")
        if st.result is None or st.result is self._shown:
            return
        self._shown = st.result
        self.bandwidth.value = bandwidth_html(st.result.get("bandwidth") or {})
        self.notes.value = notes_html(st.result.get("recommendations") or [], st.notes())

    @property
    def value(self) -> str:
        return self.bandwidth.value + self.notes.value
