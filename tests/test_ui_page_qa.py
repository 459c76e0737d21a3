"""What walking the planner page as a planner showed wrong (helper page-QA, 2026-12-02), each
checked without a browser."""
from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

from vramplan.ui.state.i18n import speaking  # noqa: E402
from vramplan.ui.widgets.verdict import task_summary  # noqa: E402

# the GPUs-needed front's 32-GPU point for Llama-3.1-70B train, seq 8192, on H100s
LAYOUT_32 = {"gpus": 32, "data": 1, "tensor": 8, "pipeline": 2, "context": 2, "zero": 1}


def test_the_verdict_line_names_every_dimension_the_gpu_count_is_made_of():
    """1 x 8 x 2 x 2 = 32: the line read '32 GPUs (dp 1, tp 8, pp 2, ZeRO 1)', whose numbers
    multiply to 16."""
    sc = {"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 1,
          "seq_len": 8192, "precision": "bf16-mixed", "parallel": LAYOUT_32}
    assert "32 GPUs (dp 1, tp 8, pp 2, cp 2, ZeRO 1)" in task_summary(sc)
    no_cp = {**LAYOUT_32, "gpus": 16, "context": 1}
    assert "16 GPUs (dp 1, tp 8, pp 2, ZeRO 1)" in task_summary({**sc, "parallel": no_cp})
    with speaking("zh"):
        assert "32 张 GPU（dp 1、tp 8、pp 2、cp 2、ZeRO 1）" in task_summary(sc)


def test_the_rank_table_scrolls_in_its_own_box_on_a_phone():
    """At 390 px the eight columns (~720 px) were cut at the card's edge, the device-used
    figures, the bars with their limit line and the note below all out of sight: the HTML
    widget (a flex item, min-width auto) grew to the table's width. Now the table sits in a
    box that scrolls sideways and the widget carries the class style.py holds to the card."""
    from vramplan.estimate import estimate
    from vramplan.ui.widgets.ranks_view import RanksView, ranks_html
    from vramplan.ui.widgets.style import CSS
    plan = {"model": "meta-llama/Llama-3.1-70B", "task": "train", "seq_len": 8192,
            "gpu": "nvidia-h100-sxm5-80gb", "parallel": {"gpus": 64, "data": 2, "tensor": 8,
                                                         "pipeline": 4, "zero": 1}}
    body = ranks_html(estimate(plan).to_dict())
    box, table = body.index("<div class='vp-ranks-scroll'"), body.index("<table")
    assert box < table < body.index("</table></div>")
    assert "overflow-x:auto" in body[box:table]
    # what a stage holds and its phase wrap (at 768 px the table was 718 px in a 698 px card)
    holds = body.index(">blocks + head, logits and loss<")
    assert "nowrap" not in body[body.rindex("<td", 0, holds):holds]

    class State:
        result = None
    view = RanksView(State())
    assert "vp-ranks-body" in view.body._dom_classes
    assert ".vp-ranks-body, .vp-ranks-body > .widget-html-content" in CSS


def test_a_serving_plan_shows_the_sequences_its_pool_holds_and_the_longest_request():
    """Llama-3.1-70B bf16 on 2 x H100, TP 2, vLLM (issue 20.7): the KV pool holds 12,126
    tokens (the estimate's serving section), so at the model's 131,072-token context 0
    sequences run at once and the longest request is 12,096 (whole 16-token blocks whose
    request bytes the pool holds: workloads/transformer/engine.longest_context, vLLM's
    estimate_max_model_len). The figures read 'Max batch size none · batch 1 does not fit' and
    'tokens that fit'; at seq_len 8,192: 1 sequence (12,126 // 8,192)."""
    from vramplan.estimate import estimate
    from vramplan.ui.widgets.verdict import verdict_html
    plan = {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "stack": "vllm",
            "gpu": "nvidia-h100-sxm5-80gb", "parallel": {"tensor": 2, "gpus": 2}}
    est = estimate(plan).to_dict()
    assert est["serving"]["kv_pool_tokens"] == 12_126 and not est["serving"]["engine_starts"]
    page = verdict_html(est)
    assert "Max batch size" not in page and "batch 1 does not fit" not in page
    assert ">Concurrent sequences<" in page and ">0<" in page
    assert "of 131,072 tokens in the KV pool at once" in page
    assert ">12,096<" in page and "tokens of one request the KV pool holds" in page
    short = verdict_html(estimate({**plan, "seq_len": 8192}).to_dict())
    assert ">1<" in short and "of 8,192 tokens in the KV pool at once" in short
    with speaking("zh"):
        assert "并发序列数" in verdict_html(est)
    # a plan without an engine keeps its batch figure
    gen = estimate({"model": "gpt2", "task": "generate", "gpu": "nvidia-l4"}).to_dict()
    assert "Max batch size" in verdict_html(gen) and "Concurrent" not in verdict_html(gen)


