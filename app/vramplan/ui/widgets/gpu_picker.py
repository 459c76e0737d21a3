"""Choose a GPU: search text, vendor, minimum memory and bandwidth, then the list.

`value` is the chosen device id; a pick calls `on_pick(id)`. Filters only narrow the list (the
chosen device stays chosen while they hide it), and the list keeps one order whatever the
filters: vendor (NVIDIA, AMD, Intel, Google, Apple, others), newest first, then name.
Plain numbers in the minimum boxes mean the unit their label names (GiB, GB/s); a plain number
too large to be meant in that unit (`1e9` GiB) is refused with a hint to write the unit.
Filtering is `HardwareDB.filter`, parsing is `vramplan.units`.
"""
from __future__ import annotations

import re
from typing import Callable

import ipywidgets as W
import traitlets as T

from . import looks as L
from ...errors import VramplanError
from ...units import GiB, parse_bytes, parse_rate
from ..state.i18n import N_, _, msg, speaking_for
from .section import section
from ..state.text import message_html

_PLAIN_NUMBER = re.compile(r"^\s*[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?\s*$", re.I)
VENDOR_ORDER = ("NVIDIA", "AMD", "Intel", "Google", "Apple")
# (key, label, unit of a plain number, parser, the largest plain number meant in that unit)
FILTERS = (("min_memory", N_("Min memory"), "GiB", parse_bytes, 100_000),
           ("min_bandwidth", N_("Min bandwidth"), "GB/s", parse_rate, 1_000_000))


def with_default_unit(text: str, unit: str) -> str:
    """'80' -> '80 GiB' (plain numbers in a field take the unit its label names)."""
    return f"{text.strip()} {unit}" if _PLAIN_NUMBER.match(text) else text.strip()


def read_filter(text: str, unit: str, parser, largest: float) -> tuple[str | None, str]:
    """(the filter as text with a unit, or None; the problem). '80' -> '80 GiB';
    '1e9' -> refused: as GiB it is more than any GPU, as bytes it needs its unit."""
    text = (text or "").strip()
    if not text:
        return None, ""
    if _PLAIN_NUMBER.match(text) and float(text) > largest:
        return None, _("'{text}' would mean {value} {unit}; write the unit "
                       "('{text} B', '80 GiB', '2 TB/s')").format(
                           text=text, value=f"{float(text):,.0f}", unit=unit)
    full = with_default_unit(text, unit)
    try:
        parser(full)
    except VramplanError as exc:
        return None, msg(str(exc))
    return full, ""


def device_order(device) -> tuple:
    v = device.vendor
    rank = next((i for i, x in enumerate(VENDOR_ORDER) if x.lower() == v.lower()),
                len(VENDOR_ORDER))
    return rank, -(device.year or 0), device.name.lower()


