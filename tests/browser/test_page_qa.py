"""What walking the planner as a planner showed only a browser can: the per-rank table of a
pipeline plan on a phone (390 px) and a tablet (768 px). Its eight columns were cut at the
card's edge on a phone (the figures, the bars with their limit line and the note below out of
sight); now the table scrolls sideways in its own box inside the card, and at 768 px it fits.
Screenshot: test-artifacts/page-qa-ranks-390.png."""
from __future__ import annotations

import os

import pytest

from serving import ARTIFACTS, CHROMIUM

PLAN = ("model=meta-llama/Llama-3.1-70B&task=train&gpu=nvidia-h100-sxm5-80gb&seq_len=8192"
        "&parallel.gpus=64&parallel.data=2&parallel.tensor=8&parallel.pipeline=4"
        "&parallel.zero=1&options=sequence-parallel")
T_START, T_STEP = 120_000, 60_000
SERVER_LOG = "voila-page-qa.log"   # the server fixture (conftest.py)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}"),
]

BOXES = """() => {
  const r = e => e.getBoundingClientRect();
  const table = document.querySelector('table.vp-ranks');
  const card = r(table.closest('.vp-section')), box = table.closest('.vp-ranks-scroll');
  const notes = [...table.closest('.widget-html-content').querySelectorAll('.vp-hint')];
  return {card: [card.left, card.right], box: [r(box).left, r(box).right],
          table: [r(table).left, r(table).right],
          scrolls: box.scrollWidth > box.clientWidth + 1,
          notes: notes.map(n => [r(n).left, r(n).right, n.scrollWidth <= n.clientWidth + 1])};
}"""


def test_the_rank_table_stays_in_its_card_on_a_phone_and_a_tablet(server, browser):
    page = browser.new_page(viewport={"width": 390, "height": 900})
    try:
        page.goto(f"{server}/?{PLAN}", timeout=T_START, wait_until="domcontentloaded")
        page.locator("table.vp-ranks").wait_for(timeout=T_START)
        page.wait_for_timeout(1500)
        m = page.evaluate(BOXES)
        left, right = m["card"]
        assert left - 1 <= m["box"][0] and m["box"][1] <= right + 1, m     # the box: in
        assert m["table"][1] > right and m["scrolls"], m     # the table: wider, scrolled
        assert m["notes"] and all(a >= left - 1 and b <= right + 1 and whole
                                  for a, b, whole in m["notes"]), m
        page.locator("table.vp-ranks").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "page-qa-ranks-390.png"), full_page=False)
        page.set_viewport_size({"width": 768, "height": 900})
        page.wait_for_timeout(1500)
        m = page.evaluate(BOXES)
        assert m["table"][1] <= m["card"][1] + 1 and not m["scrolls"], m
    finally:
        page.close()
