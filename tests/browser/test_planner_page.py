"""The planner page in a real browser: Voila serves it exactly as `make app` does (via
serving.app_server), headless Chromium opens it.

- the page loads clean: no console warning or error but the documented ones;
- every chart view renders for a plan of each family, and changing a control changes the
  verdict and the charts;
- a GPU too small: an advisor plan applies with one click and undo brings the plan back;
- a bad value is explained next to its field; a config.json upload becomes the model;
- a shared link reopens the same plan (and is the README picture); a link with one bad value
  keeps the rest and the address; an unknown GPU in a link offers GPUs to pick;
- no request leaves the machine.

Screenshots go to test-artifacts/ (with VRAMPLAN_UPDATE_README_SHOT=1 also docs/img/planner.png).
The layouts (390 to 1920 px) are in test_planner_layout.py.
"""
from __future__ import annotations

import json
import os
import re
import time
from urllib.parse import urlparse

import pytest

from serving import ARTIFACTS, CHROMIUM, LOCAL_HOSTS, ROOT
from vramplan.ui.widgets.fields import CHOICE_LABELS

README_SHOT = ROOT / "docs" / "img" / "planner.png"
T_START = 120_000     # ms: server up + kernel start + notebook run on 2 busy CPUs
T_STEP = 60_000       # ms: one interaction round trip (kernel -> widgets -> DOM)

# Console messages that are not the page's doing and cannot be fixed from it. Voila 0.5.13
# bundles JupyterLab 4.2.5; the installed widget manager extension (jupyterlab_widgets
# 3.0.17) was built against JupyterLab 4.5 / 4.6 and asks for those versions of the shared
# @jupyterlab packages. Webpack's module federation then warns and uses the 4.2.5 singletons,
# which work (every widget on the page renders). The fix is a jupyterlab_widgets built for
# Lab 4.2, a packaging pin, not something the page does.
ALLOWED_CONSOLE = (
    re.compile(r"^Unsatisfied version \S+ from _JUPYTERLAB\.CORE_OUTPUT of shared singleton "
               r"module @jupyterlab/"),
    re.compile(r"^No satisfying version \S+ of shared module @jupyterlab/"),
    # anywidget 0.11's lab extension gives a model 2 s to initialise (hard-coded); on a busy
    # 2-core machine the hidden URL widget can miss it and anywidget retries. Known problem,
    # docs/serving.md; the checks below still require every chart and control to work.
    re.compile(r"^pageerror: \[anywidget\] Failed to initialize model\.$"),
)
# Only while a page is being left (Watch.leaving: its goto / close is running): the old
# document's widget manager may still send a change (a field's blur on unload) over the kernel
# connection the unload already closed. Seen once in CI under load (test_links); at any other
# time it is a real error and fails the test.
SYNC_ON_LEAVE = re.compile(r"^Could not send widget sync message Error: Cannot send")
VIEW_TITLES = {"Memory vs batch": "Device memory vs batch size",
               "GPUs compared": "GPUs compared", "Savings": "Today",
               "Bandwidth": "Bandwidth needed", "Roofline": "Roofline of",
               "Phases": "Memory over one step", "Memory hierarchy": "Memory hierarchy of",
               "All GPUs": "Capacity vs bandwidth"}
# one plan per family the page draws differently, reached through the controls (the views
# each offers come from the page): (name, model typed or family picked, task, verdict text)
FAMILY_PLANS = (("llama-lora", "meta-llama/Llama-3.1-8B", "lora", "Llama-3.1-8B"),
                ("resnet", "torchvision/resnet50", None, "resnet50"),
                ("flux", "black-forest-labs/FLUX.1-dev", None, "FLUX.1-dev"),
                ("t5", "t5-small", "forward", "t5-small · forward"),
                ("render", "No model (graphics / volume / arrays)", None, "render"))
README_PLAN = ("model=meta-llama/Llama-3.1-8B&task=lora&gpu=nvidia-rtx-4090&checkpointing=full"
               "&lora.rank=16")
SMALL_GPU = "nvidia-rtx-4060"      # 8 GB: an 8B model does not fit
CONFIG = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632,
          "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
          "vocab_size": 32000, "max_position_embeddings": 2048}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM),
                       reason=f"no Chromium at {CHROMIUM} (CI installs the chromium package)"),
]


SERVER_LOG = "voila.log"   # the server fixture (conftest.py): its log in test-artifacts/


