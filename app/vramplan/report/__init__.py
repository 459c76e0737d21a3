"""Reports of a plan: Markdown, and one self-contained HTML file (inline CSS, the charts as
SVG rendered by vl-convert from the `vramplan.charts` specs, no request to anywhere), with the
figures (verdict, peak, usable memory, breakdown by component, max batch, bandwidth and time
floors), the assumptions, the advice (recommendations with what each saves and costs, plans
that fit) and the sources; and the plan's sweep over GPUs and batch sizes as CSV.

    from vramplan.report import build, to_markdown, to_html, report, sweep_csv
    r = build({"model": "gpt2", "task": "train", "batch_size": 8, "gpu": "nvidia-rtx-4090"})
    to_markdown(r); to_html(r)                  # text of one file each
    report(plan, fmt="html", lang="zh")         # the same in one call

`content.assemble(estimate_dict, device_dict, advice=...)` makes a Report from what the
planner already holds (no second estimate). Words go through `vramplan.i18n` (the Chinese in
`locale/zh/report.toml`); the charts inside the SVGs keep the builders' English.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import VramplanError

if TYPE_CHECKING:
    from .content import Report

# names of the submodules, imported on first use (PEP 562): the page's verdict reads
# report.ranks alone, and importing report must not bring content's chart modules with it
_LAZY = {"Report": "content", "assemble": "content", "to_html": "html",
         "to_markdown": "markdown", "COLUMNS": "sweep_table", "batch_sizes": "sweep_table",
         "sweep_csv": "sweep_table", "sweep_rows": "sweep_table", "normalise_lang": "text"}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Report", "assemble", "build", "model_source", "report", "to_markdown", "to_html", "sweep_csv",
           "sweep_rows", "batch_sizes", "COLUMNS", "FORMATS"]

FORMATS = ("md", "html")


def build(scenario, gpu: str | None = None, *, lang: str = "en", advice: bool = True,
          headroom=None) -> Report:
    """Estimate `scenario` (a Scenario or dict) on `gpu` (default its own), ask the advisor
    (unless `advice=False`) and assemble the Report."""
    from ..advisor import advise
    from ..estimate import estimate
    from ..hardware import get_gpu
    from ..scenario import Scenario
    from .content import assemble
    from .text import normalise_lang
    lang = normalise_lang(lang)
    sc = scenario if isinstance(scenario, Scenario) else Scenario.from_dict(scenario)
    if gpu:
        sc = sc.replace(gpu=get_gpu(gpu).id)
    if not sc.gpu:
        raise VramplanError("no GPU given: the scenario has no \"gpu\"; add one or pass "
                            "--gpu ID (see `vramplan gpus`)")
    dev = get_gpu(sc.gpu)
    est = estimate(sc, dev)
    adv = advise(sc, headroom=headroom, gpu_table_too=False) if advice else None
    return assemble(est.to_dict(), dev.to_dict(), advice=adv, lang=lang,
                    query=sc.to_query(), model_source=model_source(sc))


def model_source(scenario) -> str | None:
    """Where the catalogue's entry for the scenario's model comes from (None: no model, or
    an architecture given inline)."""
    from ..catalog import get_model
    name = getattr(scenario, "model", None)
    if not name:
        return None
    try:
        return get_model(name).source or None
    except VramplanError:
        return None


def report(scenario, gpu: str | None = None, *, fmt: str = "md", lang: str = "en",
           advice: bool = True) -> str:
    """The text of a report file in `fmt` ('md' or 'html')."""
    if fmt not in FORMATS:
        raise VramplanError(f"report format '{fmt}': use one of {', '.join(FORMATS)}")
    from .html import to_html
    from .markdown import to_markdown
    r = build(scenario, gpu, lang=lang, advice=advice)
    return to_markdown(r) if fmt == "md" else to_html(r)
