"""The server side of benchmarks/load.py: its memory (the server and every process under it),
its kernel count, its start-up helpers and pre-heated pool, and the debug memory census.

Imported by load.py, which puts tests/browser (`serving`) on sys.path."""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import psutil

import serving

MIB = 2 ** 20


class Sampler(threading.Thread):
    """Samples the server tree's RSS and kernel count every `step` seconds."""

    def __init__(self, proc, step: float = 0.25):
        super().__init__(daemon=True, name="rss-sampler")
        self.proc, self.step = proc, step
        self.peak = 0
        self.peak_kernels = 0
        self.max_load = 0.0
        self.samples: list[tuple[float, int, int]] = []   # (t, rss, kernels)
        self._halt = threading.Event()
        self.t0 = time.monotonic()

    def run(self):
        while not self._halt.is_set():
            rss, k = serving.tree_rss(self.proc), len(serving.kernels(self.proc))
            self.samples.append((time.monotonic() - self.t0, rss, k))
            self.peak = max(self.peak, rss)
            self.peak_kernels = max(self.peak_kernels, k)
            self.max_load = max(self.max_load, os.getloadavg()[0])
            self._halt.wait(self.step)

    def stop(self):
        self._halt.set()
        self.join(timeout=5)


def helpers_gone(proc) -> bool:
    """The server's start-up helper (the chart cache warm-up) has exited."""
    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return True
    for c in kids:
        try:
            if "altair_offline" in " ".join(c.cmdline()):
                return False
        except psutil.Error:
            continue
    return True


def wait_pool(proc, log_name: str, n: int, timeout: float = 240) -> bool:
    """Wait until Voila logs its pre-heated pool as full (kernels started and rendered)."""
    log = serving.ARTIFACTS / log_name
    want = log.read_text(errors="replace").count("is filled with") + 1
    return serving.wait_until(
        lambda: log.read_text(errors="replace").count("is filled with") >= want, timeout)


def own_rss(proc) -> int:
    """Resident bytes of the server process alone (no kernels, no helpers)."""
    try:
        return psutil.Process(proc.pid).memory_info().rss
    except psutil.Error:
        return 0


LOG_EVENTS = {  # server log lines worth counting under load
    "iopub_timeouts": "Timeout waiting for IOPub output",
    "kernels_culled": "Culling 'idle' kernel",
    "kernels_died": "Kernel died",
    "cell_errors": "Error at server while executing cell",
    "culler_errors": "while checking the idle duration",
}


CENSUS_DIR = serving.ARTIFACTS / "memory-census"


def census(proc, n: int, timeout: float = 120) -> dict | None:
    """Ask a server started with --memory-census for its n-th census (SIGUSR1;
    vramplan/server/server_memory.py) and read it back, bytes in MiB."""
    path = CENSUS_DIR / f"census-{n}.json"
    os.kill(proc.pid, signal.SIGUSR1)
    if not serving.wait_until(path.exists, timeout):
        return None
    c = json.loads(path.read_text())
    for k in ("rss", "traced", "traced_peak"):
        c[k + "_mib"] = round(c.pop(k) / MIB, 2)
    for site in c.get("sites_grown", []):
        site["size_diff_kib"] = round(site.pop("size_diff") / 1024, 1)
    return c


def settled_rss(proc, seconds: float = 3.0, step: float = 0.5) -> int:
    """The tree's RSS once it stops moving: the last of `seconds` of samples."""
    vals = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        vals.append(serving.tree_rss(proc))
        time.sleep(step)
    return vals[-1] if vals else serving.tree_rss(proc)

