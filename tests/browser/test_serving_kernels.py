"""Jupyter's culler around `vramplan app`'s kernels (server/serving_kernels.py), on the real
kernel manager class with kernels that are not started (no process, no browser).

The 16-page load run of 2026-12-01 (benchmarks/results/load-2026-12-01-queued16.json) logged
"The following exception was encountered while checking the idle duration of kernel ...:
The 'last_activity' trait of a ServerKernelManager instance expected a datetime, not the
NoneType None": the culler read a kernel that jupyter_client had registered but whose start
the server had not finished (it sets `last_activity` after the process is up). The same run
shut one kernel down twice: the page's beacon, then the culler while the first shutdown was
still under way."""
from __future__ import annotations

import asyncio
import datetime as dt
import logging

import pytest

pytest.importorskip("jupyter_server")


def _manager():
    from jupyter_server.services.kernels.kernelmanager import (AsyncMappingKernelManager,
                                                               ServerKernelManager)
    km = AsyncMappingKernelManager(cull_idle_timeout=120, cull_interval=1)
    km.log = logging.getLogger("test-culler")
    shut: list[str] = []

    async def shutdown_kernel(kernel_id, *args, **kwargs):  # what the culler calls
        shut.append(kernel_id)
        await asyncio.sleep(0.05)
        km._kernels.pop(kernel_id, None)

    km.shutdown_kernel = shutdown_kernel
    starting = ServerKernelManager(kernel_name="python3")      # registered, not yet started
    idle = ServerKernelManager(kernel_name="python3")
    idle.execution_state = "idle"
    idle.last_activity = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=600)
    km._kernels.update({"starting": starting, "idle": idle})
    km._kernel_connections.update({"starting": 0, "idle": 0})
    return km, shut


def _culler_errors(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if "while checking the idle duration" in r.getMessage()]


def test_plain_culler_fails_on_a_starting_kernel(caplog):
    """The finding itself, so that a jupyter_server that fixes it shows here."""
    km, shut = _manager()
    with caplog.at_level(logging.ERROR, logger="test-culler"):
        asyncio.run(km.cull_kernels())
    errors = _culler_errors(caplog)
    assert len(errors) == 1 and "'last_activity' trait" in errors[0], errors
    assert shut == ["idle"]


def test_guarded_culler_skips_starting_and_closing_kernels(caplog):
    from vramplan.server.serving_kernels import cullable, guard_culling, trim_after_shutdown
    km, shut = _manager()
    trim_after_shutdown(km)
    guard_culling(km)
    assert not cullable(km, "starting") and cullable(km, "idle")
    assert not cullable(km, "gone")

    async def scenario():
        beacon = asyncio.ensure_future(km.shutdown_kernel("idle"))   # the page's beacon
        await asyncio.sleep(0.01)
        assert not cullable(km, "idle")        # its shutdown is under way
        await km.cull_kernels()                 # the culler's round meanwhile
        await beacon
        await km.cull_kernels()                 # and after: the kernel is gone

    with caplog.at_level(logging.ERROR, logger="test-culler"):
        asyncio.run(scenario())
    assert not _culler_errors(caplog)
    assert shut == ["idle"]                    # once, by the beacon; never the starting one
    assert "starting" in km._kernels and not km._vp_closing
    # a started kernel idle for longer than cull_idle_timeout is still culled
    km._kernels["starting"].last_activity = dt.datetime.now(dt.timezone.utc) - \
        dt.timedelta(seconds=600)
    km._kernels["starting"].execution_state = "idle"
    with caplog.at_level(logging.ERROR, logger="test-culler"):
        asyncio.run(km.cull_kernels())
    assert shut == ["idle", "starting"] and not _culler_errors(caplog)


def test_memory_census_is_off_by_default_and_names_what_grew(tmp_path):
    """The debug census (server/server_memory.py): nothing without the variable; with it,
    the second census names the objects made after the first and the line that made them."""
    import json
    import signal

    from vramplan.server import server_memory
    assert server_memory.install({}) is None
    before = signal.getsignal(signal.SIGUSR1)
    try:
        census = server_memory.install({server_memory.ENV: str(tmp_path)})
        census.take()
        held = [[i] for i in range(5000)]               # 5,000 lists made between the two
        census.take()
    finally:
        signal.signal(signal.SIGUSR1, before)
        import tracemalloc
        tracemalloc.stop()
    second = json.loads((tmp_path / "census-1.json").read_text())
    assert second["types_grown"]["list"] >= 5000
    top = second["sites_grown"][0]
    assert top["count_diff"] >= 5000 and top["size_diff"] >= 5000 * 64, top
    assert any("test_serving_kernels.py" in frame for frame in top["traceback"]), top
    assert len(held) == 5000


def test_the_allocator_settings_are_the_servers_alone(tmp_path):
    """`vramplan app` starts the server with PYTHONMALLOC=malloc and a fixed 64 KiB mmap
    threshold unless the environment sets them; the server takes both out of its own
    environment before it starts kernels, and keeps what the user set."""
    from vramplan.commands import app
    from vramplan.server import voila_server
    env = app.voila_env({"HOME": str(tmp_path)})
    assert env["PYTHONMALLOC"] == "malloc" and env["MALLOC_MMAP_THRESHOLD_"] == "65536"
    voila_server.kernels_environ(env)
    assert "PYTHONMALLOC" not in env and "MALLOC_MMAP_THRESHOLD_" not in env
    assert voila_server.MALLOC_MARK not in env and env["HOME"] == str(tmp_path)
    mine = app.voila_env({"HOME": str(tmp_path), "MALLOC_MMAP_THRESHOLD_": "131072"})
    assert mine["MALLOC_MMAP_THRESHOLD_"] == "131072" and mine["PYTHONMALLOC"] == "malloc"
    voila_server.kernels_environ(mine)
    assert mine["MALLOC_MMAP_THRESHOLD_"] == "131072" and "PYTHONMALLOC" not in mine
