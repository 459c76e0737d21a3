"""The planner in Chinese in a real browser: `?lang=zh` opens the page in Chinese and keeps
`lang=zh` in the address; the header's EN / 中文 switch turns it back to English (and drops
`lang` from the address) with the plan unchanged. Screenshots: test-artifacts/planner-zh.png
and planner-zh-then-en.png (with VRAMPLAN_UPDATE_README_SHOT=1 also docs/img/planner-zh.png,
the README's Chinese picture: the same plan as docs/img/planner.png)."""
from __future__ import annotations

import os
import re
from urllib.parse import parse_qs, urlparse

import pytest

from serving import ARTIFACTS, CHROMIUM, LOCAL_HOSTS, ROOT

T_START = 120_000     # ms: server up + kernel start + notebook run on 2 busy CPUs
T_STEP = 60_000       # ms: one round trip (a click -> kernel -> the page built again)
CJK = re.compile(r"[\u4e00-\u9fff]")
README_SHOT = ROOT / "docs" / "img" / "planner-zh.png"
PLAN = ("model=meta-llama/Llama-3.1-8B&task=lora&gpu=nvidia-rtx-4090&checkpointing=full"
        "&lora.rank=16")          # the README's plan (test_planner_page.README_PLAN)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM),
                       reason=f"no Chromium at {CHROMIUM} (CI installs the chromium package)"),
]


SERVER_LOG = "voila-i18n.log"   # the server fixture (conftest.py): its log in test-artifacts/


def wait_text(page, selector: str, needle: str, timeout: int = T_STEP) -> None:
    page.wait_for_function(
        "([sel, t]) => [...document.querySelectorAll(sel)].some(e => (e.textContent || '')"
        ".includes(t))", arg=[selector, needle], timeout=timeout)


def query(page) -> dict:
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_lang_zh_opens_the_page_in_chinese_and_the_switch_goes_back(server, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    outside: list[str] = []
    context.route(lambda url: (urlparse(url).hostname or "") not in LOCAL_HOSTS
                  and url.startswith(("http://", "https://")),
                  lambda route: (outside.append(route.request.url), route.abort()))
    page = context.new_page()
    try:
        page.goto(f"{server}/?{PLAN}&lang=zh", timeout=T_START,
                  wait_until="domcontentloaded")
        page.locator(".vp-verdict-title").first.wait_for(state="attached", timeout=T_START)
        wait_text(page, ".vp-section-title", "工作负载", T_START)
        title = page.locator(".vp-verdict-title").first.inner_text()
        assert "装" in title and "fit" not in title.lower()          # 装得下 / 装不下
        assert "RTX 4090" in title
        body = page.locator(".vp-app").first.inner_text()
        assert len(CJK.findall(body)) > 300
        for english in ("Workload", "How it runs", "Peak allocated", "Undo", "The GPU"):
            assert english not in body, english
        assert "Llama-3.1-8B" in page.locator(".vp-verdict-sub").first.inner_text()
        wait_text(page, ".vp-lang button", "中文")
        page.wait_for_function("() => new URLSearchParams(location.search).get('lang') === "
                               "'zh'", timeout=T_STEP)
        assert query(page)["model"] == "meta-llama/Llama-3.1-8B"
        page.locator(".vp-breakdown svg").first.wait_for(state="attached", timeout=T_STEP)
        page.screenshot(path=str(ARTIFACTS / "planner-zh.png"), full_page=True)
        if os.environ.get("VRAMPLAN_UPDATE_README_SHOT"):   # refresh the README picture
            README_SHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(README_SHOT))

        page.locator(".vp-lang button", has_text="EN").first.click()
        wait_text(page, ".vp-section-title", "Workload")
        page.locator(".vp-verdict-title").first.wait_for(state="attached", timeout=T_STEP)
        title = page.locator(".vp-verdict-title").first.inner_text()
        assert re.search(r"\bfits? on\b", title.lower()) and not CJK.search(title)
        page.wait_for_function("() => !new URLSearchParams(location.search).has('lang')",
                               timeout=T_STEP)
        assert query(page)["model"] == "meta-llama/Llama-3.1-8B" and query(page)["task"] == "lora"
        assert query(page)["lora.rank"] == "16"
        page.screenshot(path=str(ARTIFACTS / "planner-zh-then-en.png"), full_page=True)
    finally:
        context.close()
    assert not outside, f"requests outside the server: {outside}"
