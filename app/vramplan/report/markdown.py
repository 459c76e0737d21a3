"""A Report as Markdown: headings, tables and lists, no HTML and no images (the HTML report
carries the charts)."""
from __future__ import annotations

import json

from .content import Report, plan_link
from .ranks import rank_table
from .text import tr
from .words import growth_text


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(head: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(_cell(h) for h in head) + " |",
           "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out


def to_markdown(r: Report) -> str:
    L = r.lang
    out = [f"# {r.title}", "", f"**{r.verdict}**", ""]
    if r.query:
        words, url = plan_link(r)
        out += [f"{words} <{url}>" if url else f"{words} `?{r.query}`", ""]
    out += [f"## {tr('Figures', L)}", ""]
    out += _table([tr("Figure", L), tr("Value", L)], [list(f) for f in r.figures]) + [""]
    head, rows = rank_table(r.estimate, L)   # pipeline stages (report/ranks.py)
    if rows:
        out += [f"## {tr('Memory per rank', L)}", ""] + _table(head, rows) + [""]
    if r.breakdown:
        out += [f"## {tr('Memory at the peak by component', L)}", ""]
        out += _table([tr("Component", L), tr("Size", L), tr("Share", L)],
                      [[b["label"], b["size"], b["share"]] for b in r.breakdown]) + [""]
    out += [f"## {tr('Advice', L)}", ""]
    if r.plans:
        out += [f"### {tr('Plans that fit (cheapest first)', L)}", ""]
        out += _table([tr("#", L), tr("Changes", L), tr("GPUs", L), tr("Memory per GPU", L),
                       tr("Cost", L)],
                      [[i, " + ".join(p["changes"]) or "-", p["gpus"], p["used"], p["cost"]]
                       for i, p in enumerate(r.plans, 1)]) + [""]
    if r.recommendations:
        out += [f"### {tr('Recommendations (most memory saved per cost first)', L)}", ""]
        out += _table([tr("#", L), tr("Change", L), tr("Saves", L), tr("Fits alone", L),
                       tr("Cost", L)],
                      [[i, x["title"], x["saves"], tr("yes", L) if x["fits"] else tr("no", L),
                        x["cost"]] for i, x in enumerate(r.recommendations, 1)]) + [""]
        hows = [(x["title"], x["how"]) for x in r.recommendations if x["how"]]
        if hows:
            out += [f"#### {tr('How to switch each change on', L)}", ""]
            for title, how in hows:
                out.append(f"- **{_cell(title)}**: " +
                           "; ".join(f"{k}: `{_cell(v).replace('`', chr(39))}`"
                                     for k, v in how))
            out.append("")
    if r.growth:
        out += [growth_text(r.growth, L), ""]
    if not (r.plans or r.recommendations or r.growth):
        out += [tr("No advice was asked for or found for this plan.", L), ""]
    if r.assumptions:
        out += [f"## {tr('Assumptions', L)}", ""] + [f"- {_cell(a)}" for a in r.assumptions]
        out.append("")
    out += [f"## {tr('Sources', L)}", ""] + [f"- {_cell(s)}" for s in r.sources] + [""]
    out += [f"## {tr('Scenario', L)}", "", "```json", json.dumps(r.scenario, indent=2,
                                                               ensure_ascii=False), "```", ""]
    return "\n".join(out)
