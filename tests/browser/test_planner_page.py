"""The planner page in a real browser: Voila serves it exactly as `make app` does, headless
Chromium opens it, picks another GPU and checks that the card and the chart follow.

Fails on any request to a host other than the server (the page must work offline). Saves
screenshots to test-artifacts/ and the README's docs/img/planner.png.
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
T_STEP = 30_000       # ms: one interaction round trip (kernel -> widgets -> DOM)

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


def _targets():
    """The GPU the page starts with and a clearly different one to pick."""
    from vramplan.ui.app import default_gpu
    db = _db()
    start = db.get(default_gpu(db))
    for name in ("MI300X", "amd-instinct-mi300x"):  # a different vendor, a common comparison
        try:
            return start, db.get(name)
        except LookupError:
            pass
    others = [d for d in db.devices if d.id != start.id and d.vendor != start.vendor] or \
        [d for d in db.devices if d.id != start.id]
    assert others, "the hardware database needs at least two devices"
    # the largest-memory other device: far from the start point on the chart, and a good picture
    others.sort(key=lambda d: (-d.memory_bytes, d.id))
    return start, others[0]


def test_planner_page(server, browser):
    start, target = _targets()
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
        card = page.locator(".vp-card h2")
        card.wait_for(timeout=T_START)
        assert card.inner_text().strip() == start.name
        t_card = time.monotonic() - t0

        # the chart arrives after first paint; it rings the start GPU
        chart_label = page.locator(".vp-chart svg text", has_text=start.name)
        chart_label.first.wait_for(timeout=T_START)
        t_chart = time.monotonic() - t0
        page.screenshot(path=str(ARTIFACTS / "planner-start.png"), full_page=True)

        # pick another GPU from the list: search narrows it, then click the option
        page.locator(".vp-controls input[type=text]").first.fill(target.name)
        select = page.locator(".vp-controls select[size]")
        from vramplan.ui.controls import GpuPicker
        label = GpuPicker.label(target)
        select.locator("option", has_text=label).first.wait_for(timeout=T_STEP)
        select.select_option(label=label)
        page.wait_for_function(
            "name => document.querySelector('.vp-card h2')?.textContent.trim() === name",
            arg=target.name, timeout=T_STEP)
        card_text = page.locator(".vp-card").inner_text()
        assert target.name in card_text
        assert target.memory_type in card_text
        assert start.name not in page.locator(".vp-card h2").inner_text()
        page.locator(".vp-chart svg text", has_text=target.name).first.wait_for(timeout=T_STEP)
        assert page.locator(".vp-chart svg text", has_text=start.name).count() == 0
        page.wait_for_function("id => location.search.includes('gpu=' + id)", arg=target.id,
                               timeout=T_STEP)
        # the README picture: the whole page, the picked GPU
        page.locator(".vp-controls input[type=text]").first.fill("")
        page.locator(".vp-count", has_text=f"{len(_db().devices)} of").wait_for(timeout=T_STEP)
        page.set_viewport_size({"width": 1440, "height": 1180})  # Voila scrolls inside the page
        page.evaluate("document.activeElement && document.activeElement.blur()")
        page.mouse.move(0, 0)
        page.wait_for_timeout(500)
        README_SHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "planner-picked.png"))
        page.screenshot(path=str(README_SHOT))
        page.set_viewport_size({"width": 1440, "height": 1000})

        # bad input: explained inline, kept as typed, no traceback
        mem = page.locator(".vp-controls input[type=text]").nth(1)
        mem.fill("abc")
        mem.press("Enter")
        err = page.locator(".vp-msg-error", has_text="Min memory")
        err.wait_for(timeout=T_STEP)
        assert "abc" in err.inner_text()
        assert mem.input_value() == "abc"
        assert "Traceback" not in page.content()
        page.screenshot(path=str(ARTIFACTS / "planner-bad-input.png"), full_page=True)

        # the link with ?gpu= opens that GPU
        page2 = context.new_page()
        page2.on("request", on_request)
        page2.goto(f"{server}/?gpu={target.id}", timeout=T_START, wait_until="domcontentloaded")
        page2.wait_for_function(
            "name => document.querySelector('.vp-card h2')?.textContent.trim() === name",
            arg=target.name, timeout=T_START)
        page2.close()
    finally:
        (ARTIFACTS / "browser-timings.txt").write_text(
            f"card {locals().get('t_card', float('nan')):.1f}s, "
            f"chart {locals().get('t_chart', float('nan')):.1f}s\n"
            f"page errors: {page_errors}\nexternal: {external}\n")
        context.close()
    assert not external, f"requests outside the server: {external}"
