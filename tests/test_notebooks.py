"""The notebooks run top to bottom in a fresh kernel (what a JupyterLab or Binder user does
first), offline: the kernel runs with tests/offline/sitecustomize.py, which refuses and records
any DNS lookup or connection to a host other than this machine."""
import json
import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def run_offline(name: str, tmp_path: Path):
    """Execute notebooks/<name> in a fresh kernel with the offline guard; returns the executed
    notebook and the outside calls the kernel tried."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    log = tmp_path / "outside.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "tests" / "offline")] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
        "VRAMPLAN_OFFLINE_LOG": str(log), "HF_HUB_OFFLINE": "1"}
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute(env=env)
    return nb, (log.read_text().splitlines() if log.exists() else [])


def _errors(nb):
    return [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]


@pytest.mark.slow
def test_walkthrough_runs_offline_without_errors(tmp_path):
    nb, outside = run_offline("walkthrough.ipynb", tmp_path)
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    assert "fits:" in outputs
    assert "trace" in outputs and "estimate" in outputs
    assert not _errors(nb), _errors(nb)
    assert not outside, f"the walkthrough reached outside the machine: {outside}"


@pytest.mark.slow
def test_planner_notebook_runs_offline(tmp_path):
    """The planner's one cell, as JupyterLab runs it: the App widget is displayed."""
    nb, outside = run_offline("planner.ipynb", tmp_path)
    assert not _errors(nb), _errors(nb)
    shown = [o for c in nb.cells for o in c.get("outputs", [])
             if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert shown, "App() displayed no widget"
    assert not outside, f"the planner reached outside the machine: {outside}"


def test_notebooks_select_the_cdn_free_template():
    """Plain `voila` reads notebooks/voila.json in notebooks/ and the planner's metadata from
    anywhere: both name the template `vramplan app` uses, with `vramplan app`'s own culling
    and timeouts; pyproject.toml installs that template where Voila looks."""
    from vramplan.commands import app
    from vramplan.server import voila_server
    conf = json.loads((NOTEBOOKS / "voila.json").read_text())
    vc = conf["VoilaConfiguration"]
    assert vc["template"] == app.TEMPLATE and vc["allow_template_override"] == "NO"
    assert vc["show_tracebacks"] is False
    meta = json.loads((NOTEBOOKS / "planner.ipynb").read_text())["metadata"]["voila"]
    assert meta["template"] == app.TEMPLATE
    flat = {f"--{section}.{k}": v for section in ("MappingKernelManager", "VoilaExecutor")
            for k, v in conf[section].items()}
    for arg in voila_server.culling_args() + voila_server.timeout_args():
        name, value = arg.split("=", 1)
        assert str(flat.pop(name)) == value, name
    assert not flat, f"notebooks/voila.json sets more than `vramplan app` does: {flat}"
    toml = (ROOT / "pyproject.toml").read_text()
    assert '"share/jupyter/voila/templates/vramplan-lab" = ' \
           '["app/vramplan/ui/templates/voila/templates/vramplan-lab/*"]' in toml


def test_jupyter_server_extension_keeps_mathjax_off_the_cdn():
    """Enabled by the installed jupyter_server_config.d/vramplan.json: Voila's extension pages
    get mathjax_url / mathjax_config None (no cdnjs), unless a user configured them."""
    from types import SimpleNamespace

    from vramplan.server import voila_server
    conf = json.loads((ROOT / "jupyter-config" / "jupyter_server_config.d" /
                       "vramplan.json").read_text())
    assert conf["ServerApp"]["jpserver_extensions"] == {"vramplan.server.voila_server": True}
    assert voila_server._jupyter_server_extension_points() == [
        {"module": "vramplan.server.voila_server"}]
    app = SimpleNamespace(web_app=SimpleNamespace(settings={"mathjax_config": "mine"}))
    voila_server._load_jupyter_server_extension(app)
    assert app.web_app.settings == {"mathjax_url": None, "mathjax_config": "mine"}


def test_binder_badge_opens_the_planner():
    """The README's Binder link lands on the Voila planner, the page postBuild makes the
    default, and the notebook is there."""
    import re
    from urllib.parse import parse_qs, urlparse
    links = re.findall(r"\(https://mybinder\.org/v2/gh/[^)\s]+\)", (ROOT / "README.md").read_text())
    assert links, "no Binder badge in the README"
    url = urlparse(links[0].strip("()"))
    assert re.fullmatch(r"/v2/gh/[\w.-]+/vramplan/HEAD", url.path), url.path
    urlpath = parse_qs(url.query)["urlpath"][0]
    assert urlpath == "voila/render/notebooks/planner.ipynb"
    assert (ROOT / urlpath.removeprefix("voila/render/")).is_file()
    assert f'PLANNER = "/{urlpath}"' in (ROOT / "binder" / "postBuild").read_text()
