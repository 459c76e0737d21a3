"""The notebooks run top to bottom in a fresh kernel (what a JupyterLab or Binder user does first)."""
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_walkthrough_runs_without_errors():
    nb = nbformat.read(ROOT / "notebooks" / "walkthrough.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    assert "fits:" in outputs
    assert "trace" in outputs and "estimate" in outputs
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
