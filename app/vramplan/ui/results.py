"""Result panels for an estimate: each renders `Estimate.to_dict()` (the JSON of
`vramplan estimate --format json`) and computes nothing of its own.

`verdict_html` (fits / does not fit, device used of usable, headroom, the three figures, max
batch, peak phase), `bandwidth_html` (what `estimate.bandwidth` holds, with labels),
`notes_html` (assumptions and recommendations) and `export_html` (scenario and estimate JSON,
downloads as data: URLs, the share link). `EstimatePanel` holds them plus the breakdown chart;
when the current input is rejected it keeps the last good estimate on screen, dimmed.
"""
from __future__ import annotations

import html
import json
from typing import Any, Mapping
from urllib.parse import quote

import ipywidgets as W

from ..units import GiB, format_bytes
from .controls import message_html
from .panels import ChartPanel, section

_e = html.escape


def gib(n: int | None, digits: int = 1) -> str:
    return "–" if n is None else f"{n / GiB:,.{digits}f} GiB"


def _task_summary(sc: Mapping[str, Any]) -> str:
    """'meta-llama/Llama-3.1-8B · lora · batch 1 × 2,048 tokens · bf16' from the scenario."""
    model = sc.get("model") or (
        f"generic decoder, {sc['architecture'].get('params', 0) / 1e9:g}B params"
        if isinstance(sc.get("architecture"), dict) and "params" in sc["architecture"]
        else "inline architecture" if sc.get("architecture") else "")
    size = f"batch {sc.get('batch_size', 1):,}" if model or sc.get("batch_size", 1) > 1 else ""
    if sc.get("seq_len"):
        size += f" × {sc['seq_len']:,} tokens"
    if sc.get("new_tokens"):
        size += f" + {sc['new_tokens']:,} new"
    if sc.get("resolution"):
        size += (" at " if size else "") + "×".join(str(x) for x in sc["resolution"])
    if sc.get("steps"):
        size += f", {sc['steps']} steps"
    prec = sc.get("precision")
    prec = prec if isinstance(prec, str) else (prec or {}).get("default", "")
    par = sc.get("parallel") or {}
    if sc.get("msaa", 1) > 1:
        size += f", MSAA {sc['msaa']}×"
    if not model:          # model-less workloads: their element type, not a precision
        prec = sc.get("dtype", "")
    parts = [model, sc.get("task", ""), size, prec]
    if sc.get("checkpointing") not in (None, "none"):
        parts.append(f"{sc['checkpointing']} checkpointing")
    if par.get("gpus", 1) > 1:
        parts.append(f"{par['gpus']} GPUs (dp {par.get('data')}, tp {par.get('tensor')}, "
                     f"pp {par.get('pipeline')}, ZeRO {par.get('zero')})")
    return " · ".join(_e(str(p)) for p in parts if p)


def verdict_html(est: Mapping[str, Any], usable_bytes: int | None = None) -> str:
    """The verdict banner and the key figures. `usable_bytes` is the GPU's usable memory
    (`Device.usable_bytes`; default: device used + headroom, which is the same number)."""
    per = est["per_gpu"]
    used = per["device_used_bytes"]
    head = est["headroom_bytes"]
    usable = usable_bytes if usable_bytes is not None else used + head
    name = est["gpu"]["name"]
    fits = est["fits"]
    if fits:
        title = f"Fits on {_e(name)}"
        detail = f"{gib(head)} headroom"
    else:
        title = f"Does not fit on {_e(name)}"
        detail = f"short by {gib(-head)}"
    pct = used / usable if usable else 0
    banner = (
        f"<div class='vp-verdict {'vp-fits' if fits else 'vp-nofit'}'>"
        f"<div class='vp-verdict-icon'>{'✓' if fits else '✕'}</div>"
        f"<div class='vp-verdict-main'><div class='vp-verdict-title'>{title}</div>"
        f"<div class='vp-verdict-sub'>{_task_summary(est.get('scenario') or {})}</div></div>"
        f"<div class='vp-verdict-fig'><div class='vp-verdict-used'>{gib(used)} "
        f"<span>of {gib(usable)}</span></div>"
        f"<div class='vp-verdict-detail'>device used ({pct:.0%}) · {detail}</div></div></div>")
    mb = est.get("max_batch_size")
    mb_txt = f"{mb:,}" if mb else "none"
    mb_sub = ("largest batch that fits" if mb else "batch 1 does not fit")
    phase = est.get("peak_phase") or "–"
    kpis = [
        ("Peak allocated", gib(per["peak_allocated_bytes"]), "live tensors at the peak"),
        ("Peak reserved", gib(per["peak_reserved_bytes"]), "allocator segments"),
        ("Device used", gib(used), "what nvidia-smi shows"),
        ("Max batch size", mb_txt, mb_sub),
        ("Peak phase", _e(str(phase)), "where memory peaks"),
    ]
    cells = "".join(
        f"<div class='vp-kpi'><div class='vp-k'>{k}</div><div class='vp-v'>{v}</div>"
        f"<div class='vp-d'>{d}</div></div>" for k, v, d in kpis)
    return f"<div class='vp-estimate'>{banner}<div class='vp-figs'>{cells}</div></div>"


