"""Per-rank figures everywhere (issue 20.2): the estimate's `ranks` section (each distinct
pipeline stage) printed by `vramplan estimate`, in the Markdown and HTML reports, on the page
(ui/ranks_view.py, no browser), and the verdict naming the rank that decides it.

The plan: Llama-3.1-70B, 64 H100s as data 2 x tensor 8 x pipeline 4, ZeRO-1, selective
checkpointing with sequence parallelism, 8 micro-batches. 1F1B: stage i holds
min(4 - i, 8) micro-batches in flight: 4 on stage 0, 3 on stage 1 (the middle stages 1-2),
1 on stage 3; stage 0 also holds the embedding, stage 3 the head, logits and loss.
"""
from __future__ import annotations

import re

import pytest

from vramplan.estimate import estimate
from vramplan.report import ranks as R

PLAN = {"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 1, "seq_len": 8192,
        "precision": "bf16-mixed", "gpu": "nvidia-h100-sxm5-80gb", "checkpointing": "selective",
        "gradient_accumulation": 8, "options": ["sequence-parallel"],
        "parallel": {"gpus": 64, "data": 2, "tensor": 8, "pipeline": 4, "zero": 1}}


@pytest.fixture(scope="module")
def est():
    return estimate(PLAN).to_dict()


def test_each_rank_has_reserved_and_fits_and_the_worst_is_per_gpu(est):
    ranks = est["ranks"]
    assert [r["rank"] for r in ranks] == ["stage 0", "stage 1 (stages 1-2)", "stage 3"]
    for r in ranks:
        assert r["peak_reserved_bytes"] >= r["peak_allocated_bytes"]
        assert r["fits"] == (r["device_used_bytes"] <= R.limit_of(est))   # the memory limit
    worst = max(ranks, key=lambda r: r["device_used_bytes"])
    assert worst["device_used_bytes"] == est["per_gpu"]["device_used_bytes"]


def test_rows_say_role_and_micro_batches_in_flight(est):
    rows = R.rank_rows(est)
    assert [(r["role"], r["in_flight"]) for r in rows] == [("first", 4), ("middle", 3),
                                                           ("last", 1)]
    assert R.deciding_rank(est) == "stage 0"     # 4 micro-batches of 20 blocks + embedding


def test_no_rank_decides_without_pipeline():
    e = estimate(dict(PLAN, parallel={"gpus": 64, "data": 8, "tensor": 8, "zero": 1})).to_dict()
    assert R.rank_rows(e) == [] and R.deciding_rank(e) is None and R.text_lines(e) == []


def test_cli_text_prints_the_rank_table_and_the_deciding_rank(est):
    from vramplan.commands.estimate import render_table
    text = render_table(est)
    assert "per rank (pipeline stages" in text
    lines = [line for line in text.splitlines() if line.strip().startswith("stage ")]
    assert len(lines) == 3
    gib = est["ranks"][0]["device_used_bytes"] / 2**30
    assert f"{gib:.2f} GiB" in lines[0] and "embedding + blocks" in lines[0]
    assert re.search(r"blocks \+ head, logits and loss\s+1\s", lines[2])
    assert "verdict (fits) decided by stage 0, the rank with the most memory" in text


def test_report_markdown_and_html_show_ranks_and_the_verdict_names_the_rank(est):
    from vramplan.hardware import get_gpu
    from vramplan.report import assemble, to_html, to_markdown
    rep = assemble(est, get_gpu(PLAN["gpu"]).to_dict())
    assert "decided by stage 0" in rep.verdict
    md = to_markdown(rep)
    assert "## Memory per rank" in md
    assert md.count("| stage ") == 3
    page = to_html(rep, svgs=[])
    assert "Memory per rank" in page and page.count("<td>stage ") == 3
    zh = to_markdown(assemble(est, get_gpu(PLAN["gpu"]).to_dict(), lang="zh"))
    assert "每个 rank 的显存" in zh and "由 stage 0 决定" in zh


def test_the_page_shows_the_ranks_view_for_a_pipeline_plan_only(new_app):
    pytest.importorskip("ipywidgets")
    from vramplan.ui.widgets.ranks_view import RanksView
    app = new_app(lazy_chart=False, charts=False)     # the later panels built at once
    assert isinstance(app.ranks, RanksView) and app.ranks in app.results.children
    app.state.apply(PLAN)
    body = app.ranks.body.value
    assert app.ranks.layout.display != "none"
    assert body.count("<tr><td>stage ") == 3
    assert "decided by stage 0" in body
    # the limit line sits at limit / max(limit, most used) of the 120 px track
    assert "vp-rank-limit" in body
    app.set_lang("zh")
    assert "由 stage 0 决定" in app.ranks.body.value and "嵌入层 + 模块" in app.ranks.body.value
    app.set_lang("en")
    app.state.apply(dict(PLAN, parallel={"gpus": 64, "data": 8, "tensor": 8, "zero": 1}))
    assert app.ranks.layout.display == "none" and app.ranks.body.value == ""


def test_the_bar_is_to_scale_by_hand():
    from vramplan.ui.widgets.ranks_view import _bar
    # 60 GiB used against an 80 GiB limit on an 80 GiB track: 90 px bar, line at 120 px
    b = _bar(60 * 2**30, 80 * 2**30, 80 * 2**30, True)
    from vramplan.charts import theme            # the charts' fit / no-fit colours
    assert "width:90px" in b and "left:120px" in b and theme.FIT_COLOR in b
    assert theme.NO_FIT_COLOR in _bar(90, 80, 90, False)
