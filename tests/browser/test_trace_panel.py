"""'Trace this plan' in a real browser: Voila serves the planner as `make app` does, headless
Chromium opens the default page, clicks the button, sees the progress, then the traced peak
beside the estimate, the largest modules and the timeline chart; the live panel says in one
sentence that there is no GPU here. No request leaves the machine; the page's console stays
clean (the documented exceptions of test_planner_page). Screenshot: test-artifacts/trace-panel.png.
"""
from __future__ import annotations

import os

import pytest

from serving import ARTIFACTS, CHROMIUM
from test_planner_page import T_START, Watch, open_plan, wait_text

T_TRACE = 600_000     # ms: torch import + Llama-3.1-8B LoRA, two steps under fake tensors

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM),
                       reason=f"no Chromium at {CHROMIUM} (CI installs the chromium package)"),
]


SERVER_LOG = "voila-trace.log"   # the server fixture (conftest.py): its log in test-artifacts/
SERVER_NEEDS = ("torch",)


def test_trace_this_plan_on_the_default_page(server, browser):
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    watch = Watch(context)
    page = watch.page(context)
    try:
        open_plan(page, server)
        button = page.locator(".vp-trace-button").first
        button.wait_for(timeout=T_START)
        assert button.inner_text().strip() == "Trace this plan" and button.is_enabled()
        wait_text(page, ".vp-live", "No GPU to measure on here", T_START)
        before = page.evaluate("() => document.querySelector('.vp-trace').textContent")
        assert "Traced peak" not in before
        button.scroll_into_view_if_needed()
        button.click()
        # the progress row shows a phase in words and a Cancel that can be pressed
        wait_text(page, ".vp-measure-progress", "Starting", T_START)
        assert page.locator(".vp-trace .vp-measure-cancel").first.is_enabled()
        wait_text(page, ".vp-trace-result", "Traced peak", T_TRACE)
        result = page.evaluate(
            "() => document.querySelector('.vp-trace-result').textContent")
        for needle in ("Estimate", "Trace", "Difference", "Peak allocated",
                       "Largest modules at the traced peak", "model.layers.0-31"):
            assert needle in result, (needle, result)
        assert "%" in result
        wait_text(page, ".vp-trace-chart svg text", "Traced memory over two steps", T_START)
        wait_text(page, ".vp-trace-chart svg text", "estimate:", T_START)
        assert not page.locator(".vp-measure-progress").first.is_visible()
        page.locator(".vp-trace").first.screenshot(path=str(ARTIFACTS / "trace-panel.png"))
        watch.check()
    finally:
        context.close()
