"""The page's advisor panel shows the proposals `vramplan advise` prints, for the same plan and
the same toggle (issue 20.7): for Llama-3.1-70B serve at TP 2 on 2 x H100 (the engine does not
start: its KV pool holds 12,096 of 131,072 tokens) the panel listed only TP 4 and fp8 / int8
weights: its rows kept changes whose device bytes saved were > 0, and a serving proposal saves
none (vLLM pre-allocates its memory; what it buys is KV pool room), so max_model_len 12,096,
fp8 KV (and fp8 / int8 / NF4 weights) were dropped. Rows say what the CLI says, in the same
words (report.words)."""
import json

import pytest

pytest.importorskip("ipywidgets")

SERVE_70B = {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
             "parallel": {"gpus": 2, "tensor": 2}, "gpu": "nvidia-h100-sxm5-80gb"}
FLAGS = ["--model", SERVE_70B["model"], "--task", "serve", "--precision", "bf16", "--gpus", "2",
         "--tensor", "2", "--gpu", SERVE_70B["gpu"], "--no-gpu-table", "--format", "json"]


def _cli(capsys, allow: bool) -> dict:
    from vramplan.cli import main
    assert main(["advise", *FLAGS, *(["--allow-job-changes"] if allow else [])]) == 0
    return json.loads(capsys.readouterr().out)


def _page_rows(app) -> set[str]:
    """The ids of the single changes the panel shows (each row's apply button)."""
    return {b.vp_change.id for b in app.advisor.buttons if hasattr(b.vp_change, "saves_bytes")}


def test_page_rows_are_the_cli_proposals(new_app, capsys):
    """Every proposal once the panel shows all (it shows the first 8 single changes and 4
    changes to the job, then a "Show all" button)."""
    app = new_app(lazy_chart=False)
    app.state.apply(SERVE_70B)
    for allow in (False, True):
        if allow:
            app.advisor.allow.value = True
        if not app.advisor._all and app.advisor.more in app.advisor.changes.children:
            app.advisor.more.click()
        got = _cli(capsys, allow)
        cli = {r["id"] for r in got["recommendations"] + got["job_changes"]}
        assert {"serve-max-model-len", "serve-kv-fp8", "serve-more-tp"} <= cli
        assert _page_rows(app) == cli, allow
        text = app.advisor.value
        assert "max_model_len 131,072 -&gt; 12,096" in text or \
            "max_model_len 131,072 -> 12,096" in text
        assert "+31.84 GiB KV pool per GPU, holds 208,692 more tokens" in text
        assert "KV pool unchanged; the engine starts" in text
        assert "saves -" not in text and "saves 32.0 KiB" not in text


def test_a_layout_change_row_names_its_traffic(new_app):
    """Context parallel 1 -> 2 on 4 H100 (Llama-3.1-8B, seq 8192): its row reads the CLI's
    '+6.4 GB/step over NVLink 4, +14.3 ms not hidden' (the panel printed no bytes or link)."""
    from vramplan.report.words import cost_words
    app = new_app(lazy_chart=False)
    app.state.apply({"model": "meta-llama/Llama-3.1-8B", "task": "train",
                     "precision": "bf16-mixed", "seq_len": 8192, "batch_size": 4,
                     "parallel": {"gpus": 4}, "gpu": "nvidia-h100-sxm5-80gb"})
    cp = next(r for r in app.state.advice.recommendations if r.id == "context-parallel")
    words = cost_words(cp.cost)
    assert "GB/step over NVLink 4" in words
    assert words.replace("·", "").split()[0] in app.advisor.value
    assert words.split(" · ")[0] in app.advisor.value
