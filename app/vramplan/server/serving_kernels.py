"""The kernels behind `vramplan app`'s pages: the start queue (pages start their kernel in
turn), the guards around Jupyter's culler, and giving memory back after shutdowns. Used by
`voila_server` (the why of each is in its docstring); no Voila import here, so the queue and
the guards are tested without a server (tests/test_serving_kernels.py)."""
from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import uuid

START_SLOTS = max(1, os.cpu_count() or 1)   # pages starting at once (kernel import + first run)
CONNECT_WAIT_S = 30        # a sent page keeps its turn until its browser connects, this long at most


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
    the server gives back what the kernel's connections and messages held. While a kernel's
    shutdown is under way its id is in `km._vp_closing` (`guard_culling` reads it)."""
    original = km.shutdown_kernel
    closing = km.__dict__.setdefault("_vp_closing", set())

    async def shutdown_kernel(kernel_id, *args, **kwargs):
        closing.add(kernel_id)
        try:
            result = original(kernel_id, *args, **kwargs)
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                result = await result
            return result
        finally:
            closing.discard(kernel_id)
            trim_soon()

    km.shutdown_kernel = shutdown_kernel


def cullable(km, kernel_id: str) -> bool:
    """May Jupyter's culler look at this kernel? Not while it starts: the server gives a
    kernel its `last_activity` only once the kernel's process is up (reading it before
    raised "The 'last_activity' trait of a ServerKernelManager instance expected a datetime,
    not the NoneType None" in the culler, every interval while the kernel started). Not while
    its shutdown is under way (the page's beacon): the culler shut such kernels down a
    second time."""
    kernel = km._kernels.get(kernel_id)
    if kernel is None or kernel_id in km.__dict__.get("_vp_closing", ()):
        return False
    has_value = getattr(kernel, "trait_has_value", None)
    started = has_value("last_activity") if has_value else \
        getattr(kernel, "last_activity", None) is not None
    return bool(started)


def guard_culling(km) -> None:
    """Wrap the kernel manager's cull_kernel_if_idle (called for every kernel each
    cull interval) so that it skips the kernels `cullable` refuses."""
    original = km.cull_kernel_if_idle

    async def cull_kernel_if_idle(kernel_id):
        if not cullable(km, kernel_id):
            return None
        result = original(kernel_id)
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            result = await result
        return result

    km.cull_kernel_if_idle = cull_kernel_if_idle
