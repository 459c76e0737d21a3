"""The planner's plan widgets driven in plain pytest: the form follows `scenario.form`, edits
change the estimate, bad values are explained where they were typed, every chart view draws
for a plan of each family, uploads and undo."""
from __future__ import annotations

import datetime
import html as H
import json
import re

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("altair")

from vramplan.charts import SELECTION, chart_rows  # noqa: E402
from vramplan.estimate import estimate  # noqa: E402
from vramplan.scenario import Scenario, valid_tasks  # noqa: E402
from vramplan.scenario.form import fields as form_fields  # noqa: E402
from vramplan.ui import App  # noqa: E402
from vramplan.vocab import phase_label  # noqa: E402
from vramplan.ui.widgets.explore import VIEWS, available  # noqa: E402

LLAMA = "meta-llama/Llama-3.1-8B"
NOW = datetime.datetime.now(datetime.timezone.utc)


@pytest.fixture
def app(new_app):
    """The planner without its charts (each costs ~0.3 s per edit); `charted` has them."""
    return new_app(lazy_chart=False, charts=False)


@pytest.fixture
def charted(new_app):
    return new_app(lazy_chart=False)


def _plain(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", H.unescape(html)))


def _tasks(app):
    return [v for _, v in app.workload.fields["task"].input.options]


def test_default_plan_is_estimated_and_shown(charted):
    app = charted
    est = estimate(app.scenario).to_dict()
    assert app.scenario.task == "lora" and app.estimate is not None
    text = _plain(app.panel.value)
    assert f"Fits on {est['gpu']['name']}" in text if est["fits"] else "Does not fit" in text
    assert f"{est['per_gpu']['device_used_bytes'] / 2**30:,.2f} GiB" in text   # units.format_gib
    assert f"{est['per_gpu']['peak_allocated_bytes'] / 2**30:,.2f} GiB" in text
    assert phase_label(est["peak_phase"]) in text        # 'Backward', the one name (vocab)
    assert Scenario.from_query(app.url.query) == app.scenario
    assert "model=meta-llama/Llama-3.1-8B&" in app.url.query          # readable and exact
    rows = chart_rows(app.panel.chart.spec)
    comps = {r["component"]: r["bytes"] for r in rows if "component" in r}
    assert comps == {k: v for k, v in est["per_gpu"]["components"].items() if v}


def test_model_task_and_batch_change_the_estimate(charted):
    app = charted
    before_text, before_rows = app.panel.value, chart_rows(app.panel.chart.spec)
    app.workload.set("model", "gpt2")
    assert app.scenario.model == "gpt2" and "gpt2" in app.panel.value
    app.workload.set("task", "train")
    assert app.scenario.task == "train" and app.scenario.optimizer == "adamw"
    used1 = app.estimate.device_used_bytes
    app.workload.set("batch_size", "16")
    assert app.scenario.batch_size == 16 and app.estimate.device_used_bytes > used1
    assert "batch 16" in _plain(app.panel.value)
    assert app.panel.value != before_text and chart_rows(app.panel.chart.spec) != before_rows
    assert "batch_size=16" in app.url.query


@pytest.mark.parametrize("model", ["torchvision/resnet50", LLAMA, "t5-small",
                                   "black-forest-labs/FLUX.1-dev", "torchvision/vit_b_16"])
def test_the_form_on_the_page_is_the_scenarios_form(app, model):
    app.workload.set("model", model)
    for task in valid_tasks(model):
        app.workload.set("task", task)
        want = [f.key for f in form_fields({"model": model, "task": task})
                if f.key not in ("model", "architecture", "gpu")
                and not (f.kind == "object" and f.key not in ("render_targets", "arrays",
                                                              "work_buffers"))]
        assert set(app.workload.fields) == set(want), (model, task)
        assert _tasks(app) == list(valid_tasks(model))


def test_no_attention_for_resnet_no_sequence_for_images(app):
    app.workload.set("model", "torchvision/resnet50")
    f = app.workload.fields
    assert "attention" not in f and "seq_len" not in f and "resolution" in f
    assert "chunked-loss" not in f["options"].boxes or \
        f["options"].boxes["chunked-loss"] not in f["options"].input.children


def test_tasks_come_from_the_form_not_from_trial_estimates(app, monkeypatch):
    from vramplan.ui.state import state as S
    calls = []
    real = S.run_estimate
    monkeypatch.setattr(S, "run_estimate", lambda *a, **k: calls.append(a) or real(*a, **k))
    for model in ("torchvision/vit_b_16", "bert-base-uncased", "black-forest-labs/FLUX.1-dev",
                  "t5-small"):
        calls.clear()
        app.workload.set("model", model)
        assert tuple(_tasks(app)) == valid_tasks(model)
        assert len(calls) <= 1                 # the plan's own estimate, no probing per task


def test_model_defaults_show_as_values_and_hints(app):
    w = app.workload
    w.set("model", "black-forest-labs/FLUX.1-dev")
    f = w.fields
    shown = {k: f[k].value for k in ("resolution", "steps", "text_len", "guidance")}
    assert shown == {"resolution": "1024 × 1024", "steps": "28", "text_len": "512",
                     "guidance": False}                # guidance-distilled: no CFG
    assert "frames" not in f
    assert f["resolution"].input.placeholder == "default 1024 × 1024"
    assert app.state.draft == {"model": "black-forest-labs/FLUX.1-dev"}
    w.set("steps", "8")
    assert app.scenario.steps == 8 and "steps=8" in app.url.query
    w.set("steps", "")                                 # cleared: the default again
    assert w.fields["steps"].value == "28" and app.scenario.steps == 28
    w.set("guidance", True)                            # a checkbox: its label is whole
    assert app.scenario.guidance is True
    assert w.fields["guidance"].input.description == "Classifier-free guidance"
    w.set("model", "THUDM/CogVideoX-5b")
    assert w.fields["frames"].value == "49" and w.fields["resolution"].value == "480 × 720"
    w.set("model", "stable-diffusion-v1-5/stable-diffusion-v1-5")
    assert w.fields["resolution"].value == "512 × 512" and "frames" not in w.fields
    w.set("model", "stabilityai/stable-diffusion-xl-base-1.0")
    assert app.scenario.resolution == (1024, 1024)     # not SD 1.5's size carried over
    w.set("task", "lora")                              # training: no sampling steps, no CFG
    assert "steps" not in w.fields and "guidance" not in w.fields


def test_family_choice_switches_the_model_and_the_defaults(app):
    w = app.workload
    w.set("model", "mistralai/Mixtral-8x7B-v0.1")
    w.set("family", "diffusion")
    assert app.state.family == "diffusion" and app.scenario.task == "denoise"
    assert "Mixtral" not in app.panel.value
    w.set("model", "torchvision/resnet50")
    w.set("batch_size", "256")
    w.set("family", "no-model")
    w.set("task", "volume")
    assert app.scenario.batch_size == 1 and app.estimate.fits      # not ResNet's 256
    w.set("family", "")
    w.set("model", "torchvision/resnet50")
    w.set("resolution", "512x512")
    w.set("family", "no-model")
    assert app.scenario.resolution == (1080, 1920)                 # render's, not 512x512


def test_an_unknown_model_offers_catalog_matches(app):
    app.workload.set("model", "llama 8b")
    p = app.workload.picker
    assert "unknown model" in p.message.value
    names = [b.description for b in p.matches.children]
    assert names and all("llama" in n.lower() and "8b" in n.lower() for n in names)
    p.matches.children[0].click()
    assert app.scenario.model == names[0] and not p.matches.children
    app.workload.set("model", "bert")                 # by family or alias words too
    assert any("bert" in b.description for b in p.matches.children)


def test_size_only_and_70b_in_the_model_box(app):
    app.workload.set("model", "70B")
    assert app.scenario.architecture == {"params": 70_000_000_000}
    assert app.workload.picker.family.value == "size-only"
    assert "70B parameters" in app.workload.picker.hint.value
    app.workload.set("params", "lots")
    assert "not a parameter count" in app.workload.errors.get("model", "")


@pytest.mark.parametrize("key,bad", [("batch_size", "0"), ("seq_len", "abc"),
                                     ("lora.rank", "-3"), ("parallel.gpus", "3x")])
def test_bad_value_is_explained_next_to_its_control(app, key, bad):
    good = app.panel.value
    good_sc = app.scenario
    app.workload.set(key, bad)
    msg = app.workload.errors.get(key, "")
    assert key in msg and "Traceback" not in msg
    assert app.workload.fields[key].value == bad                     # kept as typed
    assert app.panel.is_stale and app.scenario == good_sc           # last good plan, dimmed
    assert _plain(good).split("Fits")[-1][:40] in _plain(app.panel.value)
    app.workload.set(key, "")                                       # cleared: the default
    assert not app.workload.errors and not app.panel.is_stale


def test_a_link_with_one_bad_value(db, monkeypatch):
    monkeypatch.setenv("QUERY_STRING", "model=gpt2&batch_size=abc")
    app = App(db=db, lazy_chart=False, charts=False)
    assert app.scenario.model == "gpt2"                              # the plan kept
    assert "batch_size" in app.workload.errors["batch_size"]
    assert app.workload.fields["batch_size"].value == "abc"
    assert app.url.query == "model=gpt2&batch_size=abc"              # the address kept
    assert "batch_size" in app.notices.value and not app.panel.is_stale


def test_too_small_gpu_does_not_fit(app):
    app.gpu = "nvidia-rtx-4060"
    assert not app.estimate.fits
    assert "Does not fit on" in app.panel.value and "short by" in app.panel.value
    assert app.scenario.gpu == "nvidia-rtx-4060"


def test_url_round_trip(db, monkeypatch):
    q = ("model=meta-llama/Llama-3.1-8B&task=lora&gpu=nvidia-rtx-4090&checkpointing=full"
         "&lora.rank=16&batch_size=2")
    monkeypatch.setenv("QUERY_STRING", q)
    app = App(db=db, lazy_chart=False, charts=False)
    assert app.scenario == Scenario.from_query(q) and app.gpu == "nvidia-rtx-4090"
    assert app.workload.fields["lora.rank"].value == "16"
    assert app.workload.fields["checkpointing"].value == "full"
    again = App(db=db, lazy_chart=False, charts=False, scenario=app.url.query)
    assert again.scenario == app.scenario
    monkeypatch.setenv("QUERY_STRING", "model=no-such-model&task=train")
    bad = App(db=db, lazy_chart=False, charts=False)
    assert "model" in bad.notices.value and bad.scenario is not None
    assert "unknown model" in bad.workload.errors["model"]


def test_export_holds_scenario_and_estimate_json(app):
    text = app.export.value
    assert "data:application/json" in text
    sc_json = text.split("vp-scenario-json'>")[1].split("</pre>")[0]
    assert json.loads(H.unescape(sc_json)) == app.scenario.to_dict()
    assert app.export.share.query == app.state.query   # the page adds scheme, host, path
    assert Scenario.from_query(app.state.query) == app.scenario


def test_notes_for_programs_are_hidden_and_numbers_readable(app):
    assert "components sum to" in json.dumps(app.estimate.to_dict()["notes"])
    assert "components sum to" not in app.details.value
    app.workload.set("task", "serve")
    text = _plain(app.details.value)
    assert "KV pool (tokens)" in text and "Kv pool" not in text
    assert re.search(r"\d{1,3}(,\d{3})+", text)                    # separators
    assert not re.search(r"\d{5,}\.\d+ [KMGTPE]?B", text)           # no 6199793.27 PB


def test_offload_boxes_follow_the_form_and_change_the_estimate(app):
    w = app.workload
    w.set("task", "train")
    boxes = w.fields["offload"]
    assert [b.description for b in boxes.input.children] == ["Optimizer", "Parameters",
                                                              "Activations"]
    before = app.estimate.device_used_bytes
    w.set("offload", ["optimizer"])
    assert app.scenario.offload == ("optimizer",)
    assert app.estimate.device_used_bytes < before and "offload=optimizer" in app.url.query
    w.set("model", "stabilityai/stable-diffusion-xl-base-1.0")
    assert [b.description for b in w.fields["offload"].input.children] == ["Whole components"]
    before = app.estimate.device_used_bytes
    w.set("offload", ["model"])
    assert app.scenario.offload == ("model",) and app.estimate.device_used_bytes < before


def test_serving_fields_for_serve(app):
    w = app.workload
    w.set("task", "generate")
    assert "serving.max_num_seqs" not in w.fields
    w.set("task", "serve")
    f = w.fields
    assert {k for k in f if k.startswith("serving.")} == {
        "serving.gpu_memory_utilization", "serving.max_num_seqs", "serving.max_model_len",
        "serving.max_num_batched_tokens", "serving.kv_cache_dtype", "serving.cuda_graphs"}
    assert f["serving.max_num_seqs"].value == "256"               # the form's default
    w.set("serving.max_model_len", "8192")
    w.set("serving.kv_cache_dtype", "fp8")
    w.set("serving.cuda_graphs", False)
    s = app.scenario.serving
    assert (s.max_model_len, s.kv_cache_dtype, s.cuda_graphs) == (8192, "fp8", False)
    assert "8,192 tokens" in _plain(app.panel.value)
    w.set("serving.max_num_seqs", "0")
    assert "serving.max_num_seqs" in w.errors.get("serving.max_num_seqs", "")
    assert w.fields["serving.max_num_seqs"].value == "0" and app.panel.is_stale


def test_model_less_render_volume_array(app):
    w = app.workload
    w.set("family", "no-model")
    assert app.scenario.model is None and app.scenario.task == "render"
    assert _tasks(app) == ["render", "volume", "array"]
    assert app.workload.picker.boxes["model"].layout.display == "none"
    f = w.fields
    assert "batch_size" not in f and "msaa" in f and "fps" in f and "precision" not in f
    assert f["resolution"].input.placeholder == "default 1,080 × 1,920".replace(",", "") or \
        f["resolution"].input.placeholder == "default 1080 × 1920"
    before = app.estimate.device_used_bytes
    w.set("resolution", "2160x3840")
    w.set("msaa", 4)
    w.set("render_targets", {"format": "rgba16f"})
    assert app.scenario.resolution == (2160, 3840) and app.scenario.extra["msaa"] == 4
    assert app.scenario.extra["render_targets"][0]["format"] == "rgba16f"
    assert app.estimate.device_used_bytes > before
    assert "render · 2160×3840, MSAA 4×" in _plain(app.panel.value)
    w.set("fps", "0")                                   # rejected, kept, explained
    assert "fps" in w.errors.get("fps", "") and w.fields["fps"].value == "0"
    w.set("fps", "120")
    assert not w.errors and app.scenario.extra["fps"] == 120
    again = App(db=app.db, lazy_chart=False, charts=False, scenario=app.url.query)
    assert again.scenario == app.scenario

    w.set("task", "volume")
    f = w.fields
    assert "batch_size" in f and "channels" in f and "msaa" not in f
    assert app.scenario.resolution == (512, 512, 512)   # volume's default, not render's
    used = app.estimate.device_used_bytes
    w.set("resolution", "1024x1024x1024")
    w.set("dtype", "float16")
    assert app.scenario.extra["dtype"] == "float16" and app.estimate.device_used_bytes > used

    w.set("task", "array")
    used = app.estimate.device_used_bytes
    w.set("arrays", {"shape": "8192 x 8192", "dtype": "complex128"})
    assert app.scenario.extra["arrays"][0]["shape"] == [8192, 8192]
    assert app.estimate.device_used_bytes - used >= 8192 * 8192 * 16
    w.set("arrays", {"shape": "0 x 5"})
    assert "arrays[0].shape[0]" in w.errors.get("arrays", "")

    w.set("family", "")
    w.set("model", "gpt2")
    assert app.scenario.model == "gpt2" and "batch_size" in w.fields


# ---- charts, uploads, undo
PLANS = [{"model": LLAMA, "task": "lora"}, {"model": LLAMA, "task": "generate"},
         {"model": "torchvision/resnet50"}, {"model": "bert-base-uncased"},
         {"model": "black-forest-labs/FLUX.1-dev"}, {"model": "t5-small"},
         {"task": "render"}, {"task": "volume"}]


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.get("model", p.get("task")))
def test_every_chart_view_draws_for_a_plan_of_each_family(charted, plan):
    app = charted
    app.state.apply(plan)
    views = available(app.state)
    assert {"compare", "hierarchy", "landscape"} <= set(views)
    for view in views:
        app.explore.view.value = view
        assert app.explore.shown_view == view and not app.explore.status.value, \
            (view, app.explore.status.value)
        spec = app.chart.spec
        assert spec and (spec.get("layer") or spec.get("mark") or spec.get("vconcat")), view
    assert set(views) <= set(VIEWS)


