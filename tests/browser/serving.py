"""Start `vramplan app` for a test and read what it holds (kernels, memory)."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def app_server(*voila_args: str, app_args: tuple[str, ...] = (), env: dict | None = None,
               log_name: str = "voila-serving.log", start_timeout: float = 90):
    """`vramplan app` on a free port with extra Voila options; yields (base_url, process)."""
    ARTIFACTS.mkdir(exist_ok=True)
    port = free_port()
    log_path = ARTIFACTS / log_name
    log = open(log_path, "w")
    cmd = [sys.executable, "-m", "vramplan.cli", "app", "--port", str(port), "--ip",
           "127.0.0.1", *app_args]
    if voila_args:
        cmd += ["--", *voila_args]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})})
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + start_timeout
    try:
        while True:  # a static file: polling "/" would start a kernel per poll
            if proc.poll() is not None:
                raise AssertionError(f"vramplan app exited with {proc.returncode}:\n"
                                     f"{log_path.read_text()}")
            try:
                with urllib.request.urlopen(f"{base}/voila/static/voila.js", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise AssertionError(f"Voila did not come up; see {log_path}") from None
                time.sleep(0.3)
        yield base, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def kernels(proc: subprocess.Popen) -> list[psutil.Process]:
    """The kernel processes the server started (ipykernel children)."""
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for c in children:
        try:
            if "ipykernel" in " ".join(c.cmdline()):
                out.append(c)
        except psutil.Error:
            continue
    return out


def tree_rss(proc: subprocess.Popen) -> int:
    """Resident bytes of the server and every process under it."""
    total = 0
    try:
        root = psutil.Process(proc.pid)
        procs = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def wait_until(predicate, timeout: float, step: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def get(url: str, headers: dict | None = None, timeout: float = 120) -> tuple[int, str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