# ---------------------------------------------------------------- bandwidth
BANDWIDTH_LABELS = {   # key -> (label, kind); unknown keys are shown by their name
    "datasheet_bandwidth_gbs": ("Datasheet bandwidth", "gbs"),
    "achievable_bandwidth_gbs": ("Achievable bandwidth", "gbs"),
    "bytes_per_step": ("Bytes moved per step", "bytes"),
    "bytes_per_token": ("Bytes moved per generated token", "bytes"),
    "bytes_per_image": ("Bytes moved per image", "bytes"),
    "tokens_per_step": ("Tokens per step", "count"),
    "steps": ("Steps", "count"),
    "min_step_time_s": ("Step time, memory-bound floor (achievable)", "s"),
    "min_step_time_datasheet_s": ("Step time floor at datasheet rate", "s"),
    "max_tokens_per_s": ("Tokens/s, memory-bound ceiling", "rate"),
}


def _fmt_value(key: str, v: Any, kind: str | None = None) -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return _e(json.dumps(v) if isinstance(v, (dict, list)) else str(v))
    if not kind and "bytes" in key and key.endswith("_per_s"):
        return _e(format_bytes(v, binary=False, digits=2)) + "/s"
    kind = kind or ("bytes" if key.endswith("bytes") or key.startswith("bytes") else
                    "gbs" if key.endswith("_gbs") else "s" if key.endswith("_s") else
                    "count")
    if kind == "bytes":
        return _e(format_bytes(v, binary=False, digits=2))
    if kind == "gbs":
        return f"{v / 1000:,.2f} TB/s" if v >= 1000 else f"{v:,.0f} GB/s"
    if kind == "s":
        return f"{v * 1e3:,.2f} ms" if v < 1 else f"{v:,.2f} s"
    if kind == "rate":
        return f"{v:,.0f}/s" if v >= 10 else f"{v:,.1f}/s"
    return f"{v:,.0f}" if float(v).is_integer() or abs(v) >= 100 else f"{v:,.3g}"


def bandwidth_html(bw: Mapping[str, Any]) -> str:
    """Every key of `estimate.bandwidth`, labelled, in a fixed order (known keys first)."""
    if not bw:
        return "<div class='vp-hint'>The estimate reports no bandwidth figures.</div>"
    keys = [k for k in BANDWIDTH_LABELS if k in bw] + [k for k in bw if k not in BANDWIDTH_LABELS]
    rows = []
    for k in keys:
        label, kind = BANDWIDTH_LABELS.get(k, (k.replace("_", " ").capitalize(), None))
        extra = ""
        if k == "achievable_bandwidth_gbs" and bw.get("datasheet_bandwidth_gbs"):
            extra = (f" <span class='vp-hint'>({bw[k] / bw['datasheet_bandwidth_gbs']:.0%} of "
                     f"datasheet)</span>")
        if isinstance(bw[k], dict):          # a group (per pass, a rule of thumb): its rows
            for sk, sv in bw[k].items():
                cls = "vp-num vp-wrap" if isinstance(sv, str) else "vp-num"
                rows.append(f"<tr><td>{_e(label)}: {_e(sk.replace('_', ' '))}</td>"
                            f"<td class='{cls}'>{_fmt_value(sk, sv, 'bytes' if k.startswith('by_pass') and not isinstance(sv, str) else None)}</td></tr>")
            continue
        rows.append(f"<tr><td>{_e(label)}</td><td class='vp-num'>{_fmt_value(k, bw[k], kind)}"
                    f"{extra}</td></tr>")
    return f"<table class='vp-table'>{''.join(rows)}</table>"