def test_memory_curve_marks_the_max_batch_and_larger_gpus(charted):
    from vramplan.ui.widgets.explore import larger_gpus
    app = charted
    app.gpu = "nvidia-rtx-4090"
    app.workload.set("task", "qlora")
    app.explore.view.value = "curve"
    text = json.dumps(app.chart.spec)
    assert f"max batch size {app.estimate.max_batch_size:,}" in text
    big = larger_gpus(app.db, app.device)
    assert len(big) == 2 and all(d.name in text for d in big)
    assert big[0].usable_bytes >= 1.4 * app.device.usable_bytes
    assert big[1].usable_bytes >= 1.4 * big[0].usable_bytes


def test_clicking_a_gpu_in_the_comparison_chooses_it(charted, db):
    app = charted
    from vramplan.charts import comparison_selected_ids, spec_rows
    app.explore.view.value = "compare"
    assert comparison_selected_ids(app.chart.spec) == [app.gpu]
    other = next(r["id"] for r in spec_rows(app.chart.spec) if r.get("id") not in
                 (None, app.gpu))
    widget = app.chart.widget
    # what the front end sends on a click (a Vega point selection's signal)
    widget._vl_selections = {SELECTION: {"value": {"vlPoint": {"or": [{"id": other}]}},
                                         "store": []}}
    assert app.gpu == other and other in app.url.query
    assert app.state.undo() and app.gpu != other