def test_the_verdict_line_says_a_vlm_sample_s_images():
    """Qwen2.5-VL-7B LoRA with 2 images of 448 x 448 a sample read 'batch 1 × 2,048 tokens ·
    bf16' on the verdict, the 512 image tokens (2 x (448/28)^2 = 2 x 256) and the vision
    tower's work unsaid."""
    sc = {"model": "Qwen/Qwen2.5-VL-7B-Instruct", "task": "lora", "batch_size": 1,
          "seq_len": 2048, "precision": "bf16", "images": 2, "image_size": [448, 448]}
    assert "batch 1 × 2,048 tokens, 2 images of 448×448 px · bf16" in task_summary(sc)
    one = {**sc, "model": "google/gemma-3-4b-pt", "images": 1, "image_size": None}
    assert "2,048 tokens, 1 image · bf16" in task_summary(one)
    assert "image" not in task_summary({**sc, "images": 0, "image_size": None})
    with speaking("zh"):
        assert "2 张图像（448×448 像素）" in task_summary(sc)


def test_every_key_s_label_doc_and_unit_speak_chinese():
    """The Chinese page showed 'Layers in host memory', "MoE layers' experts in host memory"
    and their 'layers' placeholder in English on gpt-oss-20b generate (keys added for issue
    21.5 without zh entries; the family walk of test_i18n.py opens no generate plan)."""
    from vramplan import i18n
    from vramplan.scenario.keys import KEYS
    missing = [(k.name, attr, v) for k in KEYS for attr in ("label", "doc", "unit")
               if isinstance(v := getattr(k, attr, None), str) and v.strip()
               and not i18n.has(v, "zh")]
    assert not missing, missing
    assert i18n.gettext("Layers in host memory", "zh") == "放在主机内存的层数"


@pytest.mark.parametrize("model, want", [
    ("meta-llama/Llama-3.1-8B", "1,000,000,000 个 token 超过了“meta-llama/Llama-3.1-8B”的 "
     "131,072 个位置（max_position_embeddings 131072；rope_scaling llama3 已计入）"),
    ("gpt2", "1,000,000,000 个 token 超过了“gpt2”的 1,024 个位置（学习得到的位置嵌入）"),
])
def test_a_context_beyond_the_model_s_positions_is_refused_in_chinese(model, want):
    """seq_len 1e9 on the Chinese page: the field's message (scenario/rules.positions_error)
    was left in English ('seq_len = 1000000000 exceeds the 131072 positions ...')."""
    from vramplan import i18n
    from vramplan.catalog import get_model
    from vramplan.scenario.rules import positions_error
    err = positions_error(get_model(model), 10**9)
    assert i18n.translate_message(err.message, "zh") == want
    assert i18n.translate_message(str(err), "zh").endswith(want)


def _curve_statuses(chart) -> dict:
    """{batch: status} of the memory-vs-batch chart's points (its data rows)."""
    found = {}

    def walk(node):
        if isinstance(node, dict):
            if "status" in node and "x" in node:
                found[node["x"]] = node["status"]
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(chart.to_dict())
    return found


def test_the_memory_vs_batch_points_fit_as_the_estimate_does():
    """The serving plan above (vLLM, TP 2, 131,072 context): the verdict says 'Does not fit'
    (the pool holds no max_model_len request, at any batch: 72.7 GiB used of 79.65 usable),
    while the chart marked every batch 1-16 'fits' (bytes against usable memory). At seq_len
    8,192 the engine starts and each point fits."""
    pytest.importorskip("altair")
    from vramplan.estimate import estimate
    from vramplan.hardware import default_db
    from vramplan.scenario import Scenario
    from vramplan.ui.widgets.explore import curve_chart
    db = default_db()
    h100 = db.get("nvidia-h100-sxm5-80gb")
    plan = {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "stack": "vllm",
            "gpu": h100.id, "parallel": {"tensor": 2, "gpus": 2}}
    for extra, want in (({}, "does not fit"), ({"seq_len": 8192}, "fits")):
        sc = Scenario.from_dict({**plan, **extra})
        est = estimate(sc).to_dict()
        status = _curve_statuses(curve_chart(sc, est, h100, db))
        assert sorted(status) == [1, 2, 4, 8, 16] and set(status.values()) == {want}, status


def test_the_gpus_needed_view_says_one_gpu_and_one_sequence_in_the_singular(new_app):
    """Llama-3.1-70B train bf16-mixed seq 8,192 on one H100: the GPUs-needed view read 'the
    global batch of 1 sequences' and its chart 'this plan: 1 GPUs'."""
    from vramplan.charts.theme import spec_rows
    app = new_app(lazy_chart=False)
    app.state.apply({"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 1,
                     "seq_len": 8192, "precision": "bf16-mixed",
                     "gpu": "nvidia-h100-sxm5-80gb"})
    view = app.cluster
    assert view.front, view.status.value
    assert "the global batch of 1 sequence, fewest GPUs first" in view.status.value
    texts = [r.get("text") for r in spec_rows(view.chart.spec) if r.get("text")]
    assert "this plan: 1 GPU" in texts and "this plan: 1 GPUs" not in texts


def test_the_export_card_has_one_kind_of_button():
    """The export card showed outlined 'Download scenario.json / estimate.json' links above
    grey 'Download sweep CSV / report' buttons (screenshot /tmp/h9/j5-zh-390-export.png of
    the helper's walk); the widget buttons and the file picker there take the links' look."""
    from vramplan.ui.widgets.style import CSS
    rule = CSS[CSS.index(".vp-export .widget-button, .vp-export .widget-upload {"):]
    rule = rule[:rule.index("}")]
    assert "background: #fff" in rule and "border: 1px solid #d0d5dd" in rule
    btn = CSS[CSS.index(".vp-btn {"):]
    assert "border: 1px solid #d0d5dd" in btn[:btn.index("}")]
