"""The fixtures the browser tests share: one headless Chromium and one `vramplan app` per test
module. A module names its server's log (`SERVER_LOG`, under test-artifacts/) and the
modules its server needs beyond Voila (`SERVER_NEEDS`, skipped when missing)."""
from __future__ import annotations

import pytest

from serving import CHROMIUM, CHROMIUM_ARGS, app_server


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def server(request):
    """The base URL of a `vramplan app` started for this module (stopped after it)."""
    pytest.importorskip("voila")
    for name in getattr(request.module, "SERVER_NEEDS", ()):
        pytest.importorskip(name)
    with app_server(log_name=getattr(request.module, "SERVER_LOG", "voila.log")) as (base, _):
        yield base