class GpuPicker(W.VBox):
    value = T.Unicode(allow_none=True)

    def __init__(self, db, value: str | None = None,
                 on_pick: Callable[[str], None] | None = None, state=None,
                 on_filter: Callable[[dict], None] | None = None):
        """`state`: the page's PlanState, whose language the picker's own callbacks speak;
        `on_filter(filters)`: the valid filters after each change (`PlanState.set_gpu_filters`)."""
        self.db = db
        self.on_pick = on_pick or (lambda gpu: None)
        self.on_filter = on_filter or (lambda filters: None)
        self._syncing = False
        self.active: dict = {}
        self.order = sorted(db.devices, key=device_order)
        self.search = W.Text(placeholder=_("Search name, id or alias (e.g. H100, MI300)"),
                             continuous_update=True)
        self.vendor = W.Dropdown(options=[(_("All vendors"), "")] + [
            (v, v) for v in sorted(db.vendors, key=lambda v: device_order(
                next(d for d in db.devices if d.vendor == v))[0])], value="")
        self.min_memory = W.Text(placeholder=_("GiB, e.g. 80"), continuous_update=False)
        self.min_bandwidth = W.Text(placeholder=_("GB/s, e.g. 2000 or 2 TB/s"),
                                    continuous_update=False)
        self.inputs = {"min_memory": self.min_memory, "min_bandwidth": self.min_bandwidth}
        self.message = L.html()
        self.count = L.html()
        self.list = W.Select(options=[], rows=12)
        self.list.add_class("vp-gpu-list")

        def labelled(text, w, cls):
            box = W.VBox([L.html(f"<div class='vp-label'>{text}</div>"), w])
            box.add_class("vp-field")
            box.add_class(cls)
            return box
        grid = W.GridBox([labelled(_("Min memory (GiB)"), self.min_memory, "vp-f-min-memory"),
                          labelled(_("Min bandwidth (GB/s)"), self.min_bandwidth,
                                   "vp-f-min-bandwidth")])
        grid.add_class("vp-grid")
        hint = L.html("<div class='vp-hint'>" + _("Plain numbers mean GiB and GB/s; other units "
                      "are read too (96GB, 3.35 TB/s). Press Enter to apply.") + "</div>")
        kept = getattr(state, "gpu_filters", None) or {}   # the filters before a rebuild
        if kept.get("vendor") in [v for _l, v in self.vendor.options]:
            self.vendor.value = kept["vendor"]
        for key, field in self.inputs.items():
            field.value = str(kept.get(key) or "")
        on = (lambda fn: speaking_for(state, fn)) if state is not None else (lambda fn: fn)
        for w in (self.search, self.vendor, self.min_memory, self.min_bandwidth):
            w.observe(on(self._on_filter), "value")
        self.list.observe(on(self._on_list), "value")
        super().__init__([section(_("GPU"), labelled(_("Search"), self.search,
                                                     "vp-f-gpu-search"),
                                  labelled(_("Vendor"), self.vendor, "vp-f-vendor"), grid, hint,
                                  self.message, self.count, self.list)])
        self.add_class("vp-gpu-picker")
        self.value = value or (self.order[0].id if self.order else None)
        self.apply_filters()

    # -- state -> widgets
    @T.observe("value")
    def _value_changed(self, change):
        if not self._syncing:
            self._select(change["new"])
            self._count()

    def _option_ids(self) -> list[str]:
        return [v for _, v in self.list.options]

    def _select(self, device_id: str | None) -> None:
        self._syncing = True
        try:
            want = device_id if device_id in self._option_ids() else None
            if self.list.value != want:
                self.list.value = want
        finally:
            self._syncing = False

    def filters(self) -> tuple[dict, list[str]]:
        """The filters as `HardwareDB.filter` keyword arguments (bad ones left out) and the
        problems of the bad ones."""
        out, errors = {"vendor": self.vendor.value or None}, []
        for key, label, unit, parser, largest in FILTERS:
            field = self.inputs[key]
            value, problem = read_filter(field.value, unit, parser, largest)
            out[key] = value
            (field.add_class if problem else field.remove_class)("vp-input-error")
            if problem:
                errors.append(f"{_(label)}: {problem}")
        return out, errors

    def apply_filters(self) -> list:
        """Re-list the devices that pass the filters (in the list's one order); explain bad
        filter text inline."""
        kwargs, errors = self.filters()
        self.active = {k: v for k, v in kwargs.items() if v}
        ids = {d.id for d in self.db.filter(**kwargs)}
        q = self.search.value.strip().lower()
        devices = [d for d in self.order if d.id in ids and (not q or any(
            q in s.lower() for s in (d.id, d.name, *d.aliases)))]
        options = [(self.label(d), d.id) for d in devices]
        self._syncing = True
        try:
            if list(self.list.options) != options:
                self.list.options = options
        finally:
            self._syncing = False
        self._select(self.value)
        self._count()
        if errors:
            self.message.value = "".join(message_html(e) for e in errors)
        elif not options:
            self.message.value = message_html(_("No GPU matches these filters."), "info")
        else:
            self.message.value = ""
        return devices

    def _count(self) -> None:
        n, total = len(self.list.options), len(self.db.devices)
        bits = []
        if self.active.get("min_memory"):
            bits.append(f"≥ {parse_bytes(self.active['min_memory']) / GiB:,.0f} GiB")
        if self.active.get("min_bandwidth"):
            bits.append(f"≥ {parse_rate(self.active['min_bandwidth']) / 1e9:,.0f} GB/s")
        hidden = "" if self.value in self._option_ids() or not self.value else \
            " · " + _("the chosen GPU is hidden by the filters")
        shown = f" ({', '.join(bits)})" if bits else ""
        self.count.value = ("<div class='vp-count'>" + _("{n} of {total} GPUs").format(
            n=n, total=total) + f"{shown}{hidden}</div>")

    @staticmethod
    def label(device) -> str:
        """'H100 SXM5 80GB · 80 GiB · 3.35 TB/s' (the vendor prefix is the filter's job)."""
        name = device.name
        if name.lower().startswith(device.vendor.lower() + " "):
            name = name[len(device.vendor) + 1:]
        gib = device.memory_bytes / GiB
        bw = device.bandwidth_gbs
        rate = f"{bw / 1000:.2f} TB/s" if bw >= 1000 else f"{bw:.0f} GB/s"
        return f"{name} · {gib:.0f} GiB · {rate}"

    # -- widgets -> state
    def _on_filter(self, change):
        self.apply_filters()
        self.on_filter({k: v for k, v in self.active.items() if k != "search"})

    def _on_list(self, change):
        if self._syncing or change["new"] is None:
            return
        self.value = change["new"]
        self.on_pick(change["new"])
