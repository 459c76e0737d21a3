"""Input controls. A control edits one piece of state and says when its input is bad; it
computes nothing else (filtering is `HardwareDB.filter`, parsing is `vramplan.units`).
"""
from __future__ import annotations

import html
import re

import ipywidgets as W
import traitlets as T

from ..errors import VramplanError
from ..units import parse_bytes, parse_rate
from .panels import section

_PARSERS = {"min_memory": parse_bytes, "min_bandwidth": parse_rate}
_PLAIN_NUMBER = re.compile(r"^\s*[0-9]*\.?[0-9]+\s*$")


def message_html(text: str | None, kind: str = "error") -> str:
    """An inline message under a control ('' hides it)."""
    return f"<div class='vp-msg-{kind}'>{html.escape(text)}</div>" if text else ""


def with_default_unit(text: str, unit: str) -> str:
    """'80' -> '80 GiB' (plain numbers in a field take the unit its label names)."""
    return f"{text.strip()} {unit}" if _PLAIN_NUMBER.match(text) else text.strip()


class GpuPicker(W.VBox):
    """Choose a GPU: search text, vendor, minimum memory and bandwidth, then the list.

    `value` is the chosen device id. Filters only narrow the list: the chosen device stays
    chosen (and shown) while the filters hide it. Bad filter text is kept as typed and
    explained inline; the list then ignores that one filter.
    """

    value = T.Unicode(allow_none=True)

    def __init__(self, db, value: str | None = None):
        self.db = db
        self._syncing = False
        vendors = db.vendors
        self.search = W.Text(placeholder="Search name, id or alias (e.g. H100, MI300)",
                             continuous_update=True)
        self.vendor = W.Dropdown(options=[("All vendors", "")] + [(v, v) for v in vendors],
                                 value="", description="Vendor")
        self.min_memory = W.Text(placeholder="e.g. 80 GiB", description="Min memory",
                                 continuous_update=False)
        self.min_bandwidth = W.Text(placeholder="e.g. 2 TB/s", description="Min bandwidth",
                                    continuous_update=False)
        self.min_memory.layout = W.Layout(width="100%")
        self.min_bandwidth.layout = W.Layout(width="100%")
        self.message = W.HTML()
        self.count = W.HTML()
        self.list = W.Select(options=[], rows=14, layout=W.Layout(width="100%"))
        hint = W.HTML("<div class='vp-hint'>Plain numbers mean GiB and GB/s; units are "
                      "accepted too (80GB, 96 GiB, 3.35 TB/s). Press Enter to apply.</div>")
        for w in (self.search, self.vendor, self.min_memory, self.min_bandwidth):
            w.observe(self._on_filter, "value")
        self.list.observe(self._on_list, "value")
        super().__init__([section(
            "GPU", self.search, self.vendor, self.min_memory, self.min_bandwidth, hint,
            self.message, self.count, self.list)], layout=W.Layout(width="100%"))
        self.value = value or (db.devices[0].id if db.devices else None)
        self.apply_filters()

    # -- state -> widgets
    @T.observe("value")
    def _value_changed(self, change):
        if not self._syncing and change["new"] in self._option_ids():
            self._select(change["new"])

    def _option_ids(self) -> list[str]:
        return [v for _, v in self.list.options]

    def _select(self, device_id: str | None) -> None:
        self._syncing = True
        try:
            self.list.value = device_id if device_id in self._option_ids() else None
        finally:
            self._syncing = False

    def filters(self) -> dict:
        """The current filters as `HardwareDB.filter` keyword arguments (bad ones left out)."""
        out = {"vendor": self.vendor.value or None}
        for name, field, unit in (("min_memory", self.min_memory, "GiB"),
                                  ("min_bandwidth", self.min_bandwidth, "GB/s")):
            text = field.value.strip()
            out[name] = with_default_unit(text, unit) if text else None
        return out

    def apply_filters(self) -> list:
        """Re-list the devices that pass the filters; explain bad filter text inline."""
        kwargs = self.filters()
        errors = []
        for name, field, label in (("min_memory", self.min_memory, "Min memory"),
                                   ("min_bandwidth", self.min_bandwidth, "Min bandwidth")):
            if kwargs[name] is None:
                field.remove_class("vp-input-error")
                continue
            try:
                _PARSERS[name](kwargs[name])
                field.remove_class("vp-input-error")
            except VramplanError as exc:
                errors.append(f"{label}: {exc}")
                kwargs[name] = None
                field.add_class("vp-input-error")
        devices = self.db.filter(**kwargs)
        q = self.search.value.strip().lower()
        if q:
            devices = [d for d in devices
                       if any(q in s.lower() for s in (d.id, d.name, *d.aliases))]
        options = [(self.label(d), d.id) for d in devices]
        self._syncing = True
        try:
            self.list.options = options
        finally:
            self._syncing = False
        self._select(self.value)
        n, total = len(options), len(self.db.devices)
        hidden = "" if self.value in self._option_ids() or not self.value else \
            " · the chosen GPU is hidden by the filters"
        self.count.value = f"<div class='vp-count'>{n} of {total} GPUs{hidden}</div>"
        if errors:
            self.message.value = "".join(message_html(e) for e in errors)
        elif not options:
            self.message.value = message_html("No GPU matches these filters.", "info")
        else:
            self.message.value = ""
        return devices

    @staticmethod
    def label(device) -> str:
        """'H100 SXM5 80GB · 80 GiB · 3.35 TB/s' (the vendor prefix is the filter's job)."""
        name = device.name
        if name.lower().startswith(device.vendor.lower() + " "):
            name = name[len(device.vendor) + 1:]
        gib = device.memory_bytes / 2**30
        bw = device.bandwidth_gbs
        rate = f"{bw / 1000:.2f} TB/s" if bw >= 1000 else f"{bw:.0f} GB/s"
        return f"{name} · {gib:.0f} GiB · {rate}"

    # -- widgets -> state
    def _on_filter(self, change):
        self.apply_filters()

    def _on_list(self, change):
        if self._syncing or change["new"] is None:
            return
        self.value = change["new"]
