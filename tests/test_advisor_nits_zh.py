"""Advisor nit from the browser walk (issue 20.7, Chinese page): on a serve plan whose engine
would not start, the advisor panel says why, then 'Plans that fit, cheapest first:'; the two
sentences were joined with an English '. ' in Chinese too ('... 12,096 个. 装得下的方案').
A Chinese sentence ends with '。'.

The plan: Llama-3.1-70B bf16 served at TP2 on 2 x H100 SXM5 80GB, max_model_len 131,072; the
KV pool holds 12,126 tokens, the longest request 756 blocks x 16 = 12,096 tokens."""
from __future__ import annotations

import pytest

PLAN = {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
        "parallel": {"gpus": 2, "tensor": 2}}


def _status(monkeypatch, lang: str) -> str:
    pytest.importorskip("ipywidgets")
    from vramplan.ui import App
    monkeypatch.delenv("QUERY_STRING", raising=False)
    app = App(charts=False, lang=lang, gpu="nvidia-h100-sxm5-80gb", scenario=PLAN)
    app.advisor.enabled = True
    app.advisor.render()
    assert app.state.advice.plans and not app.state.advice.fits
    return app.advisor.status.value


def test_the_engine_reason_and_the_plans_are_two_chinese_sentences(monkeypatch):
    text = _status(monkeypatch, "zh")
    assert "12,096 个。装得下的方案，代价最低的在前：" in text, text
    assert ". 装得下" not in text


def test_english_keeps_its_full_stop(monkeypatch):
    text = _status(monkeypatch, "en")
    assert "holds 12,096 of 131,072 tokens. Plans that fit, cheapest first:" in text, text
