"""The page's downloads driven as widgets (no browser): each button builds its file for the
plan on screen and shows a data: link holding exactly that file; a new plan clears it."""
from __future__ import annotations

import base64
import csv
import io
import re

import pytest

pytest.importorskip("ipywidgets")

from vramplan.estimate import estimate  # noqa: E402
from vramplan.report import sweep_csv  # noqa: E402
from vramplan.ui.widgets.export import ExportPanel, file_url  # noqa: E402
from vramplan.ui.state.i18n import speaking  # noqa: E402
from vramplan.ui.state.state import PlanState  # noqa: E402
from vramplan.units import GiB  # noqa: E402

PLAN = {"model": "gpt2", "task": "train", "batch_size": 8, "seq_len": 1024,
        "gpu": "nvidia-rtx-4090"}


def saved(panel: ExportPanel) -> tuple[str, str]:
    """(file name, text) of the link the panel shows."""
    m = re.search(r"download='([^']+)' href='data:[^;]+;charset=utf-8;base64,([^']+)'",
                  panel.links.value)
    assert m, panel.links.value
    return m.group(1), base64.b64decode(m.group(2)).decode("utf-8")


@pytest.fixture
def panel():
    st = PlanState(gpu="nvidia-rtx-4090")
    st.apply(PLAN)
    p = ExportPanel(st, background=False)
    p.render()
    return p


def test_buttons_and_nothing_made_before_a_click(panel):
    assert [b.description for b in panel.buttons.values()] == [
        "Download sweep CSV", "Download report (Markdown)", "Download report (HTML)"]
    assert panel.links.value == ""              # the first paint makes no file


def test_sweep_csv_is_the_plans_sweep(panel):
    panel.buttons["csv"].click()
    name, text = saved(panel)
    assert name == "vramplan-sweep.csv"
    assert text == sweep_csv(panel.state.scenario)
    rows = list(csv.DictReader(io.StringIO(text)))
    row = next(r for r in rows if r["gpu"] == "nvidia-rtx-4090" and r["batch_size"] == "8")
    e = estimate(PLAN)
    assert int(row["device_used_bytes"]) == e.device_used_bytes
    assert int(row["max_batch_size"]) == e.max_batch_size


def test_markdown_report_and_a_new_plan_clears_it(panel):
    panel.buttons["md"].click()
    name, text = saved(panel)
    used = estimate(PLAN).device_used_bytes / GiB
    assert name == "vramplan-report.md"
    assert f"| Peak device memory per GPU (what nvidia-smi shows) | {used:,.2f} GiB |" in text
    assert "### Recommendations" in text
    assert "?" + panel.state.query in text
    panel.state.set("batch_size", 16)
    panel.render()
    assert panel.links.value == ""              # the file was for the plan before


def test_html_report(panel):
    pytest.importorskip("vl_convert")
    panel.buttons["html"].click()
    name, text = saved(panel)
    assert name == "vramplan-report.html" and "<svg" in text
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(https?:)?//""", text)


def test_chinese_page_speaks_chinese():
    with speaking("zh"):
        st = PlanState(gpu="nvidia-rtx-4090", lang="zh")
        st.apply(PLAN)
        p = ExportPanel(st, background=False)
        p.render()
    assert p.buttons["md"].description == "下载报告（MD 格式）"
    p.buttons["md"].click()
    assert "保存 vramplan-report.md" in p.links.value
    assert saved(p)[1].startswith("# 显存规划：gpt2（训练）")


def test_file_url_round_trips():
    text = "a,b\n1,é\n"
    url = file_url(text, "text/csv")
    assert url.startswith("data:text/csv;charset=utf-8;base64,")
    assert base64.b64decode(url.split(",", 1)[1]).decode("utf-8") == text


def test_one_click_hands_the_file_to_the_browser_and_the_link_is_the_state_query(panel):
    """The button's click sends the file to the Download widget (its script saves it in the
    browser, tests/browser/test_page_polish.py); each save is a new message (n counts), so
    the same file twice is two downloads. The share widget gets the plan's query; the browser
    adds scheme, host and path."""
    assert panel.download.file == {}                 # nothing before a click
    panel.buttons["csv"].click()
    f = panel.download.file
    assert (f["name"], f["mime"], f["n"]) == ("vramplan-sweep.csv", "text/csv;charset=utf-8", 1)
    assert base64.b64decode(f["b64"]).decode("utf-8") == saved(panel)[1]
    panel.buttons["csv"].click()
    assert panel.download.file["n"] == 2
    assert panel.share.query == panel.state.query and panel.share.query.startswith("model=gpt2")
    assert "vp-share-link" not in panel.value        # the link is the widget's, not a ?query
