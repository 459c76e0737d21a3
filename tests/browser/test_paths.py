"""Every way of serving the planner makes no request outside the machine (issue 10, item 6).

`make app` / `vramplan app` is covered by test_planner_page.py and test_serving.py. Here, each
other way a person serves it, each opened in headless Chromium until the verdict shows:

- plain `voila notebooks/planner.ipynb` (from the repository root, and from notebooks/);
- `jupyter server` with Voila's extension, at /voila/render/notebooks/planner.ipynb;
- JupyterLab (`make lab`): open the notebook, run its cell;
- Binder: an environment built from binder/ alone (runtime.txt, requirements.txt, postBuild),
  started through binder/start, its default URL (the Voila planner) and JupyterLab.

Each test fails on any browser request to a host other than the server, and on any DNS lookup
or connection to another host by the server or its kernels (tests/offline/sitecustomize.py on
their PYTHONPATH). None of them sets $JUPYTER_PATH: the template must be found as installed.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

from serving import ARTIFACTS, CHROMIUM, LOCAL_HOSTS, ROOT, free_port

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}"),
]

GUARD = ROOT / "tests" / "offline"
VERDICT = ".vp-verdict-title"
T_START = 180          # s: a server up (JupyterLab imports a lot on two busy cores)
T_PAGE = 180_000       # ms: page + kernel + the planner's first estimate
CDN_LINK = re.compile(r"""<(?:link|script)[^>]+(?:href|src)=["']https?://""")


# -- servers ----------------------------------------------------------------------------------

def served_env(tmp: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a server under test: a fresh HOME (no ~/.jupyter of the
    developer's), no JUPYTER_* variables (so no $JUPYTER_PATH), the offline guard on."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JUPYTER", "PYTHONPATH", "VIRTUAL_ENV"))}
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.get("VRAMPLAN_CACHE_DIR") or Path.home() / ".cache" / "vramplan")
    with contextlib.suppress(OSError):
        cache.mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), PYTHONPATH=str(GUARD), VRAMPLAN_OFFLINE_LOG=str(tmp / "outside.log"),
               VRAMPLAN_CACHE_DIR=str(cache))  # the chart bundle, built once per machine
    env.update(extra)
    return env


def outside_calls(tmp: Path) -> list[str]:
    log = tmp / "outside.log"
    return log.read_text().splitlines() if log.exists() else []


@contextlib.contextmanager
def server(cmd: list[str], cwd: Path, env: dict, ready: str, log_name: str):
    """Start `cmd` (listening on the port in its arguments), wait until GET `ready` answers 200;
    yields the base URL."""
    ARTIFACTS.mkdir(exist_ok=True)
    port = next(a.split("=", 1)[1] for a in cmd if a.startswith("--port=") or
                a.startswith("LAB_PORT="))
    base = f"http://127.0.0.1:{port}"
    log_path = ARTIFACTS / log_name
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + T_START
            while True:
                if proc.poll() is not None:
                    raise AssertionError(f"{cmd[:3]} exited with {proc.returncode}:\n"
                                         f"{log_path.read_text()[-4000:]}")
                try:
                    with urllib.request.urlopen(base + ready, timeout=5) as r:
                        if r.status == 200:
                            break
                except (urllib.error.URLError, OSError):
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError(f"{cmd[:3]} did not come up; see {log_path}")
                time.sleep(0.5)
            yield base
        finally:
            stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (it shuts its kernels down; through `make`, the
    server too), then SIGKILL to what is left of the group."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # kernels the server left behind in its group


# -- the browser ------------------------------------------------------------------------------

def _outside(url: str) -> bool:
    return url.startswith(("http://", "https://", "ws://", "wss://")) and \
        (urlparse(url).hostname or "") not in LOCAL_HOSTS


