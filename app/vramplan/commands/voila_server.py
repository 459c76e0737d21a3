"""The Voila server `vramplan app` runs: Voila with the settings a page in front of many
visitors needs, and nothing a visitor could use beyond the planner.

Run as `python -m vramplan.commands.voila_server NOTEBOOK [voila options]` (commands/app.py
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
  checked every `CULL_INTERVAL_S` (`culling_args`).
- **Nothing but the planner.** Voila's `/voila/files/` handler (files of the notebook's folder)
  is not mounted.
- **Timeouts that hold under load.** nbclient waits 4 s for the kernel's first output; with
  8 kernels importing at once on two cores that fails every page. `timeout_args` gives 60 s.
- **Pages start in turn.** 16 pages arriving together on two cores all timed out (each kernel
  got 1/8 of a core). At most `start_slots` pages (default: one per CPU) start their kernel and
  run the notebook at a time, a turn lasting until the page's browser has connected to its
  kernel; the others wait in arrival order (`StartQueue`) with the page already sent, its
  spinner saying how many visitors are ahead. A page whose notebook still
  gives no output says so and asks for a reload (the template), never a blank page.
- **Memory back.** The server runs on the C allocator (`PYTHONMALLOC=malloc`, see `main`) and,
  after kernels shut down, hands freed heap back to the system (`malloc_trim`), so a burst of
  visitors does not leave a high-water mark.

This module is also a Jupyter server extension (enabled by the installed
etc/jupyter/jupyter_server_config.d/vramplan.json): in `jupyter server` / `jupyter lab`, Voila's
own extension pages (/voila/render/...) would load MathJax from cdnjs on every visit.
"""
from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import ipaddress
import os
import sys
import uuid

CULL_IDLE_S = 120          # a kernel with no page connected for this long is shut down
CULL_INTERVAL_S = 30       # how often idle kernels are looked for
IOPUB_TIMEOUT_S = 60       # the first output of a kernel that starts while others do
STARTUP_TIMEOUT_S = 120    # kernel start under load
START_SLOTS = max(1, os.cpu_count() or 1)   # pages starting at once (kernel import + first run)
CONNECT_WAIT_S = 30        # a sent page keeps its turn until its browser connects, this long at most


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


