"""The planner page in a real browser: Voila serves it exactly as `make app` does, headless
Chromium opens it, changes the model and the batch size, picks a GPU too small, enters a bad
value, switches to a model-less render plan, and reopens a plan from its link.

Fails on any request to a host other than the server (the page must work offline). Saves
screenshots to test-artifacts/ (and, with VRAMPLAN_UPDATE_README_SHOT=1, the README's docs/img/planner.png).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
README_SHOT = ROOT / "docs" / "img" / "planner.png"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]
T_START = 90_000      # ms: Voila server up + kernel start + notebook run on 2 busy CPUs
T_STEP = 60_000       # ms: one interaction round trip (kernel -> widgets -> DOM) on busy CPUs

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM),
                       reason=f"no Chromium at {CHROMIUM} (CI installs the chromium package)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """`vramplan app` (the command behind `make app`) on a free port; yields its base URL."""
    pytest.importorskip("voila")
    ARTIFACTS.mkdir(exist_ok=True)
    port = _free_port()
    log = open(ARTIFACTS / "voila.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vramplan.cli", "app", "--port", str(port), "--ip", "127.0.0.1"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + T_START / 1000
    try:
        while True:  # a static file: polling "/" would start a kernel per poll
            if proc.poll() is not None:
                pytest.fail(f"vramplan app exited with {proc.returncode}; see "
                            f"{ARTIFACTS / 'voila.log'}:\n{(ARTIFACTS / 'voila.log').read_text()}")
            try:
                with urllib.request.urlopen(f"{base}/voila/static/voila.js", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail("Voila did not come up in time; see test-artifacts/voila.log")
                time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _db():
    from vramplan.hardware import default_db
    return default_db()


# the README picture: a plan people actually run, on a card people own
README_PLAN = ("model=meta-llama/Llama-3.1-8B&task=lora&gpu=nvidia-rtx-4090&checkpointing=full"
               "&lora.rank=16")
SMALL_GPU = "nvidia-rtx-4060"      # 8 GB: an 8B model does not fit


def _text(page, selector: str) -> str:
    return page.locator(selector).first.inner_text().strip()


def _wait_text(page, selector: str, text: str, timeout: int = T_STEP) -> None:
    page.wait_for_function(
        "([sel, t]) => (document.querySelector(sel)?.textContent || '').includes(t)",
        arg=[selector, text], timeout=timeout)


def _enter(page, field: str, value: str) -> None:
    """Type into a workload field (`.vp-f-<key>`) and commit it as a user does."""
    box = page.locator(f".vp-f-{field} input").first
    box.fill(value)
    box.press("Enter")


def test_planner_page(server, browser):
    db = _db()
    from vramplan.ui.state import default_gpu
    start = db.get(default_gpu(db))
    small, readme_gpu = db.get(SMALL_GPU), db.get("nvidia-rtx-4090")
    external: list[str] = []
    page_errors: list[str] = []
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()

    def on_request(request):
        host = urlparse(request.url).hostname or ""
        if request.url.startswith(("http://", "https://", "ws://", "wss://")) and \
                host not in LOCAL_HOSTS:
            external.append(request.url)

    page.on("request", on_request)
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    # never wait on the outside world: block what on_request reports
    context.route(lambda url: (urlparse(url).hostname or "") not in LOCAL_HOSTS
                  and url.startswith(("http://", "https://")),
                  lambda route: route.abort())
    try:
        t0 = time.monotonic()
        page.goto(server + "/", timeout=T_START, wait_until="domcontentloaded")
        verdict = ".vp-verdict-title"
        page.locator(verdict).wait_for(timeout=T_START)
        t_verdict = time.monotonic() - t0
        assert _text(page, verdict) == f"Fits on {start.name}"
        assert _text(page, ".vp-card h2") == start.name
        # the breakdown chart arrives after first paint, with the GPU's usable-memory line
        page.locator(".vp-breakdown svg text", has_text="GiB usable").first.wait_for(
            timeout=T_START)
        t_chart = time.monotonic() - t0
        page.screenshot(path=str(ARTIFACTS / "planner-start.png"), full_page=True)

        # change the model, then the batch size: the verdict line and the figures follow
        figures = _text(page, ".vp-figs")
        _enter(page, "model", "gpt2")
        _wait_text(page, ".vp-verdict-sub", "gpt2")
        assert _text(page, ".vp-figs") != figures
        figures = _text(page, ".vp-figs")
        _enter(page, "batch_size", "8")
        _wait_text(page, ".vp-verdict-sub", "batch 8")
        assert _text(page, ".vp-figs") != figures
        page.wait_for_function("() => location.search.includes('batch_size=8')", timeout=T_STEP)

        # a GPU too small for an 8B model: does not fit
        _enter(page, "model", "meta-llama/Llama-3.1-8B")
        _wait_text(page, ".vp-verdict-sub", "Llama-3.1-8B")
        page.locator(".vp-gpu-picker input[type=text]").first.fill(small.name)
        select = page.locator(".vp-gpu-picker select[size]")
        from vramplan.ui.gpu_picker import GpuPicker
        label = GpuPicker.label(small)
        select.locator("option", has_text=label).first.wait_for(timeout=T_STEP)
        # the list re-renders as the search filters it; a pick that lands on the old list is
        # lost, so pick again once if the verdict has not followed
        select.select_option(label=label)
        try:
            _wait_text(page, verdict, f"Does not fit on {small.name}", timeout=T_STEP // 2)
        except Exception:
            select.select_option(label=label)
            _wait_text(page, verdict, f"Does not fit on {small.name}")
        assert "short by" in _text(page, ".vp-verdict-detail")
        assert _text(page, ".vp-card h2") == small.name
        page.wait_for_function("id => location.search.includes('gpu=' + id)", arg=small.id,
                               timeout=T_STEP)
        page.screenshot(path=str(ARTIFACTS / "planner-does-not-fit.png"), full_page=True)

        # bad input: explained next to its control, kept as typed, last plan dimmed
        _enter(page, "batch_size", "0")
        err = page.locator(".vp-f-batch_size .vp-msg-error")
        err.wait_for(timeout=T_STEP)
        assert "batch_size" in err.inner_text()
        assert page.locator(".vp-f-batch_size input").input_value() == "0"
        page.locator(".vp-estimate-panel.vp-stale").wait_for(timeout=T_STEP)
        assert "Traceback" not in page.content()
        page.screenshot(path=str(ARTIFACTS / "planner-bad-input.png"), full_page=True)

        # a plan without a model: a 4K render frame
        page.locator(".vp-f-family select").select_option(
            label="No model (graphics / volume / arrays)")
        _wait_text(page, ".vp-verdict-sub", "render")
        _enter(page, "resolution", "2160x3840")
        _wait_text(page, ".vp-verdict-sub", "2160×3840")
        assert _text(page, verdict).startswith("Fits on")
        assert page.locator(".vp-f-msaa select").is_visible()
        assert not page.locator(".vp-f-precision").first.is_visible()
        page.wait_for_function("() => location.search.includes('task=render')", timeout=T_STEP)
        page.screenshot(path=str(ARTIFACTS / "planner-render.png"), full_page=True)

        # a link reopens the whole plan (and is the README picture)
        page2 = context.new_page()
        page2.on("request", on_request)
        page2.goto(f"{server}/?{README_PLAN}", timeout=T_START, wait_until="domcontentloaded")
        page2.locator(verdict).wait_for(timeout=T_START)
        _wait_text(page2, verdict, readme_gpu.name, timeout=T_START)
        assert page2.locator(".vp-f-lora-rank input").input_value() == "16"
        assert "full checkpointing" in _text(page2, ".vp-verdict-sub")
        page2.locator(".vp-breakdown svg text", has_text="GiB usable").first.wait_for(
            timeout=T_START)
        page2.set_viewport_size({"width": 1440, "height": 1180})
        page2.evaluate("document.activeElement && document.activeElement.blur()")
        page2.mouse.move(0, 0)
        page2.wait_for_timeout(800)
        page2.screenshot(path=str(ARTIFACTS / "planner-readme.png"))
        if os.environ.get("VRAMPLAN_UPDATE_README_SHOT"):   # refresh the README picture
            README_SHOT.parent.mkdir(parents=True, exist_ok=True)
            page2.screenshot(path=str(README_SHOT))
        page2.screenshot(path=str(ARTIFACTS / "planner-readme-full.png"), full_page=True)
        page2.close()

        # the GPU-only link still works
        page3 = context.new_page()
        page3.on("request", on_request)
        page3.goto(f"{server}/?gpu={small.id}", timeout=T_START, wait_until="domcontentloaded")
        _wait_text(page3, ".vp-card h2", small.name, timeout=T_START)
        page3.close()
    finally:
        (ARTIFACTS / "browser-timings.txt").write_text(
            f"verdict {locals().get('t_verdict', float('nan')):.1f}s, "
            f"chart {locals().get('t_chart', float('nan')):.1f}s\n"
            f"page errors: {page_errors}\nexternal: {external}\n")
        context.close()
    assert not external, f"requests outside the server: {external}"
