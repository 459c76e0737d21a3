"""The report's words (issue 19.2, a browser walk of the planner): the serve verdict names the
engine that does not start (vLLM, the engine a serve plan models), and a report the page makes
gives the plan's link as the page's full URL where the browser sent the planner's address;
without one it says to append the query to the planner's address; the CLI keeps '?query'."""
from __future__ import annotations

import html

import pytest

from vramplan.estimate import estimate
from vramplan.hardware import get_gpu
from vramplan.report import assemble, report, to_html, to_markdown
from vramplan.report.content import planner_url

SERVE_70B = {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
             "parallel": {"gpus": 2, "tensor": 2}, "gpu": "nvidia-h100-sxm5-80gb"}
PLAN = {"model": "gpt2", "task": "train", "batch_size": 8, "seq_len": 1024,
        "gpu": "nvidia-rtx-4090"}
BASE = "https://planner.example.org/voila/render/planner.ipynb"


def test_serve_verdict_names_vllm():
    """The KV pool holds 12,096 of the 131,072 tokens one max_model_len request needs, so
    vLLM's start-up check fails (tests/test_engine_words.py); before, 'the engine'."""
    md = report(SERVE_70B, fmt="md", advice=False)
    verdict = md.splitlines()[2]
    assert verdict == ("**Does not fit on NVIDIA H100 SXM5 80GB: the vLLM engine does not "
                       "start: its KV pool holds 12,096 of 131,072 tokens**"), verdict
    zh = report(SERVE_70B, fmt="md", lang="zh", advice=False)
    assert "vLLM 引擎无法启动：KV 池只能容纳 131,072 个 token 中的 12,096 个" in zh


def _report(base):
    sc = PLAN
    est = estimate(sc)
    from vramplan.scenario import Scenario
    q = Scenario.from_dict(sc).to_query()
    return q, assemble(est.to_dict(), get_gpu(sc["gpu"]).to_dict(), query=q, base_url=base)


def test_link_is_the_full_url_when_the_page_sends_its_address():
    q, r = _report(BASE)
    assert f"Link to this plan: <{BASE}?{q}>" in to_markdown(r)
    pytest.importorskip("vl_convert")
    assert f"Link to this plan: <code>{html.escape(BASE + '?' + q)}</code>" in to_html(r)


def test_link_from_a_page_without_an_address_says_to_append_it():
    q, r = _report("")
    assert (f"Link to this plan (append it to the planner's address): `?{q}`"
            in to_markdown(r))


def test_cli_report_keeps_the_query():
    q, r = _report(None)
    assert f"Link to this plan: `?{q}`" in to_markdown(r)
    assert f"Link to this plan: `?{q}`" in report(PLAN, fmt="md", advice=False)


@pytest.mark.parametrize("bad", ["javascript:alert(1)", "https://x.org/p?model=gpt2",
                                 "https://x.org/a b", "ftp://x.org/", "https://x.org/#frag",
                                 "https://x.org/'><script>"])
def test_only_a_plain_http_address_is_taken(bad):
    assert planner_url(bad) == ""
    assert planner_url(None) is None
    assert planner_url(" http://localhost:8866/ ") == "http://localhost:8866/"


def test_page_export_uses_the_address_the_browser_sent():
    pytest.importorskip("ipywidgets")
    import base64
    import re
    from vramplan.ui.state.state import PlanState
    from vramplan.ui.widgets.export import ExportPanel
    st = PlanState(gpu="nvidia-rtx-4090")
    st.apply(PLAN)
    p = ExportPanel(st, background=False)
    p.render()
    p.share.base = BASE                     # what the share widget's script sets in Voila
    p.buttons["md"].click()
    m = re.search(r"href='data:[^;]+;charset=utf-8;base64,([^']+)'", p.links.value)
    text = base64.b64decode(m.group(1)).decode("utf-8")
    assert f"Link to this plan: <{BASE}?{st.query}>" in text