class Watch:
    """Every request to another host (blocked) and every console warning or error."""

    def __init__(self, context):
        self.external: list[str] = []
        self.console: list[str] = []
        self.leaving = False      # a page.goto / page.close of a page already open is running
        context.route(lambda url: (urlparse(url).hostname or "") not in LOCAL_HOSTS
                      and url.startswith(("http://", "https://")),
                      lambda route: route.abort())

    def page(self, context):
        page = context.new_page()
        page.on("request", self._request)
        page.on("console", self._console)
        page.on("pageerror", self._pageerror)
        page.goto, page.close = self._leaving(page.goto), self._leaving(page.close)
        return page

    def _leaving(self, step):
        """`step` (goto / close) with `leaving` set while it runs: the document being left may
        still flush a widget's change over the kernel connection the unload has closed."""
        def run(*args, **kwargs):
            self.leaving = True
            try:
                return step(*args, **kwargs)
            finally:
                self.leaving = False
        return run

    def _request(self, request):
        host = urlparse(request.url).hostname or ""
        if request.url.startswith(("http://", "https://", "ws://", "wss://")) and \
                host not in LOCAL_HOSTS:
            self.external.append(request.url)

    def _pageerror(self, exc):
        text = f"pageerror: {exc}"
        if not any(p.match(text) for p in ALLOWED_CONSOLE):
            self.console.append(text)

    def _console(self, msg):
        if self.leaving and SYNC_ON_LEAVE.match(msg.text):
            return
        if msg.type in ("warning", "error") and not any(p.match(msg.text)
                                                        for p in ALLOWED_CONSOLE):
            self.console.append(f"{msg.type}: {msg.text[:300]}")

    def check(self):
        assert not self.external, f"requests outside the server: {self.external}"
        assert not self.console, f"console warnings / errors: {self.console}"


def open_plan(page, server: str, query: str = "") -> None:
    page.goto(f"{server}/?{query}" if query else server + "/", timeout=T_START,
              wait_until="domcontentloaded")
    page.locator(".vp-verdict-title").first.wait_for(state="attached", timeout=T_START)
    page.locator(".vp-breakdown svg").first.wait_for(state="attached", timeout=T_START)


def text(page, selector: str) -> str:
    return page.locator(selector).first.inner_text().strip()


def wait_text(page, selector: str, needle: str, timeout: int = T_STEP) -> None:
    page.wait_for_function(
        "([sel, t]) => [...document.querySelectorAll(sel)].some(e => (e.textContent || '')"
        ".includes(t))", arg=[selector, needle], timeout=timeout)


def enter(page, field: str, value: str) -> None:
    """Type into a field (`.vp-f-<key>`) and commit it as a person does."""
    box = page.locator(f".vp-f-{field} input").first
    box.fill(value)
    box.press("Enter")


def chart_title(page) -> str:
    return page.evaluate("() => [...document.querySelectorAll('.vp-explore-chart svg text')]"
                         ".map(e => e.textContent).join(' | ')")


def show_view(page, label: str) -> None:
    page.locator(".vp-views button", has_text=label).first.click()
    wait_text(page, ".vp-explore-chart svg text", VIEW_TITLES[label])


def charts_drawn(page) -> None:
    """Every chart on screen drawn (marks in its svg) and the advisor done: a still page."""
    page.wait_for_function(
        "() => { const s = [...document.querySelectorAll('.vp-chart svg')]; return s.length >= 2"
        " && s.every(e => e.getBoundingClientRect().width > 100 && e.querySelector("
        "'.role-mark path, .role-mark line, .role-mark text')) && !(document.querySelector("
        "'.vp-advisor') || {textContent: ''}).textContent.includes('Finding changes'); }",
        timeout=T_STEP)
    page.wait_for_timeout(500)


def views(page) -> list[str]:
    return [b.strip() for b in page.locator(".vp-views button").all_inner_texts()]


