"""One visual language for the planner's charts: palette, fonts, sizes, axis styles.

Every colour a chart, the static SVG (`breakdown_svg`) or the report draws is defined here and
nowhere else (tests/test_charts.py greps the package). The palette is Okabe-Ito (Okabe & Ito
2008, "Color Universal Design", https://jfly.uni-koeln.de/color/), distinguishable under the
common colour-vision deficiencies. Meaning is fixed across charts: green = fits, vermillion
= does not fit / over the limit, blue = the chosen GPU or the workload, near-black = a limit
line, grey = context. Each memory component has one colour (`COMPONENT_PALETTE`) in every
chart. Pinned GPUs take the remaining hues in order.

Every builder ends with `finish(...)`, which sets the size (`width="container"`: the page
sizes charts), the title (with units) and the shared config. Plain-Python helpers here (no
altair at import time): `gib`, `finite`, `clean_rows`, `spec_rows`.
"""
from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping

from .. import vocab
from ..i18n import format_number
from ..units import SIZE_DIGITS, GiB

OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "bluish_green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish_purple": "#CC79A7",
}
# categorical order when a chart needs n distinct hues
PALETTE = [OKABE_ITO[k] for k in ("blue", "orange", "bluish_green", "reddish_purple",
                                   "sky_blue", "vermillion", "yellow", "black")]
FIT_COLOR = OKABE_ITO["bluish_green"]
NO_FIT_COLOR = OKABE_ITO["vermillion"]
CHOSEN_COLOR = OKABE_ITO["blue"]
PIN_COLORS = [OKABE_ITO[k] for k in ("orange", "reddish_purple", "sky_blue", "black")]
LIMIT_COLOR = "#1f2937"       # capacity / usable-memory lines
NEUTRAL_COLOR = "#999999"     # context: today's peak, datasheet figures
LIGHT_COLOR = "#d9d9d9"       # allocator slack, phase bands
INK = "#1f2937"
LABEL_INK = "#374151"         # axis and legend labels
STRONG_INK = "#111827"        # the chosen GPU's ring and name
MUTED = "#6b7280"
GRID = "#eef0f3"
# the report's page (report/html.py): rules, the verdict's tinted boxes, code blocks
PAPER = "#ffffff"
RULE = "#e5e7eb"
FIT_TINT = "#e6f5f0"          # bluish green at ~10% on white
NO_FIT_TINT = "#fbece3"       # vermillion at ~10% on white
CODE_BG = "#f6f7f9"
DOMAIN = "#c7ccd4"
FONT = "-apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
TITLE_SIZE = 14
SUBTITLE_SIZE = 12
LABEL_SIZE = 11
AXIS_TITLE_SIZE = 12

# one colour per memory component (the domain's names), in stacking order
COMPONENT_PALETTE = {
    "weights": OKABE_ITO["blue"],
    "gradients": OKABE_ITO["sky_blue"],
    "optimizer_states": OKABE_ITO["reddish_purple"],
    "activations": OKABE_ITO["orange"],
    "kv_cache": OKABE_ITO["bluish_green"],
    "temporary": OKABE_ITO["yellow"],
    "allocator_slack": LIGHT_COLOR,
    "cuda_context": NEUTRAL_COLOR,
}
OTHER_COMPONENT = "#555555"

# the vendors' own brand hues (the landscape chart's legend reads at a glance; not data colours)
VENDOR_COLORS = {"NVIDIA": "#76b900", "AMD": "#ed1c24", "Intel": "#0071c5", "Google": "#f4b400",
                 "Apple": "#555555"}
OTHER_VENDOR_COLOR = "#8c8c8c"

PHASE_LABELS = vocab.PHASE_LABELS


def label(key: str, table: Mapping[str, str] | None = None, lang: str = "en") -> str:
    """A phase key as people read it: 'optimizer-step' -> 'Optimizer step' (`table` first,
    else `vocab.phase_label`, the one name of each phase), in `lang` (the English label is the
    catalogue's key)."""
    from ..i18n import gettext
    if table and key in table:
        return gettext(table[key], lang)
    return gettext(vocab.phase_label(key), lang)


def component_color(key: str) -> str:
    return COMPONENT_PALETTE.get(key, OTHER_COMPONENT)


