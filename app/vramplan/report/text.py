"""The report's words: every visible string goes through `tr` (`vramplan.i18n.gettext`, the
Chinese in `locale/zh/report.toml`), and sizes, rates and times are written here, once.
"""
from __future__ import annotations

from ..i18n import format_number, gettext, normalise_lang
from ..units import GiB, MiB

__all__ = ["tr", "size", "gbs", "seconds", "count", "share", "normalise_lang"]


def tr(text: str, lang: str, **values) -> str:
    """`text` in `lang`, its `{placeholders}` filled from `values`."""
    out = gettext(text, lang)
    return out.format(**values) if values else out


def size(n: int | float | None, lang: str = "en") -> str:
    """Bytes as people read them: 12.34 GiB (two decimals: a figure one can check by hand
    against bytes / 2**30), under 1 GiB in MiB; '-' for none."""
    if n is None:
        return "-"
    if abs(n) >= GiB or n == 0:
        return f"{format_number(n / GiB, 2, lang)} GiB"
    return f"{format_number(n / MiB, 1, lang)} MiB"


def gbs(v: float | None, lang: str = "en") -> str:
    """Decimal GB/s, as vendors quote bandwidth."""
    return "-" if v is None else f"{format_number(v, 1, lang)} GB/s"


def seconds(s: float | None, lang: str = "en") -> str:
    if s is None:
        return "-"
    if s < 1:
        return f"{format_number(s * 1e3, 2 if s < 0.01 else 1, lang)} ms"
    return f"{format_number(s, 2, lang)} s"


def count(n: int | float | None, lang: str = "en") -> str:
    return "-" if n is None else format_number(n, 0, lang)


def share(v: float) -> str:
    """0.0088 -> '+0.9%', 0.33 -> '+33%'."""
    return f"+{v:.1%}" if abs(v) < 0.0995 else f"+{v:.0%}"
