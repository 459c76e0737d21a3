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

This module is also a Jupyter server extension (enabled by the installed
etc/jupyter/jupyter_server_config.d/vramplan.json): in `jupyter server` / `jupyter lab`, Voila's
own extension pages (/voila/render/...) would load MathJax from cdnjs on every visit.
"""
from __future__ import annotations

import ipaddress
import sys

CULL_IDLE_S = 120          # a kernel with no page connected for this long is shut down
CULL_INTERVAL_S = 30       # how often idle kernels are looked for
IOPUB_TIMEOUT_S = 60       # the first output of a kernel that starts while others do
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
    from tornado.web import HTTPError
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
        """The page handler: also sets the `_xsrf` cookie the page's shutdown beacon sends."""

        async def get(self, path=None):
            if path:  # Voila would redirect any other path to /voila/files/<path>
                raise HTTPError(404)
            self.xsrf_token  # noqa: B018 (reading it sets the cookie)
            return await super().get(path)

    class PlannerVoila(Voila):
        name = "vramplan-voila"

        def init_settings(self):
            settings = super().init_settings()
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


def main(argv: list[str] | None = None) -> None:
    warm_chart_cache()
    _app_class().launch_instance(argv=argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
