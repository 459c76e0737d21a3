"""The page's plan views without a browser (issue 20.2's verdict line and 20.10): the verdict
names the rank that decides it, plan cards whose GPU count and layout agree, the savings
waterfall names every step of a plan (a scale-out included), and the GPU comparison lists
every GPU that passes the GPU picker's filters, sortable, with the plan's shortest step beside
memory.
"""
from __future__ import annotations

import re

import pytest

pytest.importorskip("ipywidgets")

from vramplan.charts.waterfall import waterfall_rows, waterfall_steps  # noqa: E402
from vramplan.estimate import estimate  # noqa: E402

GiB = 2**30
H100 = "nvidia-h100-sxm5-80gb"
# Llama-3.1-70B over 4 pipeline stages (tests/test_ranks_view.py): stage 0 holds 4
# micro-batches in flight and the embedding, so it uses the most memory
PIPELINE = {"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 1,
            "seq_len": 8192, "precision": "bf16-mixed", "gpu": H100,
            "checkpointing": "selective", "gradient_accumulation": 8,
            "options": ["sequence-parallel"],
            "parallel": {"gpus": 64, "data": 2, "tensor": 8, "pipeline": 4, "zero": 1}}
PRETRAIN = {"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 1,
            "seq_len": 8192, "precision": "bf16-mixed", "gpu": H100}
LORA = {"model": "meta-llama/Llama-3.1-8B", "task": "lora", "gpu": H100}


@pytest.fixture
def app(new_app):
    return new_app(lazy_chart=False)


