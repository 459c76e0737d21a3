"""The chosen GPU's card: capacity, bandwidth, hierarchy, throughput, links and sources, from
`Device.to_dict()` (the JSON of `vramplan gpu ID`); it computes nothing of its own."""
from __future__ import annotations

import html
import re
from typing import Any, Mapping

import ipywidgets as W

from . import looks as L
from ...units import format_gbs, format_gib
from ..state.i18n import _

# labels for the hwdb throughput keys (hardware.THROUGHPUT_KEYS), in display order
DTYPE_LABELS = {
    "fp64": "FP64", "fp32": "FP32", "fp32_matrix": "FP32 matrix", "tf32": "TF32",
    "fp16": "FP16", "fp16_acc16": "FP16 (FP16 acc.)", "bf16": "BF16", "fp8": "FP8",
    "fp8_acc16": "FP8 (FP16 acc.)", "int8": "INT8", "fp4": "FP4",
}


# ---------------------------------------------------------------- formatting helpers
def _e(v: Any) -> str:
    return html.escape(str(v))


def _num(v: float, digits: int = 1) -> str:
    if v is None:
        return "–"
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.{digits}f}"


def _gib(n: int | None) -> str:
    return format_gib(n)           # the one size formatter (units.py): '79.65 GiB'


def _rate(gbs: float) -> str:
    return format_gbs(gbs)         # bandwidth in GB/s everywhere: '3,350.0 GB/s


def _rows(pairs) -> str:
    body = "".join(f"<tr><td>{_e(k)}</td><td class='vp-num'>{v}</td></tr>"
                   for k, v in pairs if v not in (None, ""))
    return f"<table>{body}</table>" if body else \
        f"<div class='vp-note'>{_('not in the database')}</div>"


def _vendor_color(vendor: str) -> str:
    from ...charts import OTHER_COLOR, VENDOR_COLORS, vendor_label  # charts imports no altair at top
    return VENDOR_COLORS.get(vendor_label(vendor), OTHER_COLOR)


def device_card_html(d: Mapping[str, Any], sources: Mapping[str, Any] | None = None) -> str:
    """The card for one device, from `Device.to_dict()` (the JSON of `vramplan gpu ID`).

    `sources` (id -> Source or dict, e.g. `HardwareDB.sources`) resolves the ids in
    `field_sources`; without it they are shown as ids.
    """
    hier = d.get("hierarchy") or {}
    ic = d.get("interconnect") or {}
    dense = d.get("throughput_tflops_dense") or d.get("throughput") or {}
    sparse = d.get("throughput_tflops_sparse") or {}
    mem, usable = d.get("memory_bytes"), d.get("usable_memory_bytes")
    bw = d.get("bandwidth_gbs") or 0.0
    frac = d.get("achievable_bandwidth_fraction")

    sub = " · ".join(_e(x) for x in (d.get("architecture"), d.get("form_factor"),
                                       d.get("year")) if x)
    head = (f"<span class='vp-badge' style='background:{_vendor_color(d.get('vendor', ''))}'>"
            f"{_e(d.get('vendor', ''))}</span><h2 style='display:inline'>{_e(d.get('name'))}</h2>"
            f"<div class='vp-sub'>{sub} · id <code>{_e(d.get('id'))}</code></div>")

    usable_txt = (_("usable {size} ({share})").format(size=_gib(usable), share=f"{usable / mem:.1%}")
                  if usable and mem else _("usable: not measured, nominal assumed"))
    bus, rate = d.get("bus_width_bits"), d.get("data_rate_gbps")
    bus_txt = (f"{bus:,}-bit × {_num(rate, 2)} Gbps / 8" if bus and rate
               else _("bus × rate not published"))
    ach_txt = _("~{share} sustained ≈ {rate}").format(share=f"{frac:.0%}", rate=_rate(bw * frac)) \
        if frac else ""
    cu, kind = hier.get("compute_units") or d.get("compute_units"), hier.get("compute_unit_kind", "")
    kpis = [
        (_("Memory"), _gib(mem), usable_txt),
        (_("Memory type"), _e(d.get("memory_type") or "–"),
         _("unified with host") if d.get("unified_memory") else bus_txt),
        (_("Bandwidth"), _rate(bw), ach_txt),
        (_("Compute"), f"{cu:,} {_e(kind)}s" if cu else "–",
         _("compute capability {cc}").format(cc=_e(d["compute_capability"]))
         if d.get("compute_capability") else ""),
    ]
    kpi_html = "".join(f"<div class='vp-kpi'><div class='vp-k'>{k}</div><div class='vp-v'>{v}</div>"
                       f"<div class='vp-d'>{dd}</div></div>" for k, v, dd in kpis)

    per = f"/ {kind}" if kind else _("per unit")
    llc = hier.get("llc_mib")
    hier_rows = [
        (_("Bus width"), f"{bus:,} bit" if bus else None),
        (_("Data rate"), f"{_num(rate, 2)} Gbps/pin" if rate else None),
        (_("Register file"), f"{_num(hier['regfile_kib_per_unit'])} KiB {per}"
         if hier.get("regfile_kib_per_unit") else None),
        (_("L1 / shared"), f"{_num(hier['l1_smem_kib_per_unit'])} KiB {per}"
         if hier.get("l1_smem_kib_per_unit") else None),
        (_("L2 cache"), f"{_num(hier['l2_mib'])} MiB" if hier.get("l2_mib") else None),
        (_(hier.get("llc_kind") or "Last-level cache"), f"{_num(llc)} MiB" if llc else None),
    ]
    order = list(DTYPE_LABELS) + [k for k in dense if k not in DTYPE_LABELS]
    tp_rows = []
    for k in order:
        if k in dense:
            unit = "TOPS" if k.startswith("int") else "TFLOPS"
            v = f"{_num(dense[k])} {unit}"
            if k in sparse:
                v += (" <span class='vp-hint'>(" + _("{value} sparse").format(
                    value=_num(sparse[k])) + ")</span>")
            tp_rows.append((DTYPE_LABELS.get(k, k), v))
    scale = ic.get("scaleup")
    links = []
    if scale:
        n = ic.get("scaleup_links")
        links.append((scale, _("{n} links").format(n=n) if n else ""))
        if ic.get("scaleup_gbs_per_direction"):
            links.append((_("per direction"), f"{_num(ic['scaleup_gbs_per_direction'])} GB/s"))
    if ic.get("pcie_gen"):
        links.append(("PCIe", f"Gen{ic['pcie_gen']} x{ic.get('pcie_lanes', '?')}"))
    if ic.get("host_link"):
        links.append((_("Host link"), _e(ic["host_link"])))
    links.append(("TDP", f"{d['tdp_w']:,} W" if d.get("tdp_w") else None))
    links.append((_("Year"), _e(d["year"]) if d.get("year") else None))
    cols = (f"<div><h3>{_('Memory hierarchy')}</h3>{_rows(hier_rows)}</div>"
            f"<div><h3>{_('Dense throughput')}</h3>{_rows(tp_rows)}</div>"
            f"<div><h3>{_('Links &amp; power')}</h3>{_rows(links)}</div>")

    notes = [n for n in (d.get("usable_memory_note"), d.get("bandwidth_note"),
                         d.get("achievable_bandwidth_note"), d.get("note")) if n]
    note_html = "".join(f"<div class='vp-note' lang='en'>{_e(n)}</div>" for n in notes)
    aliases = d.get("aliases") or []
    if aliases:
        note_html += ("<div class='vp-note'>" + _("Also known as: {names}").format(
            names=_e(", ".join(aliases))) + "</div>")

    return (f"<div class='vp-card'>{head}<div class='vp-kpis'>{kpi_html}</div>"
            f"<div class='vp-cols'>{cols}</div>{note_html}"
            f"{_sources_html(d, sources)}</div>")


