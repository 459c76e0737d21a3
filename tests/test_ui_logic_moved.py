"""Logic out of the page: the size-only model parser (catalog/size_only.py), the GPU comparison
and the larger GPUs (advisor/compare.py) live below the UI, which only renders them."""
from __future__ import annotations

import ast
from pathlib import Path

from vramplan.advisor.compare import gpu_rows, larger_gpus
from vramplan.estimate import estimate
from vramplan.hardware import default_db
from vramplan.scenario import Scenario

UI = Path(__file__).resolve().parents[1] / "app" / "vramplan" / "ui"
MOVED = {"parse_params", "looks_like_size", "larger_gpus", "comparison_rows"}


def test_the_ui_defines_none_of_the_moved_functions():
    defined = {n.name for p in UI.rglob("*.py") for n in ast.walk(ast.parse(p.read_text()))
               if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert not defined & (MOVED | {"Worker", "package_root", "poster"})


def test_the_worker_client_is_the_measure_stages():
    """ui/measure_state.py keeps the Job state; the process client is measure/client.py, and
    nothing in ui/ starts a process any more."""
    from vramplan.measure import client
    assert client.Worker.__module__ == "vramplan.measure.client"
    for p in UI.rglob("*.py"):
        names = {a.name for n in ast.walk(ast.parse(p.read_text()))
                 if isinstance(n, ast.Import) for a in n.names}
        assert "subprocess" not in names, p.name


def test_gpu_rows_are_the_estimates_figures():
    db = default_db()
    sc = Scenario.from_dict({"model": "gpt2", "task": "train", "batch_size": 4})
    rows = {r["id"]: r for r in gpu_rows(sc, db, batched=True)}
    assert set(rows) <= {d.id for d in db.devices} and len(rows) >= 60
    for gid in ("nvidia-rtx-4090", "nvidia-t4"):
        e = estimate(sc.replace(gpu=gid))
        assert rows[gid]["fits"] == e.fits and rows[gid]["headroom_bytes"] == e.headroom_bytes
        assert rows[gid]["max_batch_size"] == e.max_batch_size


def test_larger_gpus_step_up():
    db = default_db()
    dev = db.get("nvidia-rtx-4090")
    a, b = larger_gpus(db, dev)
    assert a.usable_bytes >= 1.4 * dev.usable_bytes and b.usable_bytes >= 1.4 * a.usable_bytes
    assert a.vendor == b.vendor == dev.vendor
