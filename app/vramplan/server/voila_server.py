"""The Voila server `vramplan app` runs: Voila with the settings a page in front of many
visitors needs, and nothing a visitor could use beyond the planner.

Run as `python -m vramplan.server.voila_server NOTEBOOK [voila options]` (commands/app.py
builds that command line). What it changes of plain Voila, and why:

- **Host / Origin check when bound to loopback.** Voila forces `allow_remote_access=True`, so a
  page on another site that resolves its own name to 127.0.0.1 (DNS rebinding) is served and
  its websocket accepted. Bound to a loopback address, only `localhost` / loopback Host
  headers are served (Jupyter's own check), and Jupyter's websocket Origin check then refuses
  pages of other origins. Bound to another address, the check is off (the operator chose it).
- **Kernels come back.** Each visit starts a kernel (~150-190 MiB). The page's own shutdown
  beacon needs the `_xsrf` cookie, which plain Voila never sets, so it was refused and every
  visit leaked a kernel: the page handler here sets the cookie. Kernels with no open
  connection are culled after `CULL_IDLE_S` (a closed tab, a crawler's GET, a lost network),
  checked every `CULL_INTERVAL_S` (`culling_args`). The culler skips a kernel that is still
  starting or already shutting down (`serving_kernels.guard_culling`).
- **Nothing but the planner.** Voila's `/voila/files/` handler (files of the notebook's folder)
  is not mounted.
- **Timeouts that hold under load.** nbclient waits 4 s for the kernel's first output; with
  8 kernels importing at once on two cores that fails every page. `timeout_args` gives 180 s.
- **Pages start in turn.** 16 pages arriving together on two cores all timed out (each kernel
  got 1/8 of a core). At most `start_slots` pages (default: one per CPU) start their kernel and
  run the notebook at a time, a turn lasting until the page's browser has connected to its
  kernel; the others wait in arrival order (`StartQueue`) with the page already sent, its
  spinner saying how many visitors are ahead. A page whose notebook still
  gives no output says so and asks for a reload (the template), never a blank page.
- **Memory back.** The server runs on the C allocator with large blocks mapped apart
  (`SERVER_ALLOCATOR`, see `main`) and, after kernels shut down, hands freed heap back to the
  system (`malloc_trim`), so a burst of visitors does not leave a high-water mark.

This module is also a Jupyter server extension (enabled by the installed
etc/jupyter/jupyter_server_config.d/vramplan.json): in `jupyter server` / `jupyter lab`, Voila's
own extension pages (/voila/render/...) would load MathJax from cdnjs on every visit.
"""
from __future__ import annotations

import asyncio
import ipaddress
import os
import sys

from . import server_memory
from .serving_kernels import (START_SLOTS, QueuedKernels, StartQueue,  # noqa: F401 (tests)
                              guard_culling, queue_script, trim_after_shutdown)

CULL_IDLE_S = 120          # a kernel with no page connected for this long is shut down
CULL_INTERVAL_S = 30       # how often idle kernels are looked for
IOPUB_TIMEOUT_S = 180      # a kernel's outputs, after its cell's reply, while others start
# (60 s until 2026-12-01: in a 16-page run at 1-min load 15, 3 pages said "did not start"
# although their kernels had run the notebook: the outputs came later than 60 s)
STARTUP_TIMEOUT_S = 120    # kernel start under load


def is_loopback(ip: str) -> bool:
    """Is `ip` (as given to --Voila.ip) a loopback address or `localhost`?"""
    if ip in ("localhost", ""):
        return ip == "localhost"
    try:
        return ipaddress.ip_address(ip.strip("[]")).is_loopback
    except ValueError:
        return False


def local_host_header(host: str) -> bool:
    """Is an HTTP Host header (`name[:port]`, `[v6]:port`) this machine's loopback name?"""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    name = name.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def culling_args(idle_s: int = CULL_IDLE_S, interval_s: int = CULL_INTERVAL_S) -> list[str]:
    """Voila options that shut down kernels no page is connected to."""
    return [f"--MappingKernelManager.cull_idle_timeout={idle_s}",
            f"--MappingKernelManager.cull_interval={interval_s}",
            "--MappingKernelManager.cull_connected=False",
            "--MappingKernelManager.cull_busy=False"]


def timeout_args() -> list[str]:
    return [f"--VoilaExecutor.iopub_timeout={IOPUB_TIMEOUT_S}",
            f"--VoilaExecutor.startup_timeout={STARTUP_TIMEOUT_S}",
            # a cell stuck for 10 minutes is interrupted, not left holding a kernel
            "--VoilaExecutor.timeout=600", "--VoilaExecutor.interrupt_on_timeout=True"]