def finite(v: Any) -> bool:
    """A real, finite number (not None, NaN, inf, bool or text)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# the number of a size in a chart's text: GiB with the one formatter's decimals (units.py),
# and the same in Vega tooltips
GIB_FORMAT = f",.{SIZE_DIGITS}f"


def gib_number(n: int | float, lang: str = "en") -> str:
    """Bytes as the number of GiB a chart writes before ' GiB': 80 * 2**30 -> '80.00'."""
    return format_number(n / GiB, SIZE_DIGITS, lang)


def gib(n: int | float, digits: int = 3) -> float:
    """Bytes -> GiB, rounded (charts plot GiB; bytes stay ints elsewhere)."""
    return round(n / GiB, digits)


def clean_rows(rows: Iterable[Mapping[str, Any]], *required: str) -> list[dict]:
    """Rows whose `required` fields are finite numbers; NaN/inf in other fields become None,
    so no chart carries a value Vega cannot place (no 'Infinite extent')."""
    out = []
    for r in rows:
        if all(finite(r.get(k)) for k in required):
            out.append({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                        for k, v in r.items()})
    return out


def spec_rows(spec: Mapping[str, Any]) -> list[dict]:
    """Every inline data row of a chart spec: top-level datasets and the data of every
    (nested) layer / concat view."""
    out: list[dict] = []
    stack = [spec]
    while stack:
        node = stack.pop(0)
        if "values" in (node.get("data") or {}):
            out += node["data"]["values"]
        for key in ("layer", "hconcat", "vconcat", "concat"):
            stack += list(node.get(key) or [])
        if isinstance(node.get("spec"), Mapping):
            stack.append(node["spec"])
    for rows in (spec.get("datasets") or {}).values():
        out += rows
    return out


def as_dict(obj: Any) -> Mapping[str, Any]:
    """A mapping, or an object's to_dict() (Device, Estimate)."""
    if obj is None:
        return {}
    if isinstance(obj, Mapping):
        return obj
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(f"expected a dict or an object with to_dict(), got {type(obj).__name__}")


def usable_of(d: Mapping[str, Any] | None) -> int | None:
    """Usable bytes of a GPU entry: `usable_bytes`, else `usable_memory_bytes`, else nominal."""
    if not d:
        return None
    for k in ("usable_bytes", "usable_memory_bytes", "memory_bytes"):
        if finite(d.get(k)) and d[k] > 0:
            return int(d[k])
    return None


# a legend's entries in one column where the chart's container is narrow (a phone: 390 px
# leaves ~300 px to a chart), else in one row; containerSize() is 0 where nothing contains
# the chart (the static SVG), which keeps the row
NARROW = 480
IS_NARROW = f"containerSize()[0] > 0 && containerSize()[0] < {NARROW}"
NARROW_COLUMNS = {"expr": f"{IS_NARROW} ? 1 : 0"}
# a subtitle line holds at most this many columns (a CJK character counts two): ~300 px at
# SUBTITLE_SIZE, so a phone shows it whole; a longer subtitle is broken into lines
SUBTITLE_COLUMNS = 46
# the same for a title (bold, TITLE_SIZE: ~7.5 px a column) in a narrow container, and for
# an axis title (AXIS_TITLE_SIZE; centred on the plot, which the axis labels narrow)
TITLE_COLUMNS = 36
AXIS_TITLE_COLUMNS = 40
# a text mark's width in px per column at size 1 (measured in Chromium at 10.5-11 px:
# 'short 7.39 GiB · needs 2 GPUs' 144 px = 0.47, bold 'this step: 797 FLOP/B,
# compute-bound' 202 px = 0.51; 0.56 leaves room for wider system fonts)
EM_PER_COLUMN = 0.56


def when_narrow(narrow: Any, wide: Any) -> dict:
    """A Vega expression: `narrow` where the chart's container is narrow (a phone), else
    `wide` (and `wide` where nothing contains the chart: the static SVG)."""
    import json
    return {"expr": f"{IS_NARROW} ? {json.dumps(narrow, ensure_ascii=False)} : "
                    f"{json.dumps(wide, ensure_ascii=False)}"}


def text_px(text: str, size: float = LABEL_SIZE) -> float:
    """An upper estimate of `text`'s width in px at font `size` (its longest line)."""
    return max((sum(_cols(c) for c in line) * EM_PER_COLUMN * size
                for line in str(text).split("\n")), default=0.0)


def fit_title(text: str) -> str | dict:
    """A chart title that a narrow container shows whole: `text` as lines of TITLE_COLUMNS
    there (Vega draws a title on one line and cut it at the edge), as it is elsewhere."""
    lines = _wrap_line(str(text), TITLE_COLUMNS)
    return text if len(lines) == 1 else when_narrow(lines, text)