@contextlib.contextmanager
def watched_page(browser, shot: str):
    """A page whose requests outside the machine are recorded (and aborted, so that nothing
    waits on the network); yields (page, outside requests). Saves a screenshot."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    outside: list[str] = []
    context.on("request", lambda r: outside.append(r.url) if _outside(r.url) else None)
    context.route(lambda url: _outside(url), lambda route: route.abort())
    page = context.new_page()
    try:
        yield page, outside
    finally:
        with contextlib.suppress(Exception):
            page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
        context.close()


def check_voila_page(browser, url: str, shot: str) -> str:
    """Open a Voila page of the planner: the verdict shows, nothing is asked of another host."""
    with watched_page(browser, shot) as (page, outside):
        page.goto(url, timeout=T_PAGE, wait_until="domcontentloaded")
        page.locator(VERDICT).first.wait_for(timeout=T_PAGE)
        verdict = page.locator(VERDICT).first.inner_text().strip()
        page.wait_for_timeout(1500)  # late loads (fonts, MathJax) would come now
        html = page.content()
    assert verdict.startswith(("Fits on", "Does not fit on")), verdict
    assert not outside, f"requests outside the server: {outside}"
    assert not CDN_LINK.search(html), CDN_LINK.search(html).group(0)
    return html


def no_autosave(home: Path) -> None:
    """JupyterLab saves an open notebook every two minutes: here it would write the running
    kernel's metadata into the checkout's notebooks/planner.ipynb. A user setting in the
    test's HOME turns that off."""
    settings = home / ".jupyter" / "lab" / "user-settings" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "plugin.jupyterlab-settings").write_text('{"autosave": false}\n')


def run_in_jupyterlab(browser, url: str, shot: str) -> None:
    """JupyterLab at `url` (the planner notebook open): once its kernel is idle, run the cell,
    see the verdict."""
    with watched_page(browser, shot) as (page, outside):
        page.goto(url, timeout=T_PAGE, wait_until="domcontentloaded")
        editor = page.locator(".jp-NotebookPanel .jp-Cell .cm-content").first
        editor.wait_for(timeout=T_PAGE)
        page.locator(".jp-StatusBar-Widget", has_text="(ipykernel) | Idle").first.wait_for(
            timeout=T_PAGE)
        editor.click()
        page.keyboard.press("Control+Enter")  # run the cell, stay on it
        accept = page.locator(".jp-Dialog .jp-mod-accept")  # "Select Kernel", if it still asks
        with contextlib.suppress(Exception):
            accept.wait_for(timeout=3000)
            accept.click()
        page.locator(f".jp-OutputArea {VERDICT}").first.wait_for(timeout=T_PAGE)
        verdict = page.locator(VERDICT).first.inner_text().strip()
        page.wait_for_timeout(1500)
        output = page.locator(".jp-NotebookPanel .jp-OutputArea").first.inner_text()
    assert verdict.startswith(("Fits on", "Does not fit on")), verdict
    assert "Traceback" not in output, output[:2000]
    assert not outside, f"requests outside the server: {outside}"


# -- plain Voila and Jupyter's Voila extension ------------------------------------------------

def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


@pytest.mark.parametrize("where", ["root", "notebooks"])
def test_plain_voila(browser, tmp_path, where):
    """`voila notebooks/planner.ipynb` (the notebook's metadata picks the template) and
    `cd notebooks && voila planner.ipynb` (notebooks/voila.json too): the template is the
    installed vramplan-lab; `?template=lab` does not bring the CDN links back from notebooks/."""
    pytest.importorskip("voila")
    port = free_port()
    cwd, nb = (ROOT, "notebooks/planner.ipynb") if where == "root" else \
        (ROOT / "notebooks", "planner.ipynb")
    cmd = [_bin("voila"), nb, f"--port={port}", "--no-browser", "--Voila.ip=127.0.0.1"]
    with server(cmd, cwd, served_env(tmp_path), "/voila/static/voila.js",
                f"paths-voila-{where}.log") as base:
        check_voila_page(browser, base + "/", f"paths-voila-{where}.png")
        if where == "notebooks":
            check_voila_page(browser, base + "/?template=lab", "paths-voila-override.png")
    assert not outside_calls(tmp_path), outside_calls(tmp_path)


