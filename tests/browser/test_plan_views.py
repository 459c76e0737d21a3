"""The multi-GPU plan views in a real browser (issue 20, "Done when": the page shows the
GPUs-needed and per-rank views): Llama-3.1-70B pre-training on 64 H100s as data 2 x tensor 8 x
pipeline 4 (tests/test_ranks_view.py's plan) opened from a link. The verdict names the rank
that decides it, the per-rank table has its three kinds of stage, the GPUs-needed view draws
the solver's front, and a click on a point of the front applies that layout (the verdict's
plan line and the address follow); the GPU comparison's table lists every GPU. Screenshots:
docs/img/plan-views.png and plan-views-front.png (the README's), test-artifacts/plan-views-*.png."""
from __future__ import annotations

import os
import re

import pytest

from serving import ARTIFACTS, CHROMIUM, ROOT

T_START, T_STEP = 120_000, 60_000
PLAN = ("model=meta-llama/Llama-3.1-70B&task=train&gpu=nvidia-h100-sxm5-80gb&seq_len=8192"
        "&precision=bf16-mixed&gradient_accumulation=8&checkpointing=selective"
        "&parallel.gpus=64&parallel.data=2&parallel.tensor=8&parallel.pipeline=4"
        "&parallel.zero=1&options=sequence-parallel")
SERVER_LOG = "voila-plan-views.log"   # the server fixture (conftest.py)
IMG = ROOT / "docs" / "img"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}"),
]


def _shot(page, first: str, last: str, path) -> None:
    """A screenshot of the page from the top of `first`'s card to the bottom of `last`'s."""
    box = page.evaluate("""([a, b]) => {
      const r = s => { const e = document.querySelector(s);
                       return (e.closest('.vp-section') || e).getBoundingClientRect(); };
      const top = r(a).top + scrollY, bottom = r(b).bottom + scrollY, res = r('.vp-results');
      return {x: res.left - 8, y: top - 8, width: res.width + 16, height: bottom - top + 16};
    }""", [first, last])
    page.screenshot(path=str(path), clip=box, full_page=True)


def test_gpus_needed_and_per_rank_views_show_and_a_front_point_applies(server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"{server}/?{PLAN}", timeout=T_START, wait_until="domcontentloaded")
        page.locator(".vp-breakdown svg").first.wait_for(state="attached", timeout=T_START)
        verdict = page.locator(".vp-verdict")
        assert "decided by stage 0, the rank with the most memory" in verdict.inner_text()
        # the per-rank view: one row per kind of stage, the deciding one named
        ranks = page.locator("table.vp-ranks")
        ranks.wait_for(timeout=T_STEP)
        stages = ranks.locator("tbody tr")
        assert stages.count() == 3
        assert [stages.nth(i).locator("td").first.inner_text() for i in range(3)] == [
            "stage 0", "stage 1 (stages 1-2)", "stage 3"]
        assert ranks.locator(".vp-rank-limit").count() == 3      # the limit line per bar
        # the GPUs-needed view: the front as points and as rows with their layouts
        points = page.locator(".vp-cluster-chart .mark-symbol path")
        points.first.wait_for(timeout=T_STEP)
        n = points.count()
        rows = page.locator(".vp-cluster .vp-change-row")
        assert n >= 3 and rows.count() == n
        titles = [rows.nth(i).locator("b").inner_text() for i in range(n)]
        gpus = [int(re.match(r"(\d+) x GPU", t).group(1)) for t in titles]
        assert gpus == sorted(gpus) and len(set(gpus)) == n
        page.locator(".vp-advisor .vp-hint").first.wait_for(timeout=T_STEP)
        page.wait_for_timeout(800)
        IMG.mkdir(parents=True, exist_ok=True)
        _shot(page, ".vp-estimate-card", ".vp-ranks", IMG / "plan-views.png")
        _shot(page, ".vp-cluster", ".vp-cluster", IMG / "plan-views-front.png")
        # a click on the second point applies that layout through the page's state
        want = re.match(r"(\d+) x GPU: TP (\d+), PP (\d+), CP (\d+), DP (\d+)", titles[1])
        g, tp, pp = want.group(1), want.group(2), want.group(3)
        points.nth(1).click()
        sub = page.locator(".vp-verdict-sub")
        sub.filter(has_text=f"{g} GPUs").wait_for(timeout=T_STEP)
        assert f"tp {tp}, pp {pp}" in sub.inner_text()
        page.locator(".vp-notices", has_text="Applied").first.wait_for(timeout=T_STEP)
        page.wait_for_function(f"location.search.includes('parallel.gpus={g}')",
                               timeout=T_STEP)
        page.screenshot(path=str(ARTIFACTS / "plan-views-applied.png"), full_page=True)
        # the GPU comparison: every GPU of the database in its table (no filter set), not
        # only the chart's best 24
        from vramplan.hardware import default_db
        page.locator(".vp-views button", has_text="GPUs compared").click()
        table = page.locator("table.vp-gpu-table")
        table.wait_for(timeout=T_STEP)
        assert table.locator("tbody tr").count() == len(default_db().devices)
        _shot(page, ".vp-explore", ".vp-explore", ARTIFACTS / "plan-views-compare.png")
    finally:
        page.close()
