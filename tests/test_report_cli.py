"""`vramplan report`: Markdown on stdout, HTML into a file, Chinese with --lang zh; bad input
is one line and exit 2."""
from __future__ import annotations

import json

import pytest

from vramplan.cli import main
from vramplan.estimate import estimate
from vramplan.units import GiB

PLAN = {"model": "gpt2", "task": "train", "batch_size": 8, "seq_len": 1024,
        "gpu": "nvidia-rtx-4090"}


@pytest.fixture()
def plan(tmp_path):
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(PLAN))
    return p


def test_markdown_to_stdout(plan, capsys):
    assert main(["report", "--scenario", str(plan), "--format", "md"]) == 0
    out = capsys.readouterr().out
    used = estimate(PLAN).device_used_bytes / GiB
    assert out.startswith("# Memory plan: gpt2 (train) on NVIDIA GeForce RTX 4090")
    assert f"| Peak device memory per GPU (what nvidia-smi shows) | {used:,.2f} GiB |" in out
    assert "## Advice" in out and "## Sources" in out


def test_another_gpu_and_chinese(plan, capsys):
    assert main(["report", "--scenario", str(plan), "--gpu", "nvidia-t4", "--lang", "zh",
                 "--no-advice"]) == 0
    out = capsys.readouterr().out
    used = estimate({**PLAN, "gpu": "nvidia-t4"}).device_used_bytes / GiB
    assert out.startswith("# 显存规划：gpt2（训练），NVIDIA T4")
    assert f"{used:,.2f} GiB" in out and "## 建议" in out


def test_html_into_a_file(plan, tmp_path, capsys):
    pytest.importorskip("vl_convert")
    out = tmp_path / "r.html"
    assert main(["report", "--scenario", str(plan), "--format", "html", "--no-advice",
                 "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "<svg" in page
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "r.html"]  # no temp


@pytest.mark.parametrize("args, words", [
    (["--scenario", "/nonexistent/plan.json"], "cannot read scenario file"),
    (["--gpu", "not-a-gpu"], "not-a-gpu"),
    (["--format", "pdf"], "invalid choice: 'pdf'"),
    (["--lang", "fr"], "invalid choice: 'fr'"),
    (["-o", "{tmp}"], "is a directory"),
    (["-o", "{tmp}/no/such/dir/r.md"], "cannot write"),
])
def test_bad_input_is_one_line(plan, tmp_path, capsys, args, words):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    argv = ["report"] + (["--scenario", str(plan)] if "--scenario" not in args else []) + args
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("vramplan: error: ") and err.count("\n") == 1, err
    assert words in err and "Traceback" not in err


def test_a_scenario_without_a_gpu(tmp_path, capsys):
    p = tmp_path / "nogpu.json"
    p.write_text(json.dumps({k: v for k, v in PLAN.items() if k != "gpu"}))
    assert main(["report", "--scenario", str(p)]) == 2
    assert "no GPU given" in capsys.readouterr().err