def _app_class():
    from tornado.web import HTTPError, authenticated
    from traitlets import Integer
    from voila.app import Voila
    from voila.tornado.handler import TornadoVoilaHandler

    class _LocalHostOnly:
        """Mixed into every handler when bound to loopback: a request whose Host header is
        not `localhost` or a loopback address gets 403 before anything else runs."""

        def prepare(self, *args, **kwargs):
            if not local_host_header(self.request.host):
                raise HTTPError(403, "non-local Host header")
            return super().prepare(*args, **kwargs)

    class PlannerHandler(TornadoVoilaHandler):
        """The page handler: also sets the `_xsrf` cookie the page's shutdown beacon sends, and
        starts the page's kernel in its turn (`StartQueue`), its place shown meanwhile."""

        _vp_kernels: QueuedKernels | None = None

        @property
        def kernel_manager(self):
            return self._vp_kernels or self.settings["kernel_manager"]

        @authenticated
        async def get(self, path=None):
            if path:  # Voila would redirect any other path to /voila/files/<path>
                raise HTTPError(404)
            self.xsrf_token  # noqa: B018 (reading it sets the cookie)
            self._vp_kernels = kernels = QueuedKernels(self.settings["kernel_manager"],
                                                       self.settings["vramplan_start_queue"])
            announcer, sent = None, False
            try:
                async for html in self.get_generator(path=path):
                    self.write(html)
                    self.flush()
                    if announcer is None and 'id="loading_text"' in html:
                        announcer = asyncio.ensure_future(self._announce(kernels))
                sent = True
            finally:
                if announcer is not None:
                    announcer.cancel()
                if sent and kernels.started:  # the browser's widget loading is part of the turn
                    asyncio.ensure_future(kernels.done_when_connected())
                else:
                    kernels.done()

        async def _announce(self, kernels: QueuedKernels) -> None:
            """While the page waits for its turn, keep its spinner's line up to date."""
            shown = None
            while not kernels.started:
                ahead = kernels.ahead()
                if ahead is None:
                    return
                if ahead != shown:
                    self.write(queue_script(ahead))
                    self.flush()
                    shown = ahead
                await kernels.queue.wait_change()

        def on_connection_close(self):
            if self._vp_kernels is not None:
                self._vp_kernels.done()  # a visitor who left gives their place up
            super().on_connection_close()

    class PlannerVoila(Voila):
        name = "vramplan-voila"
        start_slots = Integer(START_SLOTS, config=True,
                              help="pages that start their kernel at the same time")

        def init_settings(self):
            settings = super().init_settings()
            settings["vramplan_start_queue"] = StartQueue(self.start_slots)
            trim_after_shutdown(self.kernel_manager)
            guard_culling(self.kernel_manager)
            if is_loopback(self.ip or "localhost"):
                settings["allow_remote_access"] = False
                settings["local_hostnames"] = ["localhost"]
            return settings

        def init_handlers(self):
            loopback = is_loopback(self.ip or "localhost")
            out = []
            for h in super().init_handlers():
                if h[0].endswith("/voila/files/(.*)"):
                    continue  # the planner needs no file of the server's folder
                cls = PlannerHandler if h[1] is TornadoVoilaHandler else h[1]
                if loopback:  # every handler, static files and websockets included
                    cls = type(cls.__name__, (_LocalHostOnly, cls), {})
                out.append((h[0], cls, *h[2:]))
            return out

    return PlannerVoila


def _jupyter_server_extension_points():
    return [{"module": "vramplan.server.voila_server"}]


def _load_jupyter_server_extension(serverapp) -> None:
    """Voila's extension pages load MathJax 2 from cdnjs unless the server's settings give
    `mathjax_url` and `mathjax_config` as None (its standalone app does); with None they
    typeset with the MathJax 3 that Voila's bundle carries. Nothing else reads these settings;
    values a user configured (ServerApp.tornado_settings) are kept."""
    settings = serverapp.web_app.settings
    settings.setdefault("mathjax_url", None)
    settings.setdefault("mathjax_config", None)


def warm_chart_cache() -> None:
    """Build the chart widget's offline bundle once, in the background, so that even the first
    visitor's kernel reads it from the cache (vramplan.ui.widgets.altair_offline)."""
    import subprocess
    try:
        subprocess.Popen([sys.executable, "-c", "from vramplan.ui.widgets.altair_offline import "
                          "enable_offline; enable_offline()"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    except OSError:
        pass  # the first kernel builds it instead


MALLOC_MARK = "VRAMPLAN_SERVER_PYTHONMALLOC"   # the names below that `vramplan app` set
# The server's allocator settings (`app.voila_env` sets those the environment does not):
# - PYTHONMALLOC=malloc: Python's own allocator keeps a 256 KiB arena while one object in it
#   lives, which `malloc_trim` cannot give back; on the C allocator it can.
# - MALLOC_MMAP_THRESHOLD_=65536: every block of 64 KiB or more is a mapping of its own, given
#   back to the system when freed. glibc's default threshold moves up (to 32 MiB) once a large
#   block is freed, so a burst's large buffers (widget states, websocket frames, kernel
#   messages) then came from the heap, where the few objects that outlive the burst pinned
#   their pages. Measured 2026-12-01 (benchmarks/load.py, 2 cores, 1-min load up to 19):
#   after 16 pages at once +21 % over idle without it, +8 % with it; after 4, +8.5 % / +4 %.
SERVER_ALLOCATOR = {"PYTHONMALLOC": "malloc", "MALLOC_MMAP_THRESHOLD_": str(64 * 1024)}


def kernels_environ(environ) -> None:
    """The allocator settings are read at this process's start: remove those `vramplan app`
    set, so that kernels and helpers started from here keep the defaults (a kernel gives all
    its memory back when it exits)."""
    for name in environ.pop(MALLOC_MARK, "").split(","):
        if name in SERVER_ALLOCATOR:
            environ.pop(name, None)


def main(argv: list[str] | None = None) -> None:
    kernels_environ(os.environ)
    warm_chart_cache()
    server_memory.install()  # off unless $VRAMPLAN_SERVER_MEMORY_DEBUG names a folder
    _app_class().launch_instance(argv=argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
