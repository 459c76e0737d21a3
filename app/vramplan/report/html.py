"""A Report as one self-contained HTML file: inline CSS, the charts as inline SVG, no script,
no font, no image or link to anything outside the file (a Content-Security-Policy of
`default-src 'none'` says so to the browser too), so it opens offline and prints whole."""
from __future__ import annotations

import html
import json
from string import Template

from .. import __version__
from ..charts import theme
from .content import Report, plan_link
from .ranks import rank_table
from .text import tr
from .words import growth_text

_e = html.escape

# the colours are the charts' (charts/theme.py), so the verdict box and the bars agree
CSS = Template("""
:root{--ink:$ink;--muted:$muted;--line:$rule;--fit:$fit;--nofit:$nofit}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 -apple-system,BlinkMacSystemFont,'Segoe UI',Roboto,Helvetica,
Arial,'PingFang SC','Microsoft YaHei','Noto Sans CJK SC',sans-serif;color:var(--ink);
background:$paper}
main{max-width:880px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:1.5rem;margin:0 0 8px}h2{font-size:1.15rem;margin:28px 0 8px;
border-bottom:1px solid var(--line);padding-bottom:4px}h3{font-size:1rem;margin:18px 0 6px}
.verdict{font-weight:600;padding:10px 14px;border-radius:6px;border-left:5px solid}
.verdict.fits{border-color:var(--fit);background:$fit_tint}
.verdict.nofit{border-color:var(--nofit);background:$nofit_tint}
table{border-collapse:collapse;width:100%;margin:6px 0 10px;font-size:.92rem}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:top;
overflow-wrap:anywhere}
th{color:var(--muted);font-weight:600;white-space:nowrap;overflow-wrap:normal}td.num{text-align:right;white-space:nowrap}
figure{margin:12px 0}svg.vp-chart{max-width:100%;height:auto;display:block}
code,pre{font:12.5px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:$code_bg;padding:10px;border-radius:6px;overflow-x:auto;white-space:pre-wrap}
ul{padding-left:20px}li{margin:2px 0;overflow-wrap:anywhere}
.muted{color:var(--muted)}footer{margin-top:32px;color:var(--muted);font-size:.85rem}
@media print{main{max-width:none}h2{break-after:avoid}figure,table{break-inside:avoid}}
""").substitute(ink=theme.INK, muted=theme.MUTED, rule=theme.RULE, fit=theme.FIT_COLOR,
                nofit=theme.NO_FIT_COLOR, paper=theme.PAPER, fit_tint=theme.FIT_TINT,
                nofit_tint=theme.NO_FIT_TINT, code_bg=theme.CODE_BG)
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _table(head: list[str], rows: list[list], num: set[int] = frozenset()) -> str:
    th = "".join(f"<th>{_e(str(h))}</th>" for h in head)
    body = "".join("<tr>" + "".join(
        f"<td{' class=num' if i in num else ''}>{_e(str(c))}</td>" for i, c in enumerate(r))
        + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _figure(svgs: dict, key: str) -> str:
    return f"<figure class='vp-{key}'>{svgs[key]}</figure>" if key in svgs else ""


def _advice(r: Report, S: dict, L: str) -> list[str]:
    """The advice section: the savings chart, the plans that fit, the recommendations and how
    to switch each on, the room to grow."""
    parts = []
    parts.append(f"<h2>{_e(tr('Advice', L))}</h2>")
    parts.append(_figure(S, "savings"))
    if r.plans:
        parts += [f"<h3>{_e(tr('Plans that fit (cheapest first)', L))}</h3>",
                  _table([tr("#", L), tr("Changes", L), tr("GPUs", L), tr("Memory per GPU", L),
                          tr("Cost", L)],
                         [[i, " + ".join(p["changes"]) or "-", p["gpus"], p["used"], p["cost"]]
                          for i, p in enumerate(r.plans, 1)], {0, 2, 3})]
    if r.recommendations:
        parts += [f"<h3>{_e(tr('Recommendations (most memory saved per cost first)', L))}</h3>",
                  _table([tr("#", L), tr("Change", L), tr("Saves", L), tr("Fits alone", L),
                          tr("Cost", L)],
                         [[i, x["title"], x["saves"],
                           tr("yes", L) if x["fits"] else tr("no", L), x["cost"]]
                          for i, x in enumerate(r.recommendations, 1)], {0, 2})]
        hows = "".join(
            f"<li><b>{_e(x['title'])}</b>: " + "; ".join(
                f"{_e(k)}: <code>{_e(v)}</code>" for k, v in x["how"]) + "</li>"
            for x in r.recommendations if x["how"])
        if hows:
            parts += [f"<h3>{_e(tr('How to switch each change on', L))}</h3><ul>{hows}</ul>"]
    if r.growth:
        parts.append(f"<p>{_e(growth_text(r.growth, L))}</p>")
    if not (r.plans or r.recommendations or r.growth):
        parts.append(f"<p class='muted'>{_e(tr('No advice was asked for or found for this plan.', L))}</p>")
    return parts


def to_html(r: Report, svgs: list[tuple[str, str]] | None = None) -> str:
    """The page; `svgs`: (key, SVG) from `svg.charts(r)` (None: rendered here)."""
    if svgs is None:
        from .svg import charts
        svgs = charts(r)
    S, L = dict(svgs), r.lang
    parts = [f"<h1>{_e(r.title)}</h1>",
             f"<p class='verdict {'fits' if r.fits else 'nofit'}'>{_e(r.verdict)}</p>"]
    if r.query:
        words, url = plan_link(r)
        # as text, not an href: the file refers to nowhere (its links are the reader's to open)
        parts.append(f"<p class='muted'>{_e(words)} <code>{_e(url or '?' + r.query)}</code></p>")
    parts += [f"<h2>{_e(tr('Figures', L))}</h2>",
              _table([tr("Figure", L), tr("Value", L)], [list(f) for f in r.figures], {1})]
    head, rows = rank_table(r.estimate, L)   # pipeline stages (report/ranks.py)
    if rows:
        parts += [f"<h2>{_e(tr('Memory per rank', L))}</h2>",
                  _table(head, rows, {2, 4, 5, 6})]
    if r.breakdown:
        parts += [f"<h2>{_e(tr('Memory at the peak by component', L))}</h2>",
                  _figure(S, "breakdown"),
                  _table([tr("Component", L), tr("Size", L), tr("Share", L)],
                         [[b["label"], b["size"], b["share"]] for b in r.breakdown], {1, 2})]
    if "bandwidth" in S or "phases" in S:
        parts += [f"<h2>{_e(tr('Bandwidth, time and phases', L))}</h2>",
                  _figure(S, "bandwidth"), _figure(S, "phases")]
    parts += _advice(r, S, L)
    if r.assumptions:
        parts += [f"<h2>{_e(tr('Assumptions', L))}</h2><ul>" +
                  "".join(f"<li>{_e(a)}</li>" for a in r.assumptions) + "</ul>"]
    parts += [f"<h2>{_e(tr('Sources', L))}</h2><ul>" +
              "".join(f"<li>{_e(s)}</li>" for s in r.sources) + "</ul>",
              f"<h2>{_e(tr('Scenario', L))}</h2><pre>"
              f"{_e(json.dumps(r.scenario, indent=2, ensure_ascii=False))}</pre>",
              f"<footer>{_e(tr('Made by vramplan {version}; every figure is its estimate.', L, version=__version__))}</footer>"]
    body = "\n".join(p for p in parts if p)
    lang = "zh-Hans" if L == "zh" else "en"
    return (f"<!doctype html>\n<html lang='{lang}'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{_e(r.title)}</title><style>{CSS}</style></head>\n"
            f"<body><main>\n{body}\n</main></body></html>\n")
