"""The report of a plan: Markdown with the figures one can check by hand and the advice, a
self-contained HTML file (charts as inline SVG, nothing fetched from anywhere), the sweep CSV
equal to `estimate` at its points, and every word of it in Chinese with --lang zh."""
from __future__ import annotations

import ast
import csv
import io
import re
from pathlib import Path

import pytest

from vramplan import i18n
from vramplan.estimate import estimate
from vramplan.report import (assemble, batch_sizes, build, sweep_csv, sweep_rows, to_html,
                             to_markdown)
from vramplan.units import GiB, MiB

# an estimate made by hand: 10 + 4 + 1 GiB at the peak on a 24 GiB GPU
EST = {"scenario": {"model": "gpt2", "task": "train", "batch_size": 8, "gpu": "g24"},
       "gpu": {"id": "g24", "name": "Card 24", "memory_bytes": 24 * GiB,
               "usable_memory_bytes": 24 * GiB},
       "per_gpu": {"components": {"weights": 10 * GiB, "activations": 4 * GiB,
                                  "cuda_context": GiB, "kv_cache": 0},
                   "peak_allocated_bytes": 14 * GiB, "peak_reserved_bytes": 14 * GiB,
                   "device_used_bytes": 15 * GiB},
       "fits": True, "headroom_bytes": 9 * GiB, "max_batch_size": 26, "peak_phase": "backward",
       "bandwidth": {"bytes_per_step": 30 * GiB, "achievable_bandwidth_gbs": 900.0,
                     "memory_floor_s": 0.0358, "bound": "memory"},
       "notes": ["bf16-mixed: fp32 master weights", "components sum to peak_allocated_bytes"]}
DEVICE = {"id": "g24", "name": "Card 24", "usable_memory_bytes": 24 * GiB,
          "sources": [{"id": "wp", "title": "Card whitepaper", "publisher": "Acme",
                       "url": "https://example.com/card.pdf"}]}
ADVICE = {"recommendations": [
    {"id": "ckpt", "title": "full activation checkpointing", "saves_bytes": 3 * GiB,
     "fits": True, "cost": {"compute_share": 0.33, "accuracy_risk": "none"},
     "how": {"hf": "gradient_checkpointing=True", "pytorch": "checkpoint(block, x)"},
     "source": ["checkpointing: Chen et al. 2016"]},
    {"id": "lora", "title": "LoRA adapters", "saves_bytes": 512 * MiB, "fits": True,
     "cost": {"compute_share": 0.0, "accuracy_risk": "medium"}, "how": {}, "source": []}],
    "plans": [], "growth": {"batch_size": 26}}


def test_markdown_figures_by_hand():
    md = to_markdown(assemble(EST, DEVICE, advice=ADVICE))
    assert md.startswith("# Memory plan: gpt2 (train) on Card 24\n")
    # 15 GiB used of 24 usable: 9 to spare
    assert "**Fits on Card 24: 15.00 GiB of 24.00 GiB usable, 9.00 GiB to spare**" in md
    assert "| Peak device memory per GPU (what nvidia-smi shows) | 15.00 GiB |" in md
    assert "| Peak allocated by tensors | 14.00 GiB |" in md
    assert "| Usable memory of the GPU | 24.00 GiB |" in md
    assert "| Largest batch that fits | 26 |" in md
    assert "| Memory-bound time floor per step | 35.8 ms |" in md
    assert "| Bound by | memory-bound |" in md
    # the breakdown: shares of 15 GiB; a zero component is left out
    assert "| Weights | 10.00 GiB | 66.7% |" in md and "| CUDA context | 1.00 GiB | 6.7% |" in md
    assert "KV cache" not in md
    # the advice: saves and costs in words, the how-to pytorch first
    assert "| 1 | full activation checkpointing | 3.00 GiB | yes | +33% compute |" in md
    assert "| 2 | LoRA adapters | 512.0 MiB | yes | accuracy risk medium |" in md
    assert "pytorch: `checkpoint(block, x)`; hf: `gradient_checkpointing=True`" in md
    # the assumptions (not the estimate's own bookkeeping) and the sources
    assert "- bf16-mixed: fp32 master weights" in md and "components sum to" not in md
    assert "- Card 24: Card whitepaper, Acme, https://example.com/card.pdf" in md
    assert "- checkpointing: Chen et al. 2016" in md
    assert "Room to grow on this GPU: batch size up to 26." in md     # batch 8 today
    md_grow = to_markdown(assemble(EST, DEVICE, advice={**ADVICE, "growth": {"seq_len": 4096}}))
    assert "Room to grow on this GPU: sequence length up to 4,096." in md_grow


def test_does_not_fit_and_no_advice():
    est = {**EST, "fits": False, "headroom_bytes": -6 * GiB,
           "per_gpu": {**EST["per_gpu"], "device_used_bytes": 30 * GiB}}
    md = to_markdown(assemble(est, DEVICE))
    assert "**Does not fit on Card 24: 30.00 GiB needed, 24.00 GiB usable, 6.00 GiB over**" in md
    assert "| Headroom (usable minus peak) | -6.00 GiB |" in md
    assert "No advice was asked for or found for this plan." in md


PLAN = {"model": "gpt2", "task": "train", "batch_size": 8, "seq_len": 1024,
        "gpu": "nvidia-rtx-4090"}


@pytest.fixture(scope="module")
def real():
    return build(PLAN)


def test_a_real_plan_reports_the_estimates_figures(real):
    est = estimate(PLAN)
    md = to_markdown(real)
    used = est.device_used_bytes / GiB
    assert f"| Peak device memory per GPU (what nvidia-smi shows) | {used:,.2f} GiB |" in md
    assert f"| Largest batch that fits | {est.max_batch_size} |" in md
    assert real.recommendations and all(f"| {r['title']} |" in md
                                        for r in real.recommendations)
    assert "?model=gpt2&task=train" in md
    assert "huggingface.co/openai-community/gpt2" in md          # the model's source


