"""The report's words: every visible string goes through `tr` (`vramplan.i18n.gettext`, the
Chinese in `locale/zh/report.toml`), and sizes, rates and times are written here, once.
"""
from __future__ import annotations

from ..i18n import format_number, gettext, normalise_lang
from ..units import format_gbs, format_seconds, format_size

__all__ = ["tr", "size", "gbs", "seconds", "count", "share", "normalise_lang"]


def tr(text: str, lang: str, **values) -> str:
    """`text` in `lang`, its `{placeholders}` filled from `values`."""
    out = gettext(text, lang)
    return out.format(**values) if values else out


def size(n: int | float | None, lang: str = "en") -> str:
    """Bytes as people read them (`units.format_size`, the charts' and the page's too): 12.34
    GiB, under 1 GiB in MiB; '-' for none."""
    return format_size(n, lang, none="-")


def gbs(v: float | None, lang: str = "en") -> str:
    """Decimal GB/s, as vendors quote bandwidth (`units.format_gbs`)."""
    return format_gbs(v, lang, none="-")


def seconds(s: float | None, lang: str = "en") -> str:
    """A time (`units.format_seconds`, the page's too): '2.48 ms', '443.9 ms', '1.04 s'."""
    return format_seconds(s, lang, none="-")


def count(n: int | float | None, lang: str = "en") -> str:
    return "-" if n is None else format_number(n, 0, lang)


def share(v: float) -> str:
    """0.0088 -> '+0.9%', 0.33 -> '+33%'."""
    return f"+{v:.1%}" if abs(v) < 0.0995 else f"+{v:.0%}"
