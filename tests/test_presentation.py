"""One presentation: one display name per component and per phase (vocab), one size formatter
(units.format_size / format_gib: GiB with two decimals, per-locale numbers), GiB for memory
and GB/s for bandwidth in the charts, the page and the report alike."""
from __future__ import annotations

import pytest

from vramplan import vocab
from vramplan.units import GiB, MiB, format_gbs, format_gib, format_size

pytest.importorskip("altair")

from vramplan.charts.breakdown import breakdown_rows  # noqa: E402
from vramplan.charts.phases import phase_rows  # noqa: E402
from vramplan.report import content  # noqa: E402
from vramplan.report import text as report_text  # noqa: E402


def test_one_size_formatter_by_hand():
    # 74.53 GiB: 80_026_000_000 / 2**30 = 74.530...; 3 MiB below 1 GiB; 0 is GiB
    assert format_size(80_026_000_000) == "74.53 GiB"
    assert format_size(3 * MiB) == "3.0 MiB" and format_size(0) == "0.00 GiB"
    assert format_gib(1234.5 * GiB) == "1,234.50 GiB" and format_size(None) == "–"
    assert format_gbs(3350) == "3,350.0 GB/s"


def test_page_report_and_charts_print_a_size_alike():
    """Before: the page said '74.5 GiB', the report '74.53 GiB', the chart legend '74.5 GiB'."""
    from vramplan.ui.state import text as ui_text
    n = 80_026_000_000
    rows = breakdown_rows({"weights": n})
    assert ui_text.size(n) == ui_text.gib(n) == report_text.size(n) == rows[0]["size"] \
        == "74.53 GiB"
    assert report_text.size(None) == "-" and report_text.gbs(2039.0) == "2,039.0 GB/s"


def test_page_details_give_memory_in_gib_not_gb():
    """Before: the page's bandwidth details printed bytes moved per step as '87.5 GB'."""
    pytest.importorskip("ipywidgets")
    from vramplan.ui.widgets.details import fmt
    assert fmt("bytes_per_step", 87.53e9) == "81.52 GiB"          # 87.53e9 / 2**30
    assert fmt("bytes_per_s", 1.5e12) == "1,500.0 GB/s"


def test_one_name_per_component_and_phase():
    """Before: the Phases chart called 'workspace' 'Workspace', the breakdown 'Workspaces';
    the page and the report printed the raw key 'optimizer-step'."""
    comps = {"weights": GiB, "workspace": GiB}
    bar = {r["component"]: r["label"] for r in breakdown_rows(comps)}
    ph = {r["component"]: r["component_label"] for r in phase_rows({"optimizer-step": comps})}
    assert bar == ph == {"weights": "Weights", "workspace": "Workspaces"}
    assert {r["phase_label"] for r in phase_rows({"optimizer-step": comps})} == \
        {"Optimizer step"} == {vocab.phase_label("optimizer-step")}
    est = {"peak_phase": "optimizer-step", "fits": True, "per_gpu": {"device_used_bytes": GiB}}
    figs = dict(content.figures(est, {}, "en"))
    assert figs["Peak phase"] == "Optimizer step"
    assert dict(content.figures(est, {}, "zh"))["峰值所在阶段"] == "优化器步"
    # every phase the footprints and the tracer name has its own display name
    for key in ("forward", "backward", "backward-end", "optimizer-step", "prefill", "decode",
                "denoise", "vae-decode", "serve", "frame", "compute"):
        assert key in vocab.PHASE_LABELS


def test_growth_is_one_sentence_for_page_and_report():
    """Before: the page said 'batch up to 12', the report 'batch size up to 12'; the page
    skipped a resolution equal to today's, the report (tuple vs list) did not."""
    pytest.importorskip("ipywidgets")
    from vramplan.report.words import growth_sentence
    from vramplan.ui.widgets.advisor import growth_text

    class Sc:      # the page hands the Scenario; the report its dict
        def to_dict(self):
            return {"batch_size": 4, "resolution": (512, 512)}
    growth = {"batch_size": 12, "seq_len": 2984, "resolution": [512, 512]}
    page = growth_text(growth, Sc())
    report = content.assemble({"scenario": Sc().to_dict(), "fits": True}, {},
                              advice={"growth": growth}).growth
    assert page == growth_sentence(growth, Sc().to_dict()) == \
        "Room to grow on this GPU: batch size up to 12, sequence length up to 2,984."
    assert report == ["batch size up to 12", "sequence length up to 2,984"]


def test_charts_write_sizes_with_the_one_formatter():
    """Before: the usable-memory lines said '24.0 GiB usable' (one decimal) where the page and
    the report said '24.00 GiB'."""
    from vramplan.charts import theme
    from vramplan.charts.breakdown_svg import breakdown_svg
    usable = 24 * GiB
    assert f"4090: {format_gib(usable)} usable" in breakdown_svg({"weights": GiB}, usable,
                                                                  gpu_name="4090")
    assert theme.gib_number(usable) + " GiB" == format_gib(usable) == "24.00 GiB"
    assert theme.GIB_FORMAT == ",.2f"


def test_the_verdict_is_worded_once_for_page_report_and_cli(capsys):
    """Before: ui/verdict.py and report/content.py each built 'Fits on {gpu}' and its figures
    (the page with its own GiB formatting); the CLI printed 'fits: yes' only. Now the page's
    title and detail, the report's sentence and the CLI's second line are report.words.verdict."""
    pytest.importorskip("ipywidgets")
    from vramplan.cli import main
    from vramplan.estimate import estimate
    from vramplan.report.words import verdict
    from vramplan.ui.widgets.verdict import verdict_html
    e = estimate({"model": "gpt2", "task": "train", "gpu": "nvidia-rtx-4090"}).to_dict()
    usable = e["gpu"]["usable_memory_bytes"]
    v = verdict(e, usable)
    used = e["per_gpu"]["device_used_bytes"]
    assert v["sentence"] == (f"Fits on NVIDIA GeForce RTX 4090: {format_size(used)} of "
                             f"{format_size(usable)} usable, {format_size(usable - used)} "
                             "to spare")
    page = verdict_html(e, usable)
    assert v["title"] in page and v["detail"] in page
    assert content.verdict(e, {}, "en") == (True, v["sentence"])
    assert main(["estimate", "--model", "gpt2", "--task", "train", "--gpu",
                 "nvidia-rtx-4090"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == v["sentence"]
    zh = verdict(e, usable, "zh")
    assert (zh["title"], zh["detail"]) == ("NVIDIA GeForce RTX 4090 上装得下",
                                           f"余量 {format_size(usable - used)}")
