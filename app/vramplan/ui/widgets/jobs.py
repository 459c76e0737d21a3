"""Long work off the kernel's message loop: `run(work, done)` computes `work()` in a thread
and calls `done(result)` (or `done(exception)`) on the kernel's event loop, so the page stays
responsive; one computation runs at a time, and a newer `run` on the same `Jobs` makes older
requests void (skipped if not started, their results dropped if they were). Outside a kernel
(tests, scripts) it runs at once. No widgets here."""
from __future__ import annotations

import contextvars
import threading
from typing import Any, Callable


def kernel():
    """The running IPython kernel, or None (plain Python, pytest)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return None
    ip = get_ipython()
    return getattr(ip, "kernel", None)


class Jobs:
    def __init__(self, name: str = "vramplan-job", background: bool | None = None):
        self.name = name
        self.background = background
        self._gen = 0
        self._lock = threading.Lock()
        self._work_lock = threading.Lock()      # one computation at a time

    def run(self, work: Callable[[], Any], done: Callable[[Any], None]) -> None:
        with self._lock:
            self._gen += 1
            gen = self._gen
        k = kernel()
        loop = getattr(k, "io_loop", None)
        if loop is None or self.background is False:
            done(_call(work))
            return

        ctx = contextvars.copy_context()        # the caller's (the page's language)

        def thread():
            with self._work_lock:
                if gen != self._gen:            # a newer request came in: skip this one
                    return
                result = ctx.copy().run(_call, work)
            loop.add_callback(lambda: gen == self._gen and ctx.copy().run(done, result))

        threading.Thread(target=thread, name=self.name, daemon=True).start()


def _call(work):
    try:
        return work()
    except Exception as exc:  # reported by `done`, never raised into the loop
        return exc


def after_paint(widget, fn: Callable[[], None]) -> None:
    """Call `fn()` once `widget` has a view on the page (the front end reports views through
    the widget's `_view_count`); at once outside a kernel. Heavy work started after the first
    paint does not compete with the page for the kernel: while the browser fetches the
    widgets' states (Voila's widget manager gives the kernel 4 s, then falls back to one
    request per widget), a thread importing altair would slow every reply.

    There is no timer: a widget made while the browser still fetches the states refers to
    models (shared layouts, styles) the browser does not have yet, and the widget manager
    logs "widget model not found" for each reference. A view exists only once every model
    of the first screen is in the browser, so the panels made after it are always safe
    (with the browser's CPU throttled 12x, a 15 s timer gave 30 such errors per page)."""
    loop = getattr(kernel(), "io_loop", None)
    if loop is None or widget._view_count:       # no kernel, or already on the page (a
        fn()                                     # language switch)
        return
    done = []

    def seen(change):
        if change["new"] and not done:
            done.append(True)
            widget.unobserve(seen, "_view_count")
            loop.add_callback(fn)

    if widget._view_count is None:
        widget._view_count = 0                  # start counting views
    widget.observe(seen, "_view_count")
