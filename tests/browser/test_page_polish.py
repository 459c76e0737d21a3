"""The page as people use it (issue 19.5), in a real browser:

- an export button saves its file on one click (the browser's own download; before, it showed
  a second link to click);
- the share link is the page's full URL (scheme, host, path, query) and reopens the plan;
- at 390 px the verdict comes before the controls; no text of the first screen's charts, and
  no subtitle or legend of any chart view, runs past its chart;
- the notes card of the Chinese page holds no English note (each note is translated);
- `make lab` opens JupyterLab without its "official Jupyter news?" toast.

Screenshots: test-artifacts/polish-*.png (each chart view at 390 px: polish-390-<lang>-<n>.png).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from serving import ARTIFACTS, CHROMIUM, ROOT, free_port

T_START = 120_000     # ms: kernel start + notebook run on 2 busy CPUs
T_STEP = 60_000
PLAN = "model=meta-llama/Llama-3.1-8B&task=lora&gpu=nvidia-rtx-4090"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}"),
]

SERVER_LOG = "voila-polish.log"   # the server fixture (conftest.py): its log in test-artifacts/

# every <text> (of a kind: `which`) of every chart shown inside its own svg, and every svg
# inside its chart's container (1 px of slack): a clipped subtitle, legend entry or label lies
# partly outside
CLIPPED = """(which) => {
  const bad = [];
  for (const svg of document.querySelectorAll('.vp-app .vp-chart svg')) {
    const s = svg.getBoundingClientRect();
    if (s.width < 50 || svg.closest('.vp-chart').offsetParent === null) continue;
    const c = svg.closest('.vp-chart').getBoundingClientRect();
    if (s.left < c.left - 1 || s.right > c.right + 1)
      bad.push(`a chart at ${Math.round(s.left)}-${Math.round(s.right)} outside its ` +
               `container ${Math.round(c.left)}-${Math.round(c.right)}`);
    for (const t of svg.querySelectorAll(which)) {
      const b = t.getBoundingClientRect();
      if (!t.textContent.trim() || b.width === 0) continue;
      if (b.left < s.left - 1 || b.right > s.right + 1)
        bad.push(`"${t.textContent.trim().slice(0, 50)}" ${Math.round(b.left)}-` +
                 `${Math.round(b.right)} outside ${Math.round(s.left)}-${Math.round(s.right)}`);
    }
    if (s.right > document.documentElement.clientWidth + 1)
      bad.push(`a chart reaching ${Math.round(s.right)} px`);
  }
  return bad;
}"""


@contextmanager
def plan_page(server, browser, query: str = PLAN, width: int = 1280, height: int = 900,
              **options):
    """A page of the plan `query` in a browser context of its own, `width` x `height` px
    (`options`: more of new_context's), once its breakdown and export panel are drawn; the
    context is closed after."""
    ctx = browser.new_context(viewport={"width": width, "height": height}, **options)
    try:
        page = ctx.new_page()
        page.goto(f"{server}/?{query}", timeout=T_START, wait_until="domcontentloaded")
        page.locator(".vp-breakdown .vega-embed svg").first.wait_for(timeout=T_START)
        page.locator(".vp-export .vp-make-csv").first.wait_for(timeout=T_START)
        yield page
    finally:
        ctx.close()


@contextmanager
def phone_page(server, browser, query: str = PLAN):
    """`plan_page` at 390 x 844 px, its first chart view drawn too."""
    with plan_page(server, browser, query, 390, 844) as page:
        page.locator(".vp-explore-chart .vega-embed svg").first.wait_for(timeout=T_START)
        page.wait_for_timeout(1500)
        yield page


def test_an_export_downloads_on_one_click_and_the_share_link_is_a_full_url(server, browser):
    with plan_page(server, browser, accept_downloads=True) as page:
        with page.expect_download(timeout=T_STEP) as got:
            page.locator(".vp-export .vp-make-csv").first.click()
        d = got.value
        assert d.suggested_filename == "vramplan-sweep.csv"
        text = Path(d.path()).read_text(encoding="utf-8")
        assert text.splitlines()[0].startswith("gpu,") or "gpu" in text.splitlines()[0]
        assert "nvidia-rtx-4090" in text
        # the same file as the 'save again' link the panel keeps
        page.locator(".vp-save-csv").first.wait_for(timeout=T_STEP)
        with page.expect_download(timeout=T_STEP) as again:
            page.locator(".vp-save-csv").first.click()
        assert Path(again.value.path()).read_text(encoding="utf-8") == text

        link = page.locator(".vp-share-link").first
        link.wait_for(timeout=T_STEP)
        href = link.get_attribute("href")
        parts = urlsplit(href)
        base = urlsplit(server)
        assert (parts.scheme, parts.netloc) == (base.scheme, base.netloc), href
        assert parts.path == "/" and parts.query, href
        assert link.inner_text().strip() == href
        from vramplan.scenario import Scenario
        assert Scenario.from_query(parts.query) == Scenario.from_query(PLAN)
        page.screenshot(path=str(ARTIFACTS / "polish-export.png"))
        # the link opens the same plan
        page2 = page.context.new_page()
        page2.goto(href, timeout=T_START, wait_until="domcontentloaded")
        page2.locator(".vp-verdict-sub").first.wait_for(timeout=T_START)
        page2.wait_for_function(
            "t => (document.querySelector('.vp-verdict-sub')?.textContent || '') === t",
            arg=page.locator(".vp-verdict-sub").first.text_content(), timeout=T_STEP)
        page2.close()


def test_at_390_px_the_verdict_comes_first_and_no_chart_text_is_clipped(server, browser):
    with phone_page(server, browser) as page:
        top = page.evaluate("s => document.querySelector(s).getBoundingClientRect().top",
                            ".vp-estimate-panel")
        controls = page.evaluate("s => document.querySelector(s).getBoundingClientRect().top",
                                 ".vp-controls")
        assert top < controls, (top, controls)
        page.screenshot(path=str(ARTIFACTS / "polish-390.png"), full_page=True)
        # the first screen's charts (the breakdown and the default view): every text
        bad = {"first": page.evaluate(CLIPPED, "text")}
        # every view, every text: titles, subtitles, legends, axis titles and the marks' labels
        # (the builders give a narrow container lines, one legend column and label room:
        # charts/theme.py when_narrow, room_for_labels; tests/test_charts_narrow.py)
        bad.update(every_view_clipped(page, "en"))
        (ARTIFACTS / "polish-390-clipped.json").write_text(json.dumps(bad, indent=1))
        assert not any(bad.values()), {k: v for k, v in bad.items() if v}


def every_view_clipped(page, lang: str) -> dict[str, list[str]]:
    """Each view of the charts panel shown in turn: its texts outside its chart (and a
    screenshot of it, test-artifacts/polish-390-<lang>-<n>.png)."""
    bad = {}
    views = [b.strip() for b in page.locator(".vp-views button").all_inner_texts()]
    assert len(views) >= 4, views
    for i, label in enumerate(views):
        page.locator(".vp-views button", has_text=label).first.click()
        page.wait_for_timeout(2500)
        bad[label] = page.evaluate(CLIPPED, "text")
        page.locator(".vp-explore-chart").first.screenshot(
            path=str(ARTIFACTS / f"polish-390-{lang}-{i}.png"))
    return bad


def test_at_390_px_no_text_of_any_chinese_chart_is_clipped(server, browser):
    """The Chinese page's titles and labels break between characters and run wider per
    character (a CJK character counts two columns in the theme's wrapping)."""
    with phone_page(server, browser, PLAN + "&lang=zh") as page:
        bad = {"first": page.evaluate(CLIPPED, "text"), **every_view_clipped(page, "zh")}
        (ARTIFACTS / "polish-390-zh-clipped.json").write_text(
            json.dumps(bad, indent=1, ensure_ascii=False))
        assert not any(bad.values()), {k: v for k, v in bad.items() if v}


def test_the_chinese_page_shows_its_notes_in_chinese(server, browser):
    with plan_page(server, browser, PLAN + "&lang=zh") as page:
        notes = page.locator(".vp-notes-card .vp-notes li")
        notes.first.wait_for(timeout=T_START)
        texts = notes.all_inner_texts()
        assert texts and all(re.search(r"[\u4e00-\u9fff]", t) for t in texts), texts
        assert page.locator(".vp-notes-card [lang='en']").count() == 0


def test_make_lab_opens_without_the_news_toast(browser, tmp_path):
    """`make lab`'s command line with a fresh HOME: JupyterLab 4 asks "Would you like to get
    notified about official Jupyter news?" while fetchNews is "none", whatever news_url says;
    the Makefile's settings folder answers "false"."""
    pytest.importorskip("jupyterlab")
    port = free_port()
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
           "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces")}
    log_path = ARTIFACTS / "polish-make-lab.log"
    cmd = ["make", "-s", "lab", f"BIN={Path(sys.executable).parent}", f"LAB_PORT={port}",
           "-o", ".venv/.installed-lab", "-o", ".venv/.installed"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        printed = re.compile(rf"http://127\.0\.0\.1:{port}/lab\S*\?token=\w+")
        deadline = time.monotonic() + 120
        while not printed.search(log_path.read_text()) and time.monotonic() < deadline:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            time.sleep(0.5)
        url = printed.search(log_path.read_text()).group(0)
        page = browser.new_page()
        try:
            page.goto(url, timeout=T_START)
            page.locator(".jp-LabShell").first.wait_for(timeout=T_START)
            page.locator(".jp-NotebookPanel").first.wait_for(timeout=T_START)
            page.wait_for_timeout(6000)        # the announcements plugin runs once restored
            toasts = page.locator(".Toastify__toast").all_inner_texts()
            page.screenshot(path=str(ARTIFACTS / "polish-make-lab.png"))
        finally:
            page.close()
        assert not [t for t in toasts if "news" in t.lower()], toasts
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
