"""Sizes and rates: parsing text like '80GB', '80 GiB', '3.35 TB/s' and printing bytes.

The only place that knows about units. Inside vramplan sizes are int bytes and rates are
bytes per second; decimal (GB, TB/s) and binary (GiB) prefixes are always explicit.
"""
from __future__ import annotations

import math
import re

from .errors import VramplanError
from .i18n import format_number

KB, MB, GB, TB, PB = 10**3, 10**6, 10**9, 10**12, 10**15
KiB, MiB, GiB, TiB, PiB = 2**10, 2**20, 2**30, 2**40, 2**50

_SIZE_UNITS = {
    "b": 1, "byte": 1, "bytes": 1,
    "kb": KB, "mb": MB, "gb": GB, "tb": TB, "pb": PB,
    "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB, "pib": PiB,
    # shorthand used by nvidia-smi and people: "80G" is ambiguous, so it is refused below
}
_RATE_UNITS = {
    "b/s": 1, "kb/s": KB, "mb/s": MB, "gb/s": GB, "tb/s": TB,
    "kib/s": KiB, "mib/s": MiB, "gib/s": GiB, "tib/s": TiB,
}
_NUM = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_SIZE_RE = re.compile(rf"^\s*{_NUM}\s*([A-Za-z]*)\s*$")
_RATE_RE = re.compile(rf"^\s*{_NUM}\s*([A-Za-z]+/s)\s*$")


class UnitError(VramplanError, ValueError):
    """Text that is not a size or rate vramplan understands."""