def test_jupyter_server_voila_extension(browser, tmp_path):
    """`jupyter server` in the checkout, the planner at /voila/render/...: the template from
    the notebook's metadata, and no MathJax from cdnjs (the installed server setting)."""
    pytest.importorskip("voila")
    port = free_port()
    cmd = [_bin("jupyter"), "server", f"--port={port}", "--ip=127.0.0.1", "--no-browser",
           "--allow-root", "--IdentityProvider.token=", "--ServerApp.password="]
    with server(cmd, ROOT, served_env(tmp_path), "/api", "paths-jupyter-server.log") as base:
        html = check_voila_page(browser, base + "/voila/render/notebooks/planner.ipynb",
                                "paths-jupyter-server.png")
    assert '"fullMathjaxUrl": null' in html
    assert not outside_calls(tmp_path), outside_calls(tmp_path)


# -- Binder -----------------------------------------------------------------------------------

BINDER = ROOT / "binder"
BINDER_VENVS = ROOT / ".venv-binder"
TORCH_PIN = "torch==2.13.0"   # the Makefile's pin: the CPU wheel on this machine's disk


def binder_requirements() -> str:
    """binder/requirements.txt as this machine can install it. Binder reaches the PyTorch CPU
    index and installs `torch==2.13.0+cpu` from it; here only PyPI (and the local wheel
    folder) can be reached, so the extra index line is dropped and torch is pinned as the
    Makefile pins it, which takes the same CPU build from local disk. Every other line is
    Binder's own."""
    out = []
    for line in (BINDER / "requirements.txt").read_text().splitlines():
        if line.startswith("--extra-index-url") and "download.pytorch.org" in line:
            continue
        if re.match(r"torch==", line):
            line = TORCH_PIN
        out.append(line)
    return "\n".join(out) + "\n"


def binder_python() -> str:
    """An interpreter of the version binder/runtime.txt names."""
    want = (BINDER / "runtime.txt").read_text().strip()
    m = re.fullmatch(r"python-(\d+)\.(\d+)", want)
    assert m, f"binder/runtime.txt: {want!r}"
    version = (int(m[1]), int(m[2]))
    if sys.version_info[:2] == version:
        return getattr(sys, "_base_executable", sys.executable)
    found = shutil.which(f"python{version[0]}.{version[1]}")
    if not found:
        pytest.skip(f"binder/runtime.txt asks for Python {version[0]}.{version[1]}: none here")
    return found


