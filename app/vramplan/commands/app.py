"""`vramplan app`: serve the planner (notebooks/planner.ipynb) with Voila.

The page must make no request outside the server, so Voila runs with the `vramplan-lab`
template shipped in `vramplan/ui/templates/voila/templates/` (Voila's `lab` template without
its CDN links). Voila finds templates on the Jupyter data path; this command puts
`vramplan/ui/templates` first on $JUPYTER_PATH, so the same template is used from a checkout,
an editable install or a wheel. `make app`, Binder (binder/start) and tests/browser all go
through here or set the same path. The install also copies the template into the environment's
share/jupyter (pyproject.toml's data-files), which is where plain `voila` and Jupyter's Voila
extension find it (notebooks/planner.ipynb's metadata and notebooks/voila.json name it).
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from ..server import voila_server

TEMPLATE = "vramplan-lab"
DEFAULT_PORT = 8866
NOTEBOOK_SOURCE = "from vramplan.ui import App\n\nApp()"


def templates_dir() -> Path:
    """The Jupyter data directory holding voila/templates/vramplan-lab."""
    return Path(__file__).resolve().parent.parent / "ui" / "templates"


def jupyter_path(environ=None) -> str:
    """$JUPYTER_PATH with the vramplan templates first."""
    environ = os.environ if environ is None else environ
    rest = [p for p in environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    first = str(templates_dir())
    return os.pathsep.join([first] + [p for p in rest if p != first])


def find_notebook() -> Path:
    """notebooks/planner.ipynb of the checkout; from a wheel, a generated copy of it."""
    repo_nb = Path(__file__).resolve().parents[3] / "notebooks" / "planner.ipynb"
    if repo_nb.is_file():
        return repo_nb
    import json
    out = Path(tempfile.mkdtemp(prefix="vramplan-app-")) / "planner.ipynb"
    out.write_text(json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": "planner",
                   "metadata": {}, "outputs": [], "source": NOTEBOOK_SOURCE}],
        "metadata": {"title": "vramplan", "kernelspec": {
            "display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    return out


def voila_command(notebook: str | os.PathLike, port: int = DEFAULT_PORT, ip: str = "127.0.0.1",
                  open_browser: bool = False, extra: list[str] | None = None,
                  preheat: int = 0, cull_idle_s: int = voila_server.CULL_IDLE_S,
                  cull_interval_s: int = voila_server.CULL_INTERVAL_S,
                  start_slots: int = voila_server.START_SLOTS) -> list[str]:
    """The command line that serves the planner: Voila through `voila_server` (Host check on
    loopback, the page's shutdown beacon honoured, idle kernels culled, timeouts for a busy
    machine, at most `start_slots` pages starting at once); `preheat` kernels kept started
    and imported ahead of visitors."""
    cmd = [sys.executable, "-m", "vramplan.server.voila_server", str(notebook),
           f"--port={port}", f"--Voila.ip={ip}", "--Voila.port_retries=0",
           f"--template={TEMPLATE}", "--theme=light",
           # `?template=lab` in a link would otherwise bring the lab template's CDN links back
           "--VoilaConfiguration.allow_template_override=NO",
           "--VoilaConfiguration.allow_theme_override=NO",
           "--VoilaConfiguration.show_tracebacks=False"]
    cmd += voila_server.culling_args(cull_idle_s, cull_interval_s) + voila_server.timeout_args()
    cmd.append(f"--PlannerVoila.start_slots={start_slots}")
    if preheat > 0:
        cmd += ["--VoilaConfiguration.preheat_kernel=True",
                f"--VoilaConfiguration.default_pool_size={preheat}"]
    if not open_browser:
        cmd.append("--no-browser")
    return cmd + list(extra or [])


def port_free(ip: str, port: int) -> bool:
    """Can this process listen on (ip, port)? (Voila would otherwise fail after we printed.)"""
    import socket
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((ip if ip not in ("localhost",) else "127.0.0.1", port))
        except OSError:
            return False
    return True


def writable_runtime(environ: dict) -> None:
    """Jupyter writes to its data and runtime folders under $HOME; with a read-only or missing
    HOME (a locked-down container) every page would answer 500. Point them at a private
    temporary folder then."""
    home = environ.get("HOME") or os.path.expanduser("~")
    if home and os.path.isdir(home) and os.access(home, os.W_OK):
        return
    base = tempfile.mkdtemp(prefix="vramplan-jupyter-")
    for var, sub in (("JUPYTER_DATA_DIR", "data"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTER_CONFIG_DIR", "config"), ("IPYTHONDIR", "ipython"),
                     ("MPLCONFIGDIR", "mpl")):
        if var not in environ:
            os.makedirs(os.path.join(base, sub), exist_ok=True)
            environ[var] = os.path.join(base, sub)


def voila_env(environ=None) -> dict[str, str]:
    env = dict(os.environ if environ is None else environ)
    env["JUPYTER_PATH"] = jupyter_path(env)
    env.setdefault("JUPYTER_PLATFORM_DIRS", "1")  # silences a jupyter_core deprecation notice
    ours = [k for k in voila_server.SERVER_ALLOCATOR if k not in env]  # see voila_server.main
    env.update({k: voila_server.SERVER_ALLOCATOR[k] for k in ours})
    if ours:
        env[voila_server.MALLOC_MARK] = ",".join(ours)
    writable_runtime(env)
    return env


def run(args) -> int:
    from ..errors import UnavailableError, VramplanError
    try:
        import voila  # noqa: F401
    except ImportError:
        raise UnavailableError("the planner needs the app extras: pip install 'vramplan[app]'")
    notebook = Path(args.notebook) if args.notebook else find_notebook()
    if not notebook.is_file():
        raise VramplanError(f"no such notebook: {notebook}")
    if args.preheat < 0:
        raise VramplanError(f"--preheat must be 0 or more kernels, got {args.preheat}")
    if args.start_slots < 1:
        raise VramplanError(f"--start-slots must be 1 or more pages, got {args.start_slots}")
    if args.cull_idle < 1 or args.cull_interval < 1:
        raise VramplanError(f"--cull-idle and --cull-interval must be >= 1 second, got "
                            f"{args.cull_idle} and {args.cull_interval}")
    cmd = voila_command(notebook, args.port, args.ip, args.open, args.voila_args,
                        preheat=args.preheat, cull_idle_s=args.cull_idle,
                        cull_interval_s=args.cull_interval, start_slots=args.start_slots)
    env = voila_env()
    if args.print_command:
        print(f"JUPYTER_PATH={shlex.quote(env['JUPYTER_PATH'])} {shlex.join(cmd)}")
        return 0
    if not port_free(args.ip, args.port):
        raise VramplanError(f"port {args.port} on {args.ip} is in use: pass another --port "
                            f"(e.g. --port {args.port + 1})")
    host = "localhost" if args.ip in ("0.0.0.0", "::", "127.0.0.1") else args.ip
    print(f"vramplan: serving the planner on http://{host}:{args.port}/ (Ctrl-C stops)",
          file=sys.stderr, flush=True)
    if os.name == "posix":
        os.execve(cmd[0], cmd, env)  # Voila takes this process: signals reach it directly
    return subprocess.call(cmd, env=env)  # pragma: no cover (Windows)


def register(subparsers) -> None:
    p = subparsers.add_parser("app", help="serve the planner web app (Voila)",
                              description="Serve the planner with Voila, without any request "
                                          "outside this server.")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port to listen on (default: {DEFAULT_PORT})")
    p.add_argument("--ip", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1; 0.0.0.0 for all)")
    p.add_argument("--open", action="store_true", help="open a browser tab")
    p.add_argument("--preheat", type=int, default=0, metavar="N",
                   help="keep N kernels started ahead of visitors (shared servers: the page "
                        "appears without waiting for a kernel to import; ~150 MiB each)")
    p.add_argument("--start-slots", type=int, default=voila_server.START_SLOTS, metavar="N",
                   help="pages that start their kernel at the same time; later visitors wait "
                        "in turn, their page saying how many are ahead (default: one per CPU, "
                        f"{voila_server.START_SLOTS} here)")
    p.add_argument("--cull-idle", type=int, default=voila_server.CULL_IDLE_S, metavar="S",
                   help="shut down a kernel no page has been connected to for S seconds "
                        f"(default: {voila_server.CULL_IDLE_S})")
    p.add_argument("--cull-interval", type=int, default=voila_server.CULL_INTERVAL_S,
                   metavar="S", help="look for such kernels every S seconds "
                                     f"(default: {voila_server.CULL_INTERVAL_S})")
    p.add_argument("--notebook", default=None, help="notebook to serve "
                   "(default: notebooks/planner.ipynb)")
    p.add_argument("--print-command", action="store_true",
                   help="print the Voila command line instead of running it")
    p.add_argument("voila_args", nargs="*", metavar="VOILA_ARG",
                   help="extra Voila options, after `--` (e.g. -- --debug)")
    p.set_defaults(func=run)