def test_a_config_json_upload_becomes_the_model(app):
    config = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632,
              "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
              "vocab_size": 32000, "max_position_embeddings": 2048}
    p = app.workload.picker
    p.family.value = "own-config"
    assert p.boxes["own"].layout.display == ""
    p.upload.value = ({"name": "config.json", "type": "application/json",
                       "size": len(json.dumps(config)),
                       "content": memoryview(json.dumps(config).encode()),
                       "last_modified": NOW},)
    assert app.scenario.architecture == config
    assert "Your own config.json" in p.hint.value and p.family.value == "own-config"
    p.paste.value = "{not json"
    p.use.click()
    assert "config" in p.message.value and app.scenario.architecture == config
    p.paste.value = json.dumps([1, 2])
    p.use.click()
    assert "JSON object" in p.message.value
    big = b"{" + b" " * 1_000_001 + b"}"
    p.upload.value = ({"name": "big.json", "type": "", "size": len(big),
                       "content": memoryview(big), "last_modified": NOW},)
    assert "at most 1,000,000" in p.message.value


def test_a_scenario_json_upload_applies_and_undo_restores(app):
    before = app.scenario
    data = json.dumps({"model": "gpt2", "task": "train", "batch_size": 4}).encode()
    app.export.upload.value = ({"name": "plan.json", "type": "", "size": len(data),
                                "content": memoryview(data), "last_modified": NOW},)
    assert app.scenario.model == "gpt2" and app.scenario.batch_size == 4
    assert "plan.json" in app.notices.value and not app.notices.undo.disabled
    app.notices.undo.click()
    assert app.scenario == before


def test_an_advisor_plan_applies_with_one_click_and_undo_restores(charted):
    app = charted
    app.state.apply({"model": LLAMA, "task": "train", "batch_size": 4, "seq_len": 4096,
                     "gpu": "nvidia-rtx-4090"})
    before = app.scenario
    assert not app.estimate.fits
    adv = app.state.advice
    assert adv is not None and adv.plans
    assert "Plan 1" in app.advisor.value and "saves" in app.advisor.value
    assert "savings" in available(app.state)
    app.explore.view.value = "savings"
    assert app.explore.shown_view == "savings" and "Today" in json.dumps(app.chart.spec)
    app.advisor.buttons[0].click()                     # the cheapest plan
    assert app.scenario == adv.plans[0].scenario and app.estimate.fits
    assert "Applied" in app.notices.value and "?" not in app.url.query[:1]
    assert Scenario.from_query(app.url.query) == app.scenario
    app.notices.undo.click()
    assert app.scenario == before and not app.estimate.fits
    assert "Room to grow" not in app.advisor.value
