"""`vramplan report`: a report of one plan, Markdown or one self-contained HTML file.

    vramplan report --scenario plan.json --format md
    vramplan report --scenario plan.json --gpu nvidia-h100-sxm5-80gb --format html -o plan.html
    vramplan report --scenario plan.json --format md --lang zh

The figures (verdict, peak, usable memory, breakdown by component, max batch, bandwidth and
time floors), the assumptions, the advice (recommendations with what each saves and costs,
plans that fit) and the sources; the HTML carries the charts as SVG and makes no request.
Bad input: one line `vramplan: error: ...`, exit 2.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import VramplanError
from ._output import add_format_arg, emit
from ._plan import add_scenario_flags, plan_of


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "report", help="a report of one plan (Markdown or self-contained HTML)",
        description="Estimate one scenario, ask the advisor and write a report: the figures, "
                    "the breakdown by component, the assumptions, the advice and the sources "
                    "(HTML: one file with the charts as SVG, no outside request).")
    add_scenario_flags(p)   # --scenario FILE or the plan as flags (--gpu: the GPU, default
    #                          the scenario's), as estimate takes it
    add_format_arg(p, ("md", "html"), "md")
    p.add_argument("--lang", choices=["en", "zh"], default="en",
                   help="the report's language: en (default) or zh (Simplified Chinese)")
    p.add_argument("--no-advice", action="store_true",
                   help="skip the advisor (figures, assumptions and sources only)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the report to FILE (default: standard output)")
    p.set_defaults(func=run)


def run(a) -> int:
    from ..report import report
    sc = plan_of(a, "report")
    text = report(sc, None, fmt=a.format, lang=a.lang, advice=not a.no_advice)
    if not a.output:
        emit(text)
        return 0
    out = Path(a.output)
    if out.is_dir():
        raise VramplanError(f"-o {a.output}: is a directory; give a file name")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise VramplanError(f"-o {a.output}: cannot write ({exc.strerror or exc})") from None
    return 0