def title_text(title: Any) -> str:
    """The text of a spec's title as a wide chart shows it: `title` is the spec, its
    "title", its "text", or `fit_title`'s expression (whose last literal is the text)."""
    from ..safejson import loads
    if isinstance(title, Mapping) and "title" in title and "expr" not in title:
        title = title["title"]
    if isinstance(title, Mapping) and "text" in title:
        title = title["text"]
    if isinstance(title, Mapping) and "expr" in title:
        return loads(re.search(r' : ("(?:[^"\\]|\\.)*")$', title["expr"]).group(1),
                     "a chart title")
    return " ".join(title) if isinstance(title, list) else str(title)


def axis_title(text: str, columns: int = AXIS_TITLE_COLUMNS) -> str | list[str]:
    """An axis title as lines of at most `columns` (a long one ran past a narrow chart)."""
    lines = _wrap_line(str(text), columns)
    return lines[0] if len(lines) == 1 else lines


def wrap_text(text: str, columns: int) -> str:
    """`text` broken into lines of at most `columns` after ' · ', a comma or a semicolon
    (clauses packed while they fit), then at spaces or between CJK characters; joined by a
    newline (the text marks' `lineBreak`)."""
    out: list[str] = []
    line = ""
    for clause in re.findall(r".+?(?: · |[,;:]\s+|[，；：]|$)", str(text)):
        if line and sum(_cols(c) for c in (line + clause).rstrip(" ·")) > columns:
            out += _wrap_line(line.rstrip(" ·"), columns)
            line = ""
        line += clause
    out += _wrap_line(line.rstrip(" ·"), columns) if line.strip() else []
    return "\n".join(out)


def narrow_labels(labels: Iterable[str], columns: int) -> str:
    """An axis' `labelExpr`: in a narrow container each of `labels` longer than `columns`
    as lines (Vega draws an array label as lines), elsewhere as it is."""
    import json
    parts = []
    for text in labels:
        lines = _wrap_line(str(text), columns)
        if len(lines) > 1:
            parts.append(f"datum.value === {json.dumps(text, ensure_ascii=False)} ? "
                         f"{json.dumps(lines, ensure_ascii=False)}")
    if not parts:
        return "datum.label"
    return f"{IS_NARROW} ? ({' : '.join(parts + ['datum.label'])}) : datum.label"


def narrow_rows(rows: list[dict], field: str, columns: int) -> list[dict]:
    """`rows` with `<field>_narrow`: the text as lines of `columns` (`wrap_text`), which
    `narrow_field` shows in a narrow container."""
    return [{**r, f"{field}_narrow": wrap_text(r[field], columns)} for r in rows]


def narrow_field(field: str) -> str:
    """A calculate expression: `<field>_narrow` in a narrow container, else `field` (a text
    mark shows it with lineBreak '\\n')."""
    return f"{IS_NARROW} ? datum['{field}_narrow'] : datum['{field}']"


def room_for_labels(starts: Iterable[float], texts: Iterable[str], d0: float, d1: float,
                    size: float = LABEL_SIZE, dx: float = 4, log: bool = False,
                    narrow_texts: Iterable[str] | None = None) -> dict:
    """A scale's upper domain (`domainMax`) that leaves each text, drawn from its start value
    (`starts`), room inside the plot whatever its width (the `width` signal): at least `d1`;
    for a label L px long starting at v on a linear scale from d0, d1 >= d0 + (v - d0) * W /
    (W - L) (on a log scale the same in logs). A label too long for the plot gets at most 5x
    the room of the plot (the bars shrink rather than the text leaving the chart).
    `narrow_texts`: the texts a narrow container shows instead (`narrow_rows`)."""
    starts = list(starts)
    if narrow_texts is not None:
        wide = room_for_labels(starts, texts, d0, d1, size, dx, log)["expr"]
        narrow = room_for_labels(starts, narrow_texts, d0, d1, size, dx, log)["expr"]
        return {"expr": f"{IS_NARROW} ? {narrow} : {wide}"}
    terms = []
    for v, text in zip(starts, texts):
        room = f"max(width - {text_px(text, size) + dx + 6:.1f}, 0.2 * width)"
        if log:
            terms.append(f"{d0:.6g} * pow({v / d0:.6g}, width / {room})")
        else:
            terms.append(f"{d0:.6g} + {v - d0:.6g} * width / {room}")
    return {"expr": f"max({d1:.6g}, {', '.join(terms)})" if terms else f"{d1:.6g}"}


