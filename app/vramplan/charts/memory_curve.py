"""Device memory against one swept parameter (batch size, sequence length, resolution, frames),
with the usable memory of the chosen GPU and of pinned GPUs as horizontal lines and the
largest value that fits marked."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..i18n import gettext
from . import theme


def memory_curve_rows(points: Iterable[Mapping[str, Any]], usable_bytes: int | None = None
                      ) -> list[dict]:
    """Points `{x, device_used_bytes, fits?}` as chart rows, sorted by x; points without a
    finite x and device_used_bytes are left out. `fits` missing: read against `usable_bytes`
    (None when that is unknown too). Row: x, bytes, gib, fits, status."""
    rows = []
    for p in theme.clean_rows(points, "x", "device_used_bytes"):
        used = int(p["device_used_bytes"])
        fits = p.get("fits")
        if fits is None and usable_bytes:
            fits = used <= usable_bytes
        status = "unknown" if fits is None else ("fits" if fits else "does not fit")
        rows.append({"x": p["x"], "bytes": used, "gib": theme.gib(used), "fits": fits,
                     "status": status})
    return sorted(rows, key=lambda r: r["x"])


def capacity_rows(gpu: Any = None, pinned: Iterable[Any] = (), lang: str = "en") -> list[dict]:
    """The horizontal lines: the chosen GPU first, then each pinned GPU, from dicts with a name
    and usable bytes (`usable_bytes`, `usable_memory_bytes` or `memory_bytes`: a Device dict,
    an estimate's `gpu` entry or `{"name", "usable_bytes"}`). Entries without bytes are skipped.
    Row: name, role (chosen/pinned), usable_bytes, usable_gib, text, color."""
    rows, seen = [], set()
    entries = ([(gpu, "chosen")] if gpu is not None else []) + [(p, "pinned") for p in pinned]
    for entry, role in entries:
        d = theme.as_dict(entry)
        usable = theme.usable_of(d)
        name = d.get("name") or d.get("id") or "GPU"
        if not usable or name in seen:
            continue
        seen.add(name)
        n_pinned = sum(r["role"] == "pinned" for r in rows)
        color = theme.LIMIT_COLOR if role == "chosen" else \
            theme.PIN_COLORS[n_pinned % len(theme.PIN_COLORS)]
        rows.append({"name": name, "role": role, "usable_bytes": usable,
                     "usable_gib": theme.gib(usable),
                     "text": gettext("{gpu}: {size} GiB usable", lang).format(
                         gpu=name, size=theme.gib_number(usable, lang)), "color": color})
    return rows


def _log_x(xs: list[float], x_log: bool | None) -> bool:
    if x_log is not None:
        return bool(x_log) and all(x > 0 for x in xs)
    return bool(xs) and min(xs) > 0 and max(xs) / min(xs) >= 16


def _axes(lo, hi, log: bool, top: float, x_title: str, unit: str, t) -> tuple:
    """The x encoding (log2 or linear over [lo, hi]) and the y encoding (GiB, 0 to top)."""
    import altair as alt
    x_scale = alt.Scale(type="log", base=2, domain=[lo, hi], nice=False, padding=8) \
        if log else alt.Scale(domain=[lo, hi], nice=False, padding=8)
    x = alt.X("x:Q", title=f"{t(x_title)}{unit}" + (t(", log scale") if log else ""), scale=x_scale,
              axis=alt.Axis(grid=False, labelFlush=True, tickMinStep=1, format="~s"))
    y = alt.Y("gib:Q", title=t("Device memory used (GiB per GPU)"),
              scale=alt.Scale(domain=[0, round(top, 3)], nice=False), axis=theme.gib_axis())
    return x, y


def _capacity_layers(caps: list, t) -> list:
    """A dashed rule per GPU at its usable memory and the chosen GPU's label."""
    import altair as alt
    layers: list = []
    if not caps:
        return layers
    cap_base = alt.Chart(alt.Data(values=caps))
    # the chosen GPU's line drawn last (on top of a pinned GPU with the same capacity)
    layers.append(alt.Chart(alt.Data(values=caps[::-1])).mark_rule(strokeWidth=2, strokeDash=[6, 3]).encode(
        y=alt.Y("usable_gib:Q"),
        stroke=alt.Stroke("name:N", title=t("Usable memory"),
                          scale=alt.Scale(domain=[c["name"] for c in caps],
                                          range=[c["color"] for c in caps])),
        tooltip=[alt.Tooltip("text:N", title=t("Limit"))]))
    layers.append(cap_base.transform_filter(alt.datum.role == "chosen").mark_text(
        align="left", dx=4, dy=-7, x=0, fontSize=theme.LABEL_SIZE,
        color=theme.LIMIT_COLOR).encode(y="usable_gib:Q", text="text:N"))
    return layers


def _max_layers(max_x, lo, hi, log: bool, word: str, t) -> list:
    """The dotted rule at the largest x that fits and its label (right-aligned near the right
    edge)."""
    import altair as alt
    layers: list = []
    mrow = [{"x": max_x, "text": t("max {what} {value}").format(what=word,
                                                                value=f"{max_x:,g}")}]
    mbase = alt.Chart(alt.Data(values=mrow))
    layers.append(mbase.mark_rule(color=theme.FIT_COLOR, strokeWidth=2,
                                  strokeDash=[2, 2]).encode(
        x=alt.X("x:Q"), tooltip=[alt.Tooltip("text:N", title=t("Largest that fits"))]))
    right = (max_x - lo) / ((hi - lo) or 1) > 0.7 if not log else max_x / hi > 0.5
    layers.append(mbase.mark_text(align="right" if right else "left", dx=-4 if right else 4,
                                  y=4, baseline="top", fontWeight="bold",
                                  color=theme.FIT_COLOR).encode(x="x:Q", text="text:N"))
    return layers


def memory_curve_chart(points: Iterable[Mapping[str, Any]], *, gpu: Any = None,
                       pinned: Iterable[Any] = (), max_x: float | None = None,
                       x_title: str = "Batch size", x_unit: str | None = None,
                       x_log: bool | None = None, width: int | str = "container",
                       height: int = 300, lang: str = "en"):
    """Device memory used (GiB per GPU) against `x`, one dot per point coloured by fit, a
    line through them; a dashed horizontal line per GPU at its usable memory (`gpu` the
    chosen one, `pinned` others to compare); a vertical line at `max_x` (the largest x that
    fits, e.g. the estimate's max_batch_size; 0 or None: not drawn).

    `x_title` names the swept parameter ("Batch size", "Sequence length", "Resolution",
    "Frames"), `x_unit` its unit ("tokens", "px"). The x axis is log2 when the points span
    16x or more (or `x_log=True`). `lang`: the language of the titles and labels (the
    English `x_title` and `x_unit` are catalogue keys)."""
    import altair as alt

    def t(text: str) -> str:
        return gettext(text, lang)
    caps = capacity_rows(gpu, pinned, lang)
    chosen = next((c for c in caps if c["role"] == "chosen"), None)
    rows = memory_curve_rows(points, chosen["usable_bytes"] if chosen else None)
    xs = [r["x"] for r in rows]
    mark_max = theme.finite(max_x) and max_x > 0
    if mark_max:
        xs.append(max_x)
    log = _log_x(xs, x_log)
    lo, hi = (min(xs), max(xs)) if xs else (0, 1)
    if hi <= lo:
        lo, hi = (lo / 2, hi * 2) if log else (lo - 1, hi + 1)
    top = max([r["gib"] for r in rows] + [c["usable_gib"] for c in caps] + [1.0]) * 1.1
    unit = f" ({t(x_unit)})" if x_unit else ""
    word = t(x_title[0].lower() + x_title[1:])
    x, y = _axes(lo, hi, log, top, x_title, unit, t)
    for r in rows:
        r["status_label"] = t(r["status"])
    tips = [alt.Tooltip("x:Q", title=t(x_title)), alt.Tooltip("gib:Q", title="GiB", format=theme.GIB_FORMAT),
            alt.Tooltip("status_label:N", title=t("On the chosen GPU"))]
    base = alt.Chart(alt.Data(values=rows))
    colors = {"fits": theme.FIT_COLOR, "does not fit": theme.NO_FIT_COLOR,
              "unknown": theme.NEUTRAL_COLOR}
    present = [s for s in colors if any(r["status"] == s for r in rows)] or ["fits"]
    status_scale = alt.Scale(domain=present, range=[colors[s] for s in present])
    layers = [
        base.mark_line(color=theme.CHOSEN_COLOR, strokeWidth=2).encode(x=x, y=y),
        base.mark_circle(size=60, opacity=1, stroke="white", strokeWidth=1).encode(
            x=x, y=y, tooltip=tips,
            color=alt.Color("status:N", scale=status_scale, title=t("Point"), legend=alt.Legend(
                labelExpr=theme.label_expr({s: t(s) for s in present})))),
    ]
    layers += _capacity_layers(caps, t)
    if mark_max:
        layers += _max_layers(max_x, lo, hi, log, word, t)
    sub = t("dots: the estimate; dashed lines: usable memory of each GPU")
    if mark_max:
        sub += t("; dotted: the largest {what} that fits").format(what=t(x_title.lower()))
    return theme.finish(alt.layer(*layers),
                        title_text=t("Device memory vs {what} (GiB per GPU)").format(
                            what=t(x_title.lower())),
                        subtitle=sub, width=width, height=height)