def _plain(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


# ---- the verdict names the deciding rank
def test_the_verdict_names_the_rank_that_decides_it_when_ranks_differ(new_app):
    app = new_app(lazy_chart=False, charts=False)
    app.state.apply(PIPELINE)
    assert "decided by stage 0, the rank with the most memory" in app.panel.value
    app.state.apply(dict(PIPELINE, parallel={"gpus": 64, "data": 8, "tensor": 8, "zero": 1}))
    assert "decided by" not in app.panel.value          # one kind of rank: nothing to name
    app.state.apply(PIPELINE)
    app.set_lang("zh")
    assert "由 stage 0 决定" in app.panel.value


# ---- the savings waterfall names every step
def test_the_waterfall_names_a_scale_out_step_that_has_no_saving_of_its_own():
    # today 100 GiB; fused AdamW saves 10 GiB (100 -> 90); the plan's scale-out layout has no
    # saving of its own: the plan's estimate (60 GiB per GPU) less the 90 before it is its -30
    advice = {"recommendations": [{"id": "fused", "title": "fused AdamW",
                                   "saves_bytes": 10 * GiB}]}
    plan = {"steps": [{"id": "fused", "title": "fused AdamW"},
                      {"id": "cluster-layout", "title": "32 x GPU: TP 8, PP 4"}],
            "estimate": {"per_gpu": {"device_used_bytes": 60 * GiB}},
            "cost": {"compute_share": 0.0, "gpus": 32, "score": 1.0}}
    rows = waterfall_rows(advice, peak_bytes=100 * GiB, usable_bytes=80 * GiB, plan=plan)
    assert waterfall_steps(rows) == ["Today's peak", "fused AdamW", "32 x GPU: TP 8, PP 4",
                                     "After these changes"]
    scale = rows[2]
    assert scale["bytes"] == -30 * GiB and scale["kind"] == "saving"
    assert scale["text"] == "-30.0 GiB · 32 GPUs"        # the plan's cost: its one such step
    assert rows[-1]["text"] == "60.0 GiB · fits"


def test_the_waterfall_of_an_advised_scale_out_plan_names_its_layout():
    from vramplan.advisor import advise
    adv = advise(PRETRAIN, gpu_table_too=False)
    p = adv.plans[0]
    assert p.gpus > 1
    rows = waterfall_rows(adv.to_dict(full=False), estimate=adv.estimate.to_dict(),
                          usable_bytes=adv.estimate.gpu.usable_bytes,
                          plan={"steps": p.changes, "estimate": p.estimate.to_dict(),
                                "cost": p.cost.to_dict()})
    steps = waterfall_steps(rows)
    assert [c["title"] for c in p.changes] == steps[1:-1]
    assert "Combined effect" not in steps
    assert rows[-1]["end_gib"] == pytest.approx(p.estimate.device_used_bytes / GiB, abs=1e-3)


# ---- plan cards: GPU count and layout agree
def test_each_plan_card_says_the_gpu_count_its_layout_and_cost_say(app):
    app.state.apply(PRETRAIN)
    adv = app.state.advice
    assert adv is not None and adv.plans
    for card, plan in zip(app.advisor.plans.children, adv.plans):
        text = _plain(card.children[0].value)
        n = plan.scenario.parallel.gpus
        title = re.search(r"Plan \d+ · (?:(\d+) × )?", text)
        assert int(title.group(1) or 1) == n, text
        assert all(int(m) == n for m in re.findall(r"(\d+) x GPU", text)), text
        assert all(int(m) == n for m in re.findall(r"(\d+) GPUs", text)), text
        assert plan.estimate.scenario.parallel.gpus == n


# ---- the GPU comparison for a buyer
def test_gpu_rows_take_the_pickers_filters_and_price_the_step_on_each_gpu(db):
    from vramplan.advisor.compare import gpu_rows
    e = estimate(LORA)
    bw = e.to_dict()["bandwidth"]
    filters = {"vendor": "NVIDIA", "min_memory": "40 GiB", "min_bandwidth": "1500 GB/s"}
    rows = gpu_rows(e.scenario, db, True, filters=filters, bandwidth=bw)
    assert sorted(r["id"] for r in rows) == sorted(d.id for d in db.filter(**filters))
    assert all(r["vendor"] == "NVIDIA" and r["usable_bytes"] >= 0 for r in rows)
    a100 = next(r for r in rows if r["id"] == "nvidia-a100-sxm4-40gb")
    # by hand: A100's dense BF16 peak is 312 TFLOPS, its bandwidth 1,555 GB/s x 0.9; the step's
    # FLOPs over 312e12 is larger than its bytes over 1,399.5e9 (compute-bound)
    assert bw["flops_per_step"] / 312e12 > bw["bytes_per_step"] / (1555e9 * 0.9)
    assert a100["step_s"] == pytest.approx(bw["flops_per_step"] / 312e12, rel=1e-9)
    assert a100["per"] == "step"


def test_gpu_rows_of_an_image_plan_are_per_image(db):
    from vramplan.advisor.compare import step_time
    e = estimate({"model": "black-forest-labs/FLUX.1-dev", "gpu": H100})
    bw = e.to_dict()["bandwidth"]
    t, per = step_time(bw, db.get(H100))
    assert per == "image"
    assert t == pytest.approx(bw["min_step_time_s"] * bw["bytes_per_image"] /
                              bw["bytes_per_step"], rel=1e-9)


def test_the_comparison_lists_every_gpu_the_filters_pass_sorted_by_the_choice(app, db):
    from vramplan.charts import spec_rows
    from vramplan.ui.widgets.explore import TOP
    app.state.apply(LORA)
    app.explore.view.value = "compare"
    body = app.explore.table.value
    n_all = len(db.devices)
    assert n_all > TOP
    assert body.count("<tr class") + body.count("<tr data-gpu") == n_all  # not only the top 24
    assert len({r["id"] for r in spec_rows(app.chart.spec) if r.get("id")}) <= TOP + 1
    # the picker's filters reach the comparison through the state
    app.picker.vendor.value = "NVIDIA"
    app.picker.min_memory.value = "80"
    assert app.state.gpu_filters == {"vendor": "NVIDIA", "min_memory": "80 GiB"}
    want = {d.id for d in db.filter(vendor="NVIDIA", min_memory="80 GiB")}
    body = app.explore.table.value
    assert set(re.findall(r"data-gpu='([^']+)'", body)) == want
    assert f"{len(want)} GPUs pass the GPU filters" in body
    # sorted by the shortest step: the times rise down the table
    app.explore.metric.value = "step_time"
    body = app.explore.table.value
    ms = [float(x.replace(",", "")) for x in re.findall(r"([\d,.]+) ms per step", body)]
    assert len(ms) == len(want) and ms == sorted(ms)
    assert app.explore.shown_view == "compare" and not app.explore.status.value


def test_the_gpu_filters_stay_on_the_picker_across_a_language_switch(app):
    app.picker.vendor.value = "AMD"
    app.picker.min_memory.value = "128"
    app.set_lang("zh")
    assert app.state.gpu_filters == {"vendor": "AMD", "min_memory": "128 GiB"}
    assert app.picker.vendor.value == "AMD" and app.picker.min_memory.value == "128 GiB"
    assert {v for _l, v in app.picker.list.options} == {
        d.id for d in app.db.filter(vendor="AMD", min_memory="128 GiB")}


# ---- GPUs needed: a click on a point of the front applies its layout through the state
def test_clicking_a_point_of_the_gpus_needed_front_applies_that_layout(app):
    from vramplan.charts.cluster_front import FRONT_SELECTION, front_rows
    from vramplan.charts.theme import spec_rows
    from vramplan.ui.widgets.cluster_view import ROWS
    app.state.apply(PIPELINE)
    view = app.cluster
    assert view.front and view.chart.widget is not None, view.status.value
    rows = list({r["i"]: r for r in spec_rows(view.chart.spec) if "layout" in r}.values())
    assert len(rows) == min(len(view.front), ROWS)
    assert [r["gpus"] for r in rows] == [o.layout.gpus for o in view.front[:len(rows)]]
    assert rows == front_rows(view.front[:len(rows)])
    # fewest GPUs first, each faster than every layout on fewer GPUs (the Pareto front)
    assert all(a["gpus"] < b["gpus"] and a["step_s"] > b["step_s"]
               for a, b in zip(rows, rows[1:]))
    pick = view.front[1]
    # what the front end sends on a click (a Vega point selection's signal)
    view.chart.widget._vl_selections = {
        FRONT_SELECTION: {"value": {"vlPoint": {"or": [{"i": 1}]}}, "store": []}}
    assert app.scenario == pick.estimate.scenario
    assert app.scenario.parallel.gpus == pick.layout.gpus
    assert "Applied" in app.notices.value
    assert app.state.undo() and app.scenario.parallel.gpus == 64