class StartQueue:
    """Pages whose kernel starts and runs the notebook, at most `slots` at a time; the others
    wait in arrival order. `take()` gives a ticket (a future, resolved at its turn),
    `ahead(ticket)` how many tickets wait before it, `give_back(ticket)` ends its turn or its
    wait. `wait_change()` returns when any position moved."""

    def __init__(self, slots: int = START_SLOTS):
        self.slots = max(1, int(slots))
        self.running = 0
        self.waiting: list[asyncio.Future] = []
        self._event: asyncio.Event | None = None

    def take(self) -> asyncio.Future:
        ticket = asyncio.get_running_loop().create_future()
        if self.running < self.slots and not self.waiting:
            self.running += 1
            ticket.set_result(True)
        else:
            self.waiting.append(ticket)
        return ticket

    def ahead(self, ticket: asyncio.Future) -> int | None:
        """Tickets waiting before this one; None when it is not waiting."""
        try:
            return self.waiting.index(ticket)
        except ValueError:
            return None

    def give_back(self, ticket: asyncio.Future) -> None:
        if ticket in self.waiting:        # left while waiting: its kernel never starts
            self.waiting.remove(ticket)
            ticket.cancel()
        elif ticket.done() and not ticket.cancelled():
            self.running -= 1
        while self.running < self.slots and self.waiting:
            nxt = self.waiting.pop(0)
            if not nxt.done():
                self.running += 1
                nxt.set_result(True)
        self._notify()

    def _notify(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait_change(self, timeout: float = 5.0) -> None:
        if self._event is None:
            self._event = asyncio.Event()
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except asyncio.TimeoutError:
            pass


class QueuedKernels:
    """The kernel manager as one page's handler sees it: `start_kernel` answers at once with
    the id the kernel will have (so Voila sends the page, spinner first) and the kernel starts
    when the page's turn in the `StartQueue` comes; `get_kernel` of that id is the awaitable
    Voila's template waits on. Everything else is the server's kernel manager."""

    def __init__(self, km, queue: StartQueue):
        self._km, self.queue = km, queue
        self.ticket: asyncio.Future | None = None
        self.task: asyncio.Future | None = None
        self.kernel_id: str | None = None
        self.started = False

    def __getattr__(self, name):
        return getattr(self._km, name)

    def start_kernel(self, kernel_id: str | None = None, **kwargs) -> str:
        self.kernel_id = kernel_id or str(uuid.uuid4())
        self.ticket = self.queue.take()
        self.task = asyncio.ensure_future(self._start(self.kernel_id, kwargs))
        return self.kernel_id

    async def _start(self, kernel_id: str, kwargs: dict):
        await self.ticket
        self.started = True
        started = self._km.start_kernel(kernel_id=kernel_id, **kwargs)
        if asyncio.iscoroutine(started) or isinstance(started, asyncio.Future):
            started = await started
        return self._km.get_kernel(started)

    def get_kernel(self, kernel_id: str):
        if kernel_id == self.kernel_id and self.task is not None:
            return self.task
        return self._km.get_kernel(kernel_id)

    def ahead(self) -> int | None:
        return None if self.ticket is None else self.queue.ahead(self.ticket)

    async def done_when_connected(self, timeout_s: float = CONNECT_WAIT_S) -> None:
        """The page is sent; its browser still loads the widgets: the turn ends when the page
        connects to its kernel (or the kernel is gone, or after `timeout_s`)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        connections = getattr(self._km, "_kernel_connections", {})
        try:
            while loop.time() < end and self.kernel_id in self._km \
                    and not connections.get(self.kernel_id, 0):
                await asyncio.sleep(0.25)
        finally:
            self.done()

    def done(self) -> None:
        """The page is sent (or its visitor left): the next page's turn."""
        if self.ticket is not None:
            ticket, self.ticket = self.ticket, None
            self.queue.give_back(ticket)
            if not self.started and self.task is not None:
                self.task.cancel()


def queue_script(ahead: int) -> str:
    """The line a waiting page shows in its spinner (an inline script; no request)."""
    if ahead <= 0:
        text = "Starting the planner: you are next"
    else:
        text = (f"Starting the planner: {ahead} visitor{'s' if ahead != 1 else ''} "
                "ahead of you")
    return ('<script>(function (t) { var e = document.getElementById("loading_text");'
            f' if (e) {{ e.textContent = t; }} }})({text!r});</script>\n')


_TRIM = {"handle": None}


def _libc_trim() -> None:
    """Collect garbage and hand the C heap's free pages back to the system (glibc)."""
    import gc
    _TRIM["handle"] = None
    gc.collect()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: nothing to trim


def trim_soon(delay_s: float = 2.0) -> None:
    """One trim shortly after a burst of kernel shutdowns."""
    if _TRIM["handle"] is None:
        try:
            _TRIM["handle"] = asyncio.get_running_loop().call_later(delay_s, _libc_trim)
        except RuntimeError:
            _libc_trim()


def trim_after_shutdown(km) -> None:
    """Wrap the kernel manager's shutdown_kernel (page beacon, culler, server exit) so that
    the server gives back what the kernel's connections and messages held."""
    original = km.shutdown_kernel

    async def shutdown_kernel(kernel_id, *args, **kwargs):
        try:
            result = original(kernel_id, *args, **kwargs)
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                result = await result
            return result
        finally:
            trim_soon()

    km.shutdown_kernel = shutdown_kernel


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
    return [{"module": "vramplan.commands.voila_server"}]


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
    visitor's kernel reads it from the cache (vramplan.ui.altair_offline)."""
    import subprocess
    try:
        subprocess.Popen([sys.executable, "-c", "from vramplan.ui.altair_offline import "
                          "enable_offline; enable_offline()"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    except OSError:
        pass  # the first kernel builds it instead


MALLOC_MARK = "VRAMPLAN_SERVER_PYTHONMALLOC"


def main(argv: list[str] | None = None) -> None:
    # `vramplan app` starts the server with PYTHONMALLOC=malloc: Python's own allocator keeps a
    # 256 KiB arena while one object in it lives, which `malloc_trim` cannot give back; on the
    # C allocator it can. (Measured after 4 pages: +13 % over idle with trim alone, +11 % with
    # both, within this machine's noise.) Kernels, started from this environment, keep
    # Python's default allocator.
    if os.environ.pop(MALLOC_MARK, None):
        os.environ.pop("PYTHONMALLOC", None)
    warm_chart_cache()
    _app_class().launch_instance(argv=argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