def _names_marked(text: str) -> str:
    """`text` escaped; in a translated (Chinese) title, each run of Latin text (product
    names, repositories, figures: 'NVIDIA H100 Tensor Core GPU') marked lang='en'."""
    if not re.search(r"[\u2e80-\uffff]", text):
        return _e(text)
    return re.sub(r"[^\u2e80-\uffff]*[A-Za-z][^\u2e80-\uffff]*",
                  lambda m: f"<span lang='en'>{m.group(0)}</span>", _e(text))


def _source_item(s: Mapping[str, Any] | Any) -> str:
    s = s if isinstance(s, Mapping) else (s.to_dict() if hasattr(s, "to_dict") else {"title": s})
    # the title in the page's language (locale/zh/sources.toml); publisher and doc are
    # identifiers and stay as they are
    title = _names_marked(_(s["title"])) if s.get("title") else \
        f"<code>{_e(s.get('id'))}</code>"
    url = s.get("url")
    body = (f"<a href='{_e(url)}' target='_blank' rel='noopener noreferrer'>{title}</a>" if url
            else title)
    extra = " — ".join(_e(x) for x in (s.get("publisher"), s.get("doc")) if x)
    return body + (f" <span class='vp-hint' lang='en'>{extra}</span>" if extra else "")


def _sources_html(d: Mapping[str, Any], index: Mapping[str, Any] | None) -> str:
    items = [f"<li>{_source_item(s)}</li>" for s in d.get("sources") or []]
    per_field = []
    for fname, ids in (d.get("field_sources") or {}).items():
        refs = []
        for sid in ids:
            src = (index or {}).get(sid)
            refs.append(_source_item(src) if src is not None else f"<code>{_e(sid)}</code>")
        per_field.append(f"<li><code>{_e(fname)}</code>: {'; '.join(refs)}</li>")
    if not items and not per_field:
        return f"<div class='vp-sources'>{_('Sources: none recorded')}</div>"
    out = f"<div class='vp-sources'><b>{_('Sources')}</b><ol>{''.join(items)}</ol>"
    if per_field:
        out += f"<b>{_('Per-field sources')}</b><ul>{''.join(per_field)}</ul>"
    return out + "</div>"


class DeviceCard(W.VBox):
    """The chosen device: capacity, bandwidth, hierarchy, throughput, links, sources."""

    def __init__(self):
        self.html = L.html()
        super().__init__([self.html])
        self.add_class("vp-section")
        self.add_class("vp-device")

    def show(self, device: Any, sources: Mapping[str, Any] | None = None) -> None:
        d = device.to_dict() if hasattr(device, "to_dict") else device
        self.html.value = device_card_html(d, sources)

    @property
    def value(self) -> str:
        return self.html.value