@pytest.fixture(scope="module")
def binder_venv() -> Path:
    """The Binder environment, from binder/ alone: a fresh venv of runtime.txt's Python with
    requirements.txt installed. Cached in .venv-binder/<hash of what defines it>/ (a cold
    build takes about three minutes); a venv is used only once complete, older ones are
    removed, and a lock keeps two test runs from building at once."""
    reqs = binder_requirements()
    key = hashlib.sha256(((BINDER / "runtime.txt").read_text() + reqs).encode()).hexdigest()[:16]
    venv = BINDER_VENVS / key
    done = venv / ".complete"
    BINDER_VENVS.mkdir(parents=True, exist_ok=True)
    ARTIFACTS.mkdir(exist_ok=True)
    with open(BINDER_VENVS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return venv
        for old in BINDER_VENVS.iterdir():
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
        log_path = ARTIFACTS / "binder-venv.log"
        with open(log_path, "w") as log:
            t0 = time.monotonic()
            subprocess.run([binder_python(), "-m", "venv", str(venv)], check=True, stdout=log,
                           stderr=subprocess.STDOUT, timeout=300)
            (venv / "requirements.txt").write_text(reqs)
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-input"]
            for args in (["--upgrade", "pip"], ["-r", str(venv / "requirements.txt")]):
                r = subprocess.run(pip + args, stdout=log, stderr=subprocess.STDOUT,
                                   timeout=1500)
                assert r.returncode == 0, f"pip install {args} failed: see {log_path}"
            log.write(f"\nbuilt in {time.monotonic() - t0:.0f} s\n")
        done.write_text(key + "\n")
    return venv


def binder_env(venv: Path, tmp: Path, guarded: bool) -> dict[str, str]:
    """What Binder runs with: its environment's bin first on PATH, a HOME of its own; the
    offline guard on for servers (not for postBuild, whose pip needs the package index)."""
    env = served_env(tmp)
    if not guarded:
        for k in ("PYTHONPATH", "VRAMPLAN_OFFLINE_LOG"):
            env.pop(k)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


@pytest.fixture(scope="module")
def binder_built(binder_venv, tmp_path_factory):
    """binder/postBuild run in the Binder environment with HOME a fresh folder (as Binder does,
    once the repository is in the image); yields (venv, folder whose home/ is that HOME)."""
    tmp = tmp_path_factory.mktemp("binder")
    t0 = time.monotonic()
    log_path = ARTIFACTS / "binder-postbuild.log"
    with open(log_path, "w") as log:
        r = subprocess.run(["bash", str(BINDER / "postBuild")], cwd=ROOT, stdout=log,
                           stderr=subprocess.STDOUT, timeout=900,
                           env=binder_env(binder_venv, tmp, guarded=False))
    assert r.returncode == 0, log_path.read_text()[-4000:]
    (ARTIFACTS / "binder-timings.txt").write_text(f"postBuild {time.monotonic() - t0:.0f} s\n")
    return binder_venv, tmp


def wait_for(predicate, timeout: float):
    deadline = time.monotonic() + timeout
    while not (found := predicate()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def landing(url: str) -> str:
    """Where GET `url` sends a browser (the path of its redirect)."""
    try:
        urllib.request.build_opener(_NoRedirect).open(url, timeout=60)
    except urllib.error.HTTPError as exc:
        if exc.code in (301, 302, 303, 307):
            return urlparse(exc.headers["Location"]).path
        raise
    return urlparse(url).path


@pytest.mark.slow
def test_binder(browser, binder_built):
    """binder/start jupyter lab ... after postBuild: the default URL is the Voila planner;
    JupyterLab runs the planner notebook; nothing leaves the machine."""
    venv, tmp = binder_built
    no_autosave(tmp / "home")
    port = free_port()
    cmd = [str(BINDER / "start"), "jupyter", "lab", "--ip=127.0.0.1", f"--port={port}",
           "--no-browser", "--allow-root", "--IdentityProvider.token=", "--ServerApp.password="]
    with server(cmd, ROOT, binder_env(venv, tmp, guarded=True), "/api",
                "binder-server.log") as base:
        assert landing(base + "/") == "/voila/render/notebooks/planner.ipynb"
        html = check_voila_page(browser, base + "/", "binder-voila.png")
        assert '"fullMathjaxUrl": null' in html
        run_in_jupyterlab(browser, f"{base}/lab/tree/notebooks/planner.ipynb?reset",
                          "binder-lab.png")
    assert not outside_calls(tmp), outside_calls(tmp)


@pytest.mark.slow
def test_make_lab(browser, binder_built, tmp_path):
    """`make lab`'s own command line (the Makefile), run with the Binder environment's
    JupyterLab (so .venv need not hold the lab extra) and a HOME without Binder's config: open
    the notebook, run the cell."""
    venv, _ = binder_built
    no_autosave(tmp_path / "home")
    port = free_port()
    cmd = ["make", "-s", "lab", f"BIN={venv / 'bin'}", f"LAB_PORT={port}",
           "-o", ".venv/.installed-lab", "-o", ".venv/.installed"]
    log = ARTIFACTS / "paths-make-lab.log"
    with server(cmd, ROOT, binder_env(venv, tmp_path, guarded=True), "/api", log.name) as base:
        # the URL it prints, token and all, as a person opens it: JupyterLab with the notebook
        printed = re.compile(re.escape(base) + r"/lab\S*\?token=\w+")
        assert wait_for(lambda: printed.search(log.read_text()), 30), log.read_text()[-3000:]
        url = printed.search(log.read_text()).group(0)
        assert "/lab/tree/notebooks/planner.ipynb?token=" in url, url
        run_in_jupyterlab(browser, url, "paths-make-lab.png")
    assert not outside_calls(tmp_path), outside_calls(tmp_path)