def parse_bytes(text: str | int | float) -> int:
    """'80GB' -> 80_000_000_000, '80 GiB' -> 85_899_345_920, 512 -> 512 (plain numbers are bytes)."""
    if isinstance(text, bool):
        raise UnitError(f"not a size: {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise UnitError(f"not a size: {text!r}")
        return text
    if isinstance(text, float):
        if not math.isfinite(text) or text < 0:
            raise UnitError(f"not a size: {text!r}")
        return int(round(text))
    m = _SIZE_RE.match(str(text))
    if not m:
        raise UnitError(f"not a size: {text!r} (write e.g. '80GB' or '80 GiB')")
    value, unit = float(m.group(1)), m.group(2).lower()
    if unit and unit not in _SIZE_UNITS:
        raise UnitError(
            f"unknown size unit {m.group(2)!r} in {text!r}: use B, KB, MB, GB, TB (decimal) "
            "or KiB, MiB, GiB, TiB (binary)")
    value *= _SIZE_UNITS[unit] if unit else 1
    if not math.isfinite(value):   # '1e999 GiB': float() gives inf, int(inf) would overflow
        raise UnitError(f"not a size: {text!r} is too large")
    return int(round(value))


def parse_rate(text: str | int | float) -> float:
    """'3.35 TB/s' -> 3.35e12 bytes per second; plain numbers are bytes per second."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        try:
            value = float(text)
        except OverflowError:   # an int past the float range
            value = math.inf
        if not math.isfinite(value) or value < 0:
            raise UnitError(f"not a rate: {text!r}")
        return value
    m = _RATE_RE.match(str(text))
    if not m or m.group(2).lower() not in _RATE_UNITS:
        raise UnitError(f"not a rate: {text!r} (write e.g. '3.35 TB/s' or '900 GB/s')")
    value = float(m.group(1)) * _RATE_UNITS[m.group(2).lower()]
    if not math.isfinite(value):
        raise UnitError(f"not a rate: {text!r} is too large")
    return value


def to_gib(n: int | float) -> float:
    return n / GiB


def to_gb(n: int | float) -> float:
    return n / GB


def format_bytes(n: int | float, unit: str = "auto", digits: int = 1, binary: bool = True) -> str:
    """Bytes for people: format_bytes(85899345920) -> '80.0 GiB'; unit may force 'GB', 'MiB', ..."""
    if unit != "auto":
        key = unit.lower()
        if key not in _SIZE_UNITS:
            raise UnitError(f"unknown size unit {unit!r}")
        return f"{n / _SIZE_UNITS[key]:.{digits}f} {unit}"
    steps = [("PiB", PiB), ("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)] if binary else \
        [("PB", PB), ("TB", TB), ("GB", GB), ("MB", MB), ("KB", KB)]
    sign = "-" if n < 0 else ""
    a = abs(n)
    for name, size in steps:
        if a >= size:
            return f"{sign}{a / size:.{digits}f} {name}"
    return f"{sign}{int(a)} B"


# THE size formatter of everything people read (the charts, the page, the report, the CLI
# text): memory in binary GiB with two decimals (a figure one can check by hand against
# bytes / 2**30), under 1 GiB in MiB, under 1 MiB in KiB; numbers in the language's convention
SIZE_DIGITS = 2


def _finite(n) -> bool:
    return isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n)


def gib_number(n: int | float | None, lang: str = "en", none: str = "-") -> str:
    """The number of `format_gib` without its unit, for a column whose header says GiB (the
    CLI's tables): 80 * 2**30 -> '80.00', 1.5e12 -> '1,396.98'."""
    return format_number(n / GiB, SIZE_DIGITS, lang) if _finite(n) else none


def format_gib(n: int | float | None, lang: str = "en", digits: int = SIZE_DIGITS,
               none: str = "–") -> str:
    """Bytes in GiB whatever the size: 80 * 2**30 -> '80.00 GiB', 1.5e12 -> '1,396.98 GiB';
    `none` for None or a non-number."""
    if not _finite(n):
        return none
    return f"{format_number(n / GiB, digits, lang)} GiB"


def format_size(n: int | float | None, lang: str = "en", none: str = "–") -> str:
    """Bytes for people: 16 * 2**30 -> '16.00 GiB', 3 * 2**20 -> '3.0 MiB', 2048 -> '2.0 KiB',
    512 -> '512 B'; `none` for None or a non-number."""
    if not _finite(n):
        return none
    a = abs(n)
    if a >= GiB or n == 0:
        return format_gib(n, lang)
    for name, size in (("MiB", MiB), ("KiB", KiB)):
        if a >= size:
            return f"{format_number(n / size, 1, lang)} {name}"
    return f"{format_number(n, 0, lang)} B"


def format_gbs(gbs: float | None, lang: str = "en", none: str = "–") -> str:
    """Bandwidth in decimal GB/s, as vendors quote it: 3350.0 -> '3,350.0 GB/s'."""
    return f"{format_number(gbs, 1, lang)} GB/s" if _finite(gbs) else none


def format_seconds(s: float | None, lang: str = "en", none: str = "–") -> str:
    """A time as the page, the report and the CLI write it: under 1 ms in µs ('50.0 µs'),
    under 10 ms with two decimals ('2.48 ms'), under 1 s with one ('443.9 ms'), else seconds
    with two ('1.04 s')."""
    if not _finite(s):
        return none
    if abs(s) < 1e-3:
        return f"{format_number(s * 1e6, 1, lang)} µs"
    if abs(s) < 1:
        return f"{format_number(s * 1e3, 2 if abs(s) < 0.01 else 1, lang)} ms"
    return f"{format_number(s, 2, lang)} s"


def format_flop(flops: float | None, lang: str = "en", none: str = "–") -> str:
    """A FLOP count as every note, page and report prints it, one decimal in the largest unit
    it reaches: TFLOP from 1 TFLOP (4.2e14 -> '420.0 TFLOP', 1.2e16 -> '12,000.0 TFLOP'), GFLOP
    from 1 GFLOP (2.5e11 -> '250.0 GFLOP'; a decode step's 7.5e9 -> '7.5 GFLOP' read '0.0 TFLOP'
    before), else MFLOP (3.0e6 -> '3.0 MFLOP')."""
    if not _finite(flops):
        return none
    a = abs(flops)
    for name, size in (("TFLOP", 1e12), ("GFLOP", 1e9)):
        if a >= size:
            return f"{format_number(flops / size, 1, lang)} {name}"
    return f"{format_number(flops / 1e6, 1, lang)} MFLOP"


def counted(n, noun: str, plural: str | None = None) -> str:
    """A count with its noun in English, singular for one: counted(1, 'sequence') ->
    '1 sequence', counted(2048, 'token') -> '2,048 tokens'; `plural` for an irregular noun.
    An array (the sweep's batch axis) prints its range with the plural. Chinese has no plural:
    its catalogue is keyed by the plural text (i18n.translate_message reads '1 sequence' as
    '1 sequences')."""
    many = plural or noun + "s"
    if getattr(n, "ndim", 0) > 0:
        rng = f"{n.min()}..{n.max()} ({n.size} values)" if n.size else "[]"
        return f"{rng} {many}"
    if isinstance(n, float) and n.is_integer():
        n = int(n)
    text = f"{n:,.2f}" if isinstance(n, float) else f"{int(n):,}"
    return f"{text} {noun if n == 1 else many}"


def format_rate(bytes_per_s: float, digits: int = 2) -> str:
    """Decimal rates, as vendors quote them: 3.35e12 -> '3.35 TB/s'."""
    a = abs(bytes_per_s)
    for name, size in (("TB/s", TB), ("GB/s", GB), ("MB/s", MB), ("KB/s", KB)):
        if a >= size:
            return f"{bytes_per_s / size:.{digits}f} {name}"
    return f"{bytes_per_s:.0f} B/s"


def bandwidth_gbs(bus_width_bits: int, data_rate_gbps: float) -> float:
    """Peak bandwidth in decimal GB/s: bus bits x per-pin Gbit/s / 8 (the per-pin rate already
    counts both clock edges, so there is no extra x2)."""
    return bus_width_bits * data_rate_gbps / 8