def test_planner_page(server, browser):
    from vramplan.hardware import default_db
    from vramplan.ui.state.state import default_gpu
    db = default_db()
    start, small = db.get(default_gpu(db)), db.get(SMALL_GPU)
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    watch = Watch(context)
    page = watch.page(context)
    timings = {}
    try:
        t0 = time.monotonic()
        open_plan(page, server)
        timings["verdict"] = time.monotonic() - t0
        assert text(page, ".vp-verdict-title") == f"Fits on {start.name}"
        assert text(page, ".vp-card h2") == start.name
        page.locator(".vp-breakdown svg text", has_text="GiB usable").first.wait_for(
            timeout=T_START)
        wait_text(page, ".vp-explore-chart svg text", VIEW_TITLES["Memory vs batch"], T_START)
        timings["charts"] = time.monotonic() - t0
        page.screenshot(path=str(ARTIFACTS / "planner-start.png"), full_page=True)

        # each control changes the verdict, the figures and the charts
        figures, curve = text(page, ".vp-figs"), chart_title(page)
        enter(page, "model", "gpt2")
        wait_text(page, ".vp-verdict-sub", "gpt2")
        assert text(page, ".vp-figs") != figures
        page.wait_for_function("c => [...document.querySelectorAll('.vp-explore-chart svg "
                               "text')].map(e => e.textContent).join(' | ') !== c", arg=curve,
                               timeout=T_STEP)
        figures = text(page, ".vp-figs")
        enter(page, "batch_size", "8")
        wait_text(page, ".vp-verdict-sub", "batch 8")
        assert text(page, ".vp-figs") != figures
        page.wait_for_function("() => location.search.includes('batch_size=8')", timeout=T_STEP)
        page.locator(".vp-f-precision select").select_option("fp32")
        wait_text(page, ".vp-verdict-sub", "fp32")
        page.locator(".vp-f-options label", has_text="torch.compile").first.click()
        page.wait_for_function("() => location.search.includes('options=compile')",
                               timeout=T_STEP)

        # every chart view renders for a plan of each family
        drawn = {}
        for name, model, task, verdict in FAMILY_PLANS:
            if model.startswith("No model"):
                page.locator(".vp-f-family select").select_option(label=model)
            else:
                enter(page, "model", model)
            if task:
                wait_text(page, ".vp-verdict-sub", verdict.split(" · ")[0])
                page.locator(".vp-f-task select").select_option(
                    label=CHOICE_LABELS["task"][task])
            wait_text(page, ".vp-verdict-sub", verdict)
            page.wait_for_timeout(300)           # the views of the new plan
            drawn[name] = views(page)
            for label in drawn[name]:
                show_view(page, label)
            page.screenshot(path=str(ARTIFACTS / f"planner-{name}.png"), full_page=True)
            page.locator(".vp-f-family select").select_option(label="All families")
        assert all({"GPUs compared", "Memory hierarchy", "All GPUs"} <= set(v)
                   for v in drawn.values())
        assert "Memory vs batch" not in drawn["render"]            # render has no batch
        assert "Roofline" in drawn["llama-lora"] and "Phases" in drawn["resnet"]

        # a GPU too small: does not fit; an advisor plan applies; undo brings it back
        open_plan(page, server, f"model=meta-llama/Llama-3.1-8B&task=lora&gpu={SMALL_GPU}")
        assert text(page, ".vp-verdict-title") == f"Does not fit on {small.name}"
        page.locator(".vp-plan .vp-apply").first.wait_for(timeout=T_STEP)
        show_view(page, "Savings")
        page.screenshot(path=str(ARTIFACTS / "planner-does-not-fit.png"), full_page=True)
        page.locator(".vp-plan .vp-apply").first.click()
        wait_text(page, ".vp-verdict-title", "Fits on")
        wait_text(page, ".vp-notices", "Applied")
        page.locator(".vp-undo").click()
        wait_text(page, ".vp-verdict-title", f"Does not fit on {small.name}")

        # choose a GPU by clicking its bar in the comparison
        show_view(page, "GPUs compared")
        page.locator(".vp-explore-chart svg .mark-rect path").nth(0).click()
        page.wait_for_function("n => (document.querySelector('.vp-card h2') || {})"
                               ".textContent !== n", arg=small.name, timeout=T_STEP)

        # bad input: explained next to its field, kept as typed, last plan dimmed
        enter(page, "batch_size", "0")
        err = page.locator(".vp-f-batch_size .vp-msg-error")
        err.wait_for(timeout=T_STEP)
        assert "batch_size" in err.inner_text()
        assert page.locator(".vp-f-batch_size input").input_value() == "0"
        page.locator(".vp-estimate-panel.vp-stale").wait_for(timeout=T_STEP)
        assert "Traceback" not in page.content()

        # your own model: a config.json upload becomes the architecture
        page.locator(".vp-f-family select").select_option(label="Your own config.json")
        path = ARTIFACTS / "tinyllama-config.json"
        path.write_text(json.dumps(CONFIG))
        with page.expect_file_chooser(timeout=T_STEP) as chooser:
            page.locator(".vp-f-own .widget-upload").first.click()
        chooser.value.set_files(str(path))
        wait_text(page, ".vp-verdict-sub", "own config (llama)")
        wait_text(page, ".vp-model-picker", "Your own config.json: decoder")
        page.wait_for_function("() => location.search.includes('architecture=')",
                               timeout=T_STEP)

        # a plan without a model: a 4K render frame
        page.locator(".vp-f-family select").select_option(
            label="No model (graphics / volume / arrays)")
        wait_text(page, ".vp-verdict-sub", "render")
        enter(page, "resolution", "2160x3840")
        wait_text(page, ".vp-verdict-sub", "2160×3840")
        assert page.locator(".vp-f-msaa select").is_visible()
        assert page.locator(".vp-f-precision").count() == 0
        assert page.locator(".vp-f-batch_size").count() == 0
        page.screenshot(path=str(ARTIFACTS / "planner-render.png"), full_page=True)
    finally:
        (ARTIFACTS / "browser-timings.txt").write_text(
            f"{json.dumps({k: round(v, 1) for k, v in timings.items()})}\n"
            f"console: {watch.console}\nexternal: {watch.external}\n")
        context.close()
    watch.check()


