"""The planner's layout in a real browser at 390, 768, 1024, 1280 and 1920 px: two columns
from 900 px, one below (the verdict first, then the controls, then the other results; never
0 px wide); nothing clipped or
wider than its card (figures, labels, the GPU list, charts); the document itself scrolls
(printing and full-page screenshots see the whole page). Screenshots: test-artifacts/
planner-<width>.png."""
from __future__ import annotations

import os

import pytest

from serving import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

WIDTHS = (1280, 1920, 1024, 768, 390)
T_START, T_STEP = 120_000, 60_000
PLANS = {"llama": "model=meta-llama/Llama-3.1-8B&task=lora&gpu=nvidia-rtx-4090",
         "flux": "model=black-forest-labs/FLUX.1-dev&gpu=nvidia-l4"}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}"),
]

# every element that must show its whole content: (selector, what it is)
WHOLE = (".vp-kpi .vp-v", ".vp-kpi .vp-k", ".vp-field .vp-label", ".vp-verdict-used",
         ".vp-verdict-title", ".vp-section-title", ".vp-plan-title")
MEASURE = """([whole]) => {
  const bad = [];
  const r = e => e.getBoundingClientRect();
  const shown = e => e.offsetParent !== null && r(e).width > 0;
  for (const sel of whole) for (const e of document.querySelectorAll(sel)) {
    if (shown(e) && e.scrollWidth > e.clientWidth + 1)
      bad.push(`${sel} "${e.textContent.trim().slice(0, 40)}" ${e.scrollWidth}>${e.clientWidth}`);
  }
  for (const svg of document.querySelectorAll('.vp-chart svg'))
    if (svg.closest('.vp-chart').offsetParent !== null && r(svg).width < 50)
      bad.push(`a chart ${Math.round(r(svg).width)} px wide`);
  for (const lab of document.querySelectorAll('.vp-field .vp-label, .vp-kpi .vp-v')) {
    const box = lab.closest('.vp-field, .vp-kpi');
    if (shown(lab) && r(lab).right > r(box).right + 1)
      bad.push(`"${lab.textContent.trim().slice(0, 40)}" wider than its box`);
  }
  for (const card of document.querySelectorAll('.vp-section')) {
    if (!shown(card)) continue;
    const c = r(card);
    for (const e of card.querySelectorAll('input, select, textarea, button, svg, table, .vp-kpi')) {
      if (!shown(e) || e.closest('.vp-json, details:not([open])')) continue;
      const b = r(e);
      if (b.right > c.right + 1 || b.left < c.left - 1)
        bad.push(`${e.tagName.toLowerCase()}${e.className && e.className.baseVal === undefined
                  ? '.' + String(e.className).split(' ')[0] : ''} in ` +
                 `${card.className.split(' ').filter(x => x.startsWith('vp-'))[1] || 'card'}: ` +
                 `${Math.round(b.left)}-${Math.round(b.right)} outside ${Math.round(c.left)}-` +
                 `${Math.round(c.right)}`);
    }
  }
  const ctl = r(document.querySelector('.vp-controls'));
  // in one column the results box is display: contents (no box of its own): its verdict
  const box = document.querySelector('.vp-results');
  const res = r(getComputedStyle(box).display === 'contents'
                ? document.querySelector('.vp-estimate-panel') : box);
  const doc = document.scrollingElement;
  return {bad, controls: [ctl.left, ctl.right, ctl.top, ctl.bottom],
          results: [res.left, res.right, res.top, res.bottom, res.width],
          scroll_width: doc.scrollWidth, scroll_height: doc.scrollHeight,
          inner: [innerWidth, innerHeight]};
}"""


SERVER_LOG = "voila-layout.log"   # the server fixture (conftest.py): its log in test-artifacts/


def _settle(page) -> None:
    page.wait_for_timeout(1200)      # charts re-measure their holder after a resize


def _check(page, width: int, name: str) -> dict:
    page.set_viewport_size({"width": width, "height": 900})
    _settle(page)
    m = page.evaluate(MEASURE, [list(WHOLE)])
    page.screenshot(path=str(ARTIFACTS / f"planner-{name}-{width}.png"), full_page=True)
    ctl, res = m["controls"], m["results"]
    assert res[4] >= min(300, width - 60), f"results column {res[4]} px wide at {width}"
    if width < 900:
        assert res[3] <= ctl[2] + 1, "the verdict should come above the controls"
    else:
        assert res[0] >= ctl[1] - 1 and abs(res[2] - ctl[2]) < 2, "two columns side by side"
    assert m["scroll_width"] <= width + 1, f"the page is {m['scroll_width']} px wide at {width}"
    assert not m["bad"], f"clipped or outside its card at {width} px: {m['bad']}"
    return m


def test_layouts(server):
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            for name, plan in PLANS.items():
                page.goto(f"{server}/?{plan}", timeout=T_START, wait_until="domcontentloaded")
                page.locator(".vp-breakdown svg").first.wait_for(state="attached",
                                                                 timeout=T_START)
                page.locator(".vp-explore-chart svg").first.wait_for(state="attached",
                                                                     timeout=T_START)
                page.locator(".vp-advisor .vp-hint").first.wait_for(timeout=T_STEP)
                for width in (WIDTHS if name == "llama" else (1024, 390)):
                    m = _check(page, width, name)
                # the document scrolls (not an inner panel): a full-page capture is whole
                assert m["scroll_height"] > m["inner"][1] + 400
                page.evaluate("window.scrollTo(0, 600)")
                assert page.evaluate("window.scrollY") > 0
                page.evaluate("window.scrollTo(0, 0)")
        finally:
            browser.close()