def notes_html(est: Mapping[str, Any]) -> str:
    recs = est.get("recommendations") or []
    notes = est.get("notes") or []
    out = ""
    if recs:
        items = "".join(f"<li>{_e(r if isinstance(r, str) else json.dumps(r))}</li>"
                        for r in recs)
        out += f"<div class='vp-sub-title'>What to change</div><ul class='vp-list'>{items}</ul>"
    if notes:
        items = "".join(f"<li>{_e(str(n))}</li>" for n in notes)
        out += f"<ul class='vp-list vp-notes'>{items}</ul>"
    return out or "<div class='vp-hint'>No notes.</div>"


def _data_url(obj: Any) -> str:
    return "data:application/json;charset=utf-8," + quote(json.dumps(obj, indent=2))


def export_html(est: Mapping[str, Any], query: str = "") -> str:
    """Scenario and estimate as JSON: copyable <pre> blocks, downloads as data: URLs (no
    request leaves the page) and the share link (`?` + `Scenario.to_query()`)."""
    sc = est.get("scenario") or {}
    link = ""
    if query:
        link = (f"<div class='vp-share'><span class='vp-k'>Link to this plan</span> "
                f"<a class='vp-share-link' href='?{_e(query)}'>?{_e(query)}</a></div>")
    return (
        f"{link}<div class='vp-downloads'>"
        f"<a class='vp-btn' download='scenario.json' href='{_e(_data_url(sc))}'>"
        f"Download scenario.json</a>"
        f"<a class='vp-btn' download='estimate.json' href='{_e(_data_url(est))}'>"
        f"Download estimate.json</a></div>"
        f"<details><summary>Scenario JSON</summary><pre class='vp-json vp-scenario-json'>"
        f"{_e(json.dumps(sc, indent=2))}</pre></details>"
        f"<details><summary>Estimate JSON</summary><pre class='vp-json vp-estimate-json'>"
        f"{_e(json.dumps(est, indent=2))}</pre></details>")


class EstimatePanel(W.VBox):
    """Verdict, figures and the breakdown chart; bandwidth, notes and export below it.

    `show(estimate_dict, usable_bytes, query)` renders a good estimate; `stale(message)` keeps
    it on screen dimmed with the reason above it; `value` is the text of the whole panel.
    """

    def __init__(self):
        self.estimate: dict | None = None
        self.usable_bytes: int | None = None
        self.banner = W.HTML()
        self.status = W.HTML(layout=W.Layout(display="none"))
        self.chart = ChartPanel(self._chart_spec, height=130)
        self.chart.remove_class("vp-section")
        self.chart.add_class("vp-breakdown")
        self.bandwidth = W.HTML()
        self.notes = W.HTML()
        self.export = W.HTML()
        self.main = section(None, self.status, self.banner,
                            W.HTML("<div class='vp-sub-title'>Memory at the peak, per GPU</div>"),
                            self.chart, cls="vp-estimate-card")
        self.bw_box = section("Bandwidth", self.bandwidth)
        self.notes_box = section("Assumptions and notes", self.notes)
        row = W.GridBox([self.bw_box, self.notes_box], layout=W.Layout(
            grid_template_columns="minmax(0, 1fr) minmax(0, 1fr)", grid_gap="12px",
            width="100%"))
        row.add_class("vp-row")
        self.export_box = section("Export", self.export)
        self.parts = [self.main, row, self.export_box]
        super().__init__(self.parts, layout=W.Layout(width="100%"))
        self.add_class("vp-estimate-panel")

    def show(self, est: dict, usable_bytes: int | None = None, query: str = "") -> None:
        self.estimate, self.usable_bytes = est, usable_bytes
        self.status.value = ""
        self.status.layout.display = "none"
        self.remove_class("vp-stale")
        self.banner.value = verdict_html(est, usable_bytes)
        self.bandwidth.value = bandwidth_html(est.get("bandwidth") or {})
        self.notes.value = notes_html(est)
        self.export.value = export_html(est, query)
        self.chart.refresh()

    def stale(self, text: str) -> None:
        """The input is rejected: keep the last good estimate, dimmed, and say why."""
        self.status.value = message_html(
            f"{text}. " + ("Showing the last valid plan." if self.estimate else ""))
        self.status.layout.display = ""
        if self.estimate is not None:
            self.add_class("vp-stale")

    @property
    def is_stale(self) -> bool:
        return "vp-stale" in self._dom_classes

    @property
    def value(self) -> str:
        return "".join(w.value for w in (self.status, self.banner, self.bandwidth, self.notes,
                                          self.export))

    def _chart_spec(self):
        from ..charts import breakdown_chart
        est = self.estimate
        if est is None:
            return breakdown_chart({}, None)
        return breakdown_chart(est["per_gpu"]["components"], self.usable_bytes,
                               gpu_name=est["gpu"]["name"], fits=est["fits"])