def test_links(server, browser):
    from vramplan.hardware import default_db
    from vramplan.scenario import Scenario
    gpu = default_db().get("nvidia-rtx-4090")
    context = browser.new_context(viewport={"width": 1440, "height": 1440})
    watch = Watch(context)
    page = watch.page(context)
    try:
        # a shared link reopens the same plan (the README picture)
        open_plan(page, server, README_PLAN)
        wait_text(page, ".vp-verdict-title", gpu.name, T_START)
        assert page.locator(".vp-f-lora-rank input").input_value() == "16"
        assert page.locator(".vp-f-checkpointing select").input_value() == "full"
        assert "full checkpointing" in text(page, ".vp-verdict-sub")
        page.locator(".vp-breakdown svg text", has_text="GiB usable").first.wait_for(
            timeout=T_START)
        wait_text(page, ".vp-explore-chart svg text", VIEW_TITLES["Memory vs batch"], T_START)
        # the share link is the page's full URL (scheme, host, path, query): its query
        link = "?" + urlparse(page.locator(".vp-share-link").get_attribute("href")).query
        assert Scenario.from_query(link) == Scenario.from_query(README_PLAN)
        page.evaluate("document.activeElement && document.activeElement.blur()")
        page.mouse.move(0, 0)
        charts_drawn(page)
        page.screenshot(path=str(ARTIFACTS / "planner-readme.png"))
        if os.environ.get("VRAMPLAN_UPDATE_README_SHOT"):   # refresh the README picture
            README_SHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(README_SHOT))
        page.screenshot(path=str(ARTIFACTS / "planner-readme-full.png"), full_page=True)

        # the link from the page reopens the same plan in a new tab
        page2 = watch.page(context)
        open_plan(page2, server, link.lstrip("?"))
        assert text(page2, ".vp-verdict-sub") == text(page, ".vp-verdict-sub")
        assert text(page2, ".vp-figs") == text(page, ".vp-figs")
        page2.close()

        # one bad value: the rest of the plan and the address are kept, the bad key named
        open_plan(page, server, "model=gpt2&batch_size=abc")
        wait_text(page, ".vp-verdict-sub", "gpt2")
        err = page.locator(".vp-f-batch_size .vp-msg-error")
        err.wait_for(timeout=T_STEP)
        assert "batch_size" in err.inner_text() and "abc" in err.inner_text()
        page.wait_for_timeout(500)
        assert page.evaluate("location.search") == "?model=gpt2&batch_size=abc"

        # an unknown GPU: the page says so and offers GPUs to pick
        open_plan(page, server, "gpu=not-a-gpu")
        wait_text(page, ".vp-notices", "unknown GPU 'not-a-gpu'")
        choice = page.locator(".vp-choice").nth(1)
        name = choice.inner_text().strip()
        choice.click()
        wait_text(page, ".vp-card h2", name)
    finally:
        context.close()
    watch.check()