@pytest.fixture(scope="module")
def page(real):
    pytest.importorskip("vl_convert")
    return to_html(real)


def test_html_is_self_contained(page):
    assert page.startswith("<!doctype html>")
    assert page.count("<svg") >= 3                 # breakdown, bandwidth, phases
    assert "<script" not in page.lower() and "<link" not in page.lower()
    assert "<img" not in page.lower() and "@import" not in page and "url(" not in page
    refs = re.findall(r"""(?:src|href)\s*=\s*["']?([^"'\s>]*)""", page, re.I)
    assert all(not re.match(r"(https?:)?//", x) for x in refs), refs
    assert "default-src 'none'" in page
    est = estimate(PLAN)
    assert f"{est.device_used_bytes / GiB:,.2f} GiB" in page


def test_html_escapes_what_it_shows():
    pytest.importorskip("vl_convert")
    est = {**EST, "scenario": {**EST["scenario"], "model": "<b>x</b>"}}
    page = to_html(assemble(est, DEVICE), svgs=[])
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page


def test_sweep_csv_equals_estimate_at_its_points():
    assert batch_sizes(8) == [1, 2, 4, 8, 16, 32, 64]
    assert batch_sizes(100) == [1, 2, 4, 8, 16, 32, 64, 100]
    text = sweep_csv(PLAN, batches=[1, 8], gpus=["nvidia-rtx-4090", "nvidia-t4"])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["batch_size"], r["gpu"]) for r in rows] == [
        ("1", "nvidia-rtx-4090"), ("1", "nvidia-t4"), ("8", "nvidia-rtx-4090"),
        ("8", "nvidia-t4")]
    for r in rows:
        e = estimate({**PLAN, "batch_size": int(r["batch_size"]), "gpu": r["gpu"]})
        assert int(r["device_used_bytes"]) == e.device_used_bytes
        assert r["fits"] == str(e.fits)
        assert int(r["max_batch_size"]) == e.max_batch_size
    every = sweep_rows(PLAN)
    from vramplan.hardware import default_db
    assert len(every) == 7 * len(default_db().devices)     # 1..64 over every GPU


# ---- Chinese: every word the report says has its entry -------------------------------
SOURCES = [*sorted(Path(__file__).resolve().parents[1].joinpath(
    "app/vramplan/report").glob("*.py")),
    Path(__file__).resolve().parents[1] / "app/vramplan/charts/waterfall.py",
    Path(__file__).resolve().parents[1] / "app/vramplan/charts/gpus.py"]


def literal_texts() -> set[str]:
    out = set()
    for p in SOURCES:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("tr", "_t",
                                                                                "add"):
                a = node.args[0] if node.args else None
                for x in ([a.body, a.orelse] if isinstance(a, ast.IfExp) else [a]):
                    if isinstance(x, ast.Constant) and isinstance(x.value, str):
                        out.add(x.value)
    return out


def test_every_literal_has_a_chinese_entry():
    texts = literal_texts()
    assert len(texts) > 50 and "Figures" in texts and "{share} compute" in texts
    zh = i18n.catalogue("zh")
    assert sorted(t for t in texts if t not in zh) == []


def test_a_chinese_report_leaves_nothing_in_english(monkeypatch):
    missed = []
    real_gettext = i18n.gettext

    def spy(text, lang="en"):
        if lang == "zh" and text and not i18n.has(text, "zh"):
            missed.append(text)
        return real_gettext(text, lang)
    monkeypatch.setattr(i18n, "gettext", spy)
    import vramplan.report.text as T
    monkeypatch.setattr(T, "gettext", spy)
    for plan in (PLAN, {**PLAN, "batch_size": 64, "gpu": "nvidia-t4"},
                 {"model": "meta-llama/Llama-3.1-8B", "task": "serve", "gpu": "nvidia-l4"},
                 {"model": "resnet50", "task": "train", "batch_size": 32, "gpu": "nvidia-t4"}):
        md = to_markdown(build(plan, lang="zh"))
        assert "显存规划" in md
    assert sorted(set(missed)) == []


def test_chinese_html_charts():
    pytest.importorskip("vl_convert")
    est = {**EST, "fits": False, "headroom_bytes": -6 * GiB,
           "per_gpu": {**EST["per_gpu"], "device_used_bytes": 30 * GiB}}
    page = to_html(assemble(est, DEVICE, advice=ADVICE, lang="zh"))
    assert page.startswith("<!doctype html>\n<html lang='zh-Hans'>")
    assert "<h2>建议</h2>" in page
    # the savings waterfall, drawn in Chinese: 30 GiB today, -3 GiB for checkpointing
    assert "从当前峰值到装得下" in page and "-3.0 GiB · 计算量 +33%" in page


def test_every_chart_of_a_chinese_report_is_in_chinese():
    pytest.importorskip("altair")
    from vramplan.charts.theme import title_text
    from vramplan.report.svg import specs
    est = {**EST, "fits": False, "per_gpu": {**EST["per_gpu"], "device_used_bytes": 30 * GiB},
           "phases": {"forward": {"weights": 10 * GiB, "activations": 4 * GiB}}}
    titles = {k: title_text(s) for k, s in specs(assemble(est, DEVICE, advice=ADVICE,
                                                                lang="zh")) if "title" in s}
    assert set(titles) >= {"savings", "bandwidth", "phases"}
    # every title has Chinese characters in it
    assert all(re.search(r"[\u4e00-\u9fff]", t) for t in titles.values()), titles
