"""What `vramplan app` lets a visitor do, and that kernels come back (the reliability issue's
urgent findings). Before the fix: a foreign Host header was served (DNS rebinding), any GET
left a ~150 MiB kernel running forever (the page's shutdown beacon was refused for a missing
`_xsrf` cookie, no culling), a busy port was reported as served, a read-only HOME gave 500."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from serving import (CHROMIUM, CHROMIUM_ARGS, ROOT, app_server, free_port, get, kernels,
                     tree_rss, wait_until)

pytestmark = pytest.mark.browser

FAST_CULL = ("--cull-idle", "4", "--cull-interval", "1")


def test_foreign_host_is_refused_and_only_the_planner_is_served():
    with app_server(log_name="voila-hosts.log") as (base, _proc):
        port = base.rsplit(":", 1)[1]
        assert get(f"{base}/voila/static/voila.js", {"Host": "evil.example.com"})[0] == 403
        assert get(f"{base}/voila/static/voila.js", {"Host": f"localhost:{port}"})[0] == 200
        for path in ("/api/kernels", "/api/contents", "/api/sessions", "/api/terminals",
                     "/voila/files/planner.ipynb", "/planner.ipynb", "/notebooks/planner.ipynb",
                     "/voila/render/planner.ipynb", "/tree", "/lab", "/voila/files/../../etc/passwd"):
            code, body = get(base + path)
            assert code in (403, 404), (path, code)
            assert "nbformat" not in body and "App()" not in body, path


def test_plain_visits_give_their_kernels_and_memory_back():
    with app_server(app_args=FAST_CULL, log_name="voila-cull.log") as (base, proc):
        idle = tree_rss(proc)
        for _ in range(3):  # a crawler: GET / and go, no websocket ever opens
            code, body = get(base + "/")
            assert code == 200 and "vramplan" in body
        assert len(kernels(proc)) >= 1
        busy = tree_rss(proc)
        assert wait_until(lambda: not kernels(proc), timeout=60), "kernels were not culled"
        after = tree_rss(proc)
        # each kernel held ~100+ MiB; the server itself keeps some caches of the first render
        assert busy - idle > 150 * 2**20
        assert after <= idle * 1.10 + 40 * 2**20, (idle, busy, after)


def test_closing_the_tab_shuts_its_kernel_down():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright
    # culling far away: only the page's own shutdown beacon can bring the kernel back
    with app_server(app_args=("--cull-idle", "3600"), log_name="voila-beacon.log") as (base, proc):
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(base + "/", timeout=120_000)
            page.wait_for_selector(".vp-verdict", timeout=120_000)
            assert len(kernels(proc)) == 1
            page.goto("about:blank")  # leaving the page fires its shutdown beacon
            assert wait_until(lambda: not kernels(proc), timeout=30), \
                "the page's shutdown beacon was refused"
            browser.close()


def test_busy_port_is_an_error_not_a_lie():
    port = free_port()
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        r = subprocess.run([sys.executable, "-m", "vramplan.cli", "app", "--port", str(port)],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert f"port {port}" in r.stderr and "in use" in r.stderr
    assert "serving" not in r.stderr and "Traceback" not in r.stderr


def test_unwritable_home_still_serves():
    # a HOME nobody can create, root included (CI runs as root, which ignores chmod)
    home = "/proc/vramplan-no-home"
    with app_server(env={"HOME": home}, log_name="voila-rohome.log") as (base, _):
        code, body = get(base + "/")
        assert code == 200, body[:500]


def test_make_app_and_the_command_bind_loopback():
    text = (ROOT / "Makefile").read_text()
    assert "--ip=0.0.0.0" not in text and "IP ?= 127.0.0.1" in text
    r = subprocess.run([sys.executable, "-m", "vramplan.cli", "app", "--print-command"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "--Voila.ip=127.0.0.1" in r.stdout and "cull_idle_timeout=" in r.stdout
    assert "vramplan.commands.voila_server" in r.stdout
