"""The client of the measurement worker (`python -m vramplan.measure.worker`): start one
measurement in a process of its own, read its JSON-line events, hand them to a job, cancel it
by killing the process group.

    w = Worker(job, post)           post(fn): run fn on the caller's loop (default: at once)
    w.start({"job": "trace", "scenario": sc.to_dict()})
    w.cancel()                      kills the process (its whole group) and marks cancelled

`job` is any object with `start(request)`, `progress(phase, k, n)`, `sample(row)`,
`finish(result)`, `fail(message)`, `cancel()` and `running` (the page's state is
`ui.state.measure_state.Job`). A process, not a thread: torch's import and a traced step cannot be
interrupted from another thread, a killed process can (and gives back what it held). Events
after a cancel, or from a process an earlier start left, are dropped.
"""
from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from .. import safejson
from ..errors import VramplanError
from .worker import PARENT_ENV


def package_root() -> str:
    """The folder holding `vramplan` (so the worker imports this very package)."""
    return str(Path(__file__).resolve().parents[2])


class Worker:
    """Runs `job`'s requests in `python -m vramplan.measure.worker`; events are handed to the
    job through `post` (the page's loop; default: called at once, from the reader thread)."""

    def __init__(self, job: Any, post: Callable[[Callable[[], None]], None] | None = None,
                 python: str | None = None):
        self.job = job
        self.post = post or (lambda fn: fn())
        self.python = python or sys.executable
        self.proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self, request: dict) -> None:
        self.job.start(request)
        env = dict(os.environ)
        root = package_root()
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        env.setdefault("PYTHONUNBUFFERED", "1")
        env[PARENT_ENV] = str(os.getpid())     # the worker ends itself when this process goes
        try:
            proc = subprocess.Popen(
                [self.python, "-m", "vramplan.measure.worker"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                start_new_session=True)
        except OSError as exc:
            self.job.fail(f"could not start the worker process: {exc}")
            return
        with self._lock:
            self.proc = proc
        self._thread = threading.Thread(target=self._read, args=(proc, request),
                                        name=f"vramplan-{self.job.kind}", daemon=True)
        self._thread.start()

    def _current(self, proc) -> bool:
        with self._lock:
            return proc is self.proc

    def _read(self, proc: subprocess.Popen, request: dict) -> None:
        errs: collections.deque = collections.deque(maxlen=8)
        drain = threading.Thread(target=lambda: errs.extend(proc.stderr), daemon=True)
        drain.start()
        ended = False
        try:
            import json
            proc.stdin.write(json.dumps(request, allow_nan=False))
            proc.stdin.close()
        except (OSError, ValueError):    # it died at once: its stderr says why
            pass
        for line in proc.stdout:
            if not self._current(proc):
                break
            try:
                ev = safejson.loads(line, "worker output")
            except VramplanError:
                continue                  # a stray line (a library printing): not an event
            if isinstance(ev, dict):
                ended = ended or ev.get("event") in ("result", "error")
                self.post(lambda ev=ev, p=proc: self._on_event(p, ev))
        rc = proc.wait()
        drain.join(timeout=2)
        if not ended:
            tail = next((x.strip() for x in reversed(errs) if x.strip()), "")
            self.post(lambda: self._on_exit(proc, rc, tail))

    def _on_event(self, proc, ev: dict) -> None:
        if not self._current(proc):
            return
        kind = ev.get("event")
        if kind == "progress":
            self.job.progress(str(ev.get("phase")), ev.get("k") or 0, ev.get("n") or 0)
        elif kind == "sample" and isinstance(ev.get("sample"), dict):
            self.job.sample(ev["sample"])
        elif kind == "result":
            self.job.finish(ev.get("result"))
        elif kind == "error":
            self.job.fail(str(ev.get("message") or "the measurement failed"))

    def _on_exit(self, proc, rc: int, tail: str) -> None:
        if self._current(proc) and self.job.running:
            why = f": {tail}" if tail else ""
            self.job.fail(f"the worker process ended without a result (exit {rc}){why}")

    def cancel(self) -> bool:
        """Stop the run: kill the worker's process group, mark the job cancelled."""
        with self._lock:
            proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, AttributeError):
                proc.kill()
            proc.wait(timeout=10)
        return self.job.cancel()

    @property
    def pid(self) -> int | None:
        with self._lock:
            return self.proc.pid if self.proc is not None else None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the reader to see the process end (tests, scripts): True when it did."""
        t = self._thread
        if t is None:
            return True
        t.join(timeout)
        return not t.is_alive()


def poster(loop) -> Callable[[Callable[[], None]], None] | None:
    """`post` for a Worker on the kernel's io loop (None outside a kernel)."""
    if loop is None:
        return None
    return lambda fn: loop.add_callback(fn)