def wrap_subtitle(subtitle: str | list[str] | None,
                  columns: int = SUBTITLE_COLUMNS) -> str | list[str] | None:
    """`subtitle` as lines of at most `columns` (broken at spaces, or between CJK
    characters); Vega draws no line breaks of its own, so a long one was cut at the edge."""
    if not subtitle:
        return subtitle
    out: list[str] = []
    for line in ([subtitle] if isinstance(subtitle, str) else subtitle):
        out += _wrap_line(str(line), columns)
    return out[0] if len(out) == 1 else out


def _cols(ch: str) -> int:
    return 2 if ord(ch) >= 0x2E80 else 1


def _wrap_line(line: str, columns: int) -> list[str]:
    lines, cur, width = [], "", 0
    for token in re.findall(r"[\u2e80-\uffff]|[^\s\u2e80-\uffff]+\s*|\s+", line):
        w = sum(_cols(c) for c in token.rstrip())
        if cur and width + w > columns:
            lines.append(cur.rstrip())
            cur, width = "", 0
        cur += token
        width += sum(_cols(c) for c in token)
    if cur.strip():
        lines.append(cur.rstrip())
    return _kinsoku(lines) or [line]


OPENING, CLOSING = "（「『《【", "）」』》】，。、；：！？"


def _kinsoku(lines: list[str]) -> list[str]:
    """No line of CJK text ends with an opening bracket or starts with a closing one or a
    comma / full stop (the bracket moves to the next line, the closing mark to the end of
    the line before: it may hang one character past the width)."""
    for i in range(len(lines) - 1):
        while lines[i] and lines[i][-1] in OPENING:
            lines[i], lines[i + 1] = lines[i][:-1].rstrip(), lines[i][-1] + lines[i + 1]
        while lines[i + 1] and lines[i + 1][0] in CLOSING:
            lines[i], lines[i + 1] = lines[i] + lines[i + 1][0], lines[i + 1][1:].lstrip()
    return [ln for ln in lines if ln]


def title(text: str, subtitle: str | list[str] | None = None):
    import altair as alt

    kw = {"subtitle": wrap_subtitle(subtitle)} if subtitle else {}
    return alt.Title(fit_title(text), anchor="start", fontSize=TITLE_SIZE, subtitleFontSize=SUBTITLE_SIZE,
                     subtitleColor=MUTED, color=INK, offset=8, **kw)


def finish(chart, *, title_text: str, subtitle: str | list[str] | None = None,
           width: int | str = "container", height: Any = 300):
    """Size, title and the shared config: the last call of every builder. One copy of the
    chart (`properties`), then the config set in place: each `configure_*` call would copy
    every layer and its data again (~40 ms each on a layered chart)."""
    import altair as alt

    out = chart.properties(width=width, height=height, title=title(title_text, subtitle))
    out.config = alt.Config(
        font=FONT,
        view=alt.ViewConfig(stroke=None),
        axis=alt.AxisConfig(labelColor=INK, titleColor=MUTED, gridColor=GRID,
                            domainColor=DOMAIN, tickColor=DOMAIN, labelFontSize=LABEL_SIZE,
                            titleFontSize=AXIS_TITLE_SIZE, titleFontWeight="normal"),
        legend=alt.LegendConfig(labelColor=INK, titleColor=MUTED, labelFontSize=LABEL_SIZE,
                                titleFontSize=LABEL_SIZE, titleFontWeight="normal",
                                symbolSize=110, orient="bottom", direction="horizontal",
                                labelLimit=220, columns=NARROW_COLUMNS),
        text=alt.MarkConfig(font=FONT, fontSize=LABEL_SIZE, color=INK))
    return out


def gib_axis(**kw):
    """The shared axis for memory in GiB: grid on, readable tick count."""
    import altair as alt

    return alt.Axis(grid=True, tickCount=6, **kw)


def label_expr(names: Mapping[str, str]) -> str:
    """A Vega expression showing `names[value]` for a legend's values (the data keep their
    English values; the legend reads in the chart's language)."""
    import json
    parts = [f"datum.value === {json.dumps(k)} ? {json.dumps(v, ensure_ascii=False)}"
             for k, v in names.items() if k != v]
    return " : ".join(parts + ["datum.label"]) if parts else "datum.label"
