"""`vramplan app`: serve the planner (notebooks/planner.ipynb) with Voila.

The page must make no request outside the server, so Voila runs with the `vramplan-lab`
template shipped in `vramplan/ui/templates/voila/templates/` (Voila's `lab` template without
its CDN links). Voila finds templates on the Jupyter data path; this command puts
`vramplan/ui/templates` first on $JUPYTER_PATH, so the same template is used from a checkout,
an editable install or a wheel. `make app`, Binder (binder/start) and tests/browser all go
through here or set the same path.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

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
                  open_browser: bool = False, extra: list[str] | None = None) -> list[str]:
    """The Voila command line that serves the planner."""
    cmd = [sys.executable, "-m", "voila", str(notebook), f"--port={port}", f"--Voila.ip={ip}",
           f"--template={TEMPLATE}", "--theme=light",
           "--VoilaConfiguration.show_tracebacks=False"]
    if not open_browser:
        cmd.append("--no-browser")
    return cmd + list(extra or [])


def voila_env(environ=None) -> dict[str, str]:
    env = dict(os.environ if environ is None else environ)
    env["JUPYTER_PATH"] = jupyter_path(env)
    env.setdefault("JUPYTER_PLATFORM_DIRS", "1")  # silences a jupyter_core deprecation notice
    return env


def run(args) -> int:
    from ..errors import UnavailableError
    try:
        import voila  # noqa: F401
    except ImportError:
        raise UnavailableError("the planner needs the app extras: pip install 'vramplan[app]'")
    notebook = Path(args.notebook) if args.notebook else find_notebook()
    if not notebook.is_file():
        from ..errors import VramplanError
        raise VramplanError(f"no such notebook: {notebook}")
    cmd = voila_command(notebook, args.port, args.ip, args.open, args.voila_args)
    env = voila_env()
    if args.print_command:
        print(f"JUPYTER_PATH={shlex.quote(env['JUPYTER_PATH'])} {shlex.join(cmd)}")
        return 0
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
    p.add_argument("--notebook", default=None, help="notebook to serve "
                   "(default: notebooks/planner.ipynb)")
    p.add_argument("--print-command", action="store_true",
                   help="print the Voila command line instead of running it")
    p.add_argument("voila_args", nargs="*", metavar="VOILA_ARG",
                   help="extra Voila options, after `--` (e.g. -- --debug)")
    p.set_defaults(func=run)
