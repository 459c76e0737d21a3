"""The planner widgets, driven in plain pytest by setting values (no browser, no kernel)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("altair")

from vramplan.charts import selected_ids  # noqa: E402
from vramplan.hardware import default_db  # noqa: E402
from vramplan.ui import App  # noqa: E402
from vramplan.ui import panels  # noqa: E402
from vramplan.ui.app import default_gpu  # noqa: E402
from vramplan.ui.controls import with_default_unit  # noqa: E402
from vramplan.ui.panels import device_card_html  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def db():
    return default_db()


@pytest.fixture
def app(db, monkeypatch):
    monkeypatch.delenv("QUERY_STRING", raising=False)
    return App(db=db, lazy_chart=False)


def _other(db, gpu):
    dev = db.get(gpu)
    return next(d for d in db.devices if d.id != dev.id and d.memory_type != dev.memory_type)


def _ids(app):
    return [v for _, v in app.picker.list.options]


def test_app_starts_on_the_default_gpu(app, db):
    assert app.gpu == default_gpu(db)
    dev = db.get(app.gpu)
    assert dev.name in app.card.value
    assert app.chart.loaded and app.chart.error is None
    assert selected_ids(app.chart.spec) == [app.gpu]
    assert app.url.gpu == app.gpu
    assert app.picker.list.value == app.gpu
    assert len(_ids(app)) == len(db.devices)


def test_picking_a_gpu_updates_card_chart_and_url(app, db):
    before_card, before_spec = app.card.value, app.chart.spec
    other = _other(db, app.gpu)
    app.picker.list.value = other.id            # what a click in the list does
    assert app.gpu == other.id
    assert app.card.value != before_card
    assert other.name in app.card.value and other.memory_type in app.card.value
    assert selected_ids(app.chart.spec) == [other.id]
    assert selected_ids(before_spec) != [other.id]
    assert app.url.gpu == other.id


def test_setting_the_gpu_by_alias_moves_the_list(app, db):
    other = _other(db, app.gpu)
    app.gpu = other.name.upper()                # any name the database resolves
    assert app.gpu == other.id
    assert app.picker.list.value == other.id
    assert selected_ids(app.chart.spec) == [other.id]


def test_card_is_one_api_call(app, db):
    """Everything the card shows comes from get_gpu(id).to_dict() (and the source index)."""
    assert app.card.value == device_card_html(db.get(app.gpu).to_dict(), db.sources)


def test_card_shows_memory_bandwidth_hierarchy_links_and_sources(db):
    dev = max(db.devices, key=lambda d: (len(d.throughput), bool(d.interconnect)))
    d = dev.to_dict()
    html = device_card_html(d, db.sources)
    assert f"{dev.bandwidth_gbs / 1000:.2f} TB/s" in html or f"{dev.bandwidth_gbs:,.0f} GB/s" in html
    if dev.bus_width_bits and dev.data_rate_gbps:
        assert f"{dev.bus_width_bits:,}-bit" in html
    for src in dev.sources:
        if src.url:
            assert f"href='{src.url}'" in html.replace("&amp;", "&")
    if dev.hierarchy.get("l2_mib"):
        assert "L2 cache" in html
    if "fp16" in dev.throughput:
        assert "FP16" in html
    if dev.tdp_w:
        assert f"{dev.tdp_w:,} W" in html


def test_card_tolerates_a_sparse_device():
    html = device_card_html({"id": "x", "vendor": "Acme", "name": "Acme <X1>",
                             "memory_bytes": 8 * 2**30, "bandwidth_gbs": 100.0})
    assert "Acme &lt;X1&gt;" in html         # escaped
    assert "not in the database" in html and "none recorded" in html


def test_vendor_and_minimum_filters_are_hardwaredb_filter(app, db):
    vendor = db.devices[-1].vendor
    app.picker.vendor.value = vendor
    assert _ids(app) == [d.id for d in db.filter(vendor=vendor)]
    app.picker.vendor.value = ""
    app.picker.min_memory.value = "80"          # plain number: GiB
    assert _ids(app) == [d.id for d in db.filter(min_memory="80 GiB")]
    app.picker.min_bandwidth.value = "2 TB/s"
    assert _ids(app) == [d.id for d in db.filter(min_memory="80 GiB", min_bandwidth="2 TB/s")]
    assert app.picker.message.value == ""
    assert with_default_unit("2000", "GB/s") == "2000 GB/s"
    assert with_default_unit("96GB", "GiB") == "96GB"


def test_bad_filter_text_is_explained_inline_and_kept(app, db):
    app.picker.min_memory.value = "abc"
    msg = app.picker.message.value
    assert "Min memory" in msg and "abc" in msg and "Traceback" not in msg
    assert app.picker.min_memory.value == "abc"                 # what the user typed stays
    assert "vp-input-error" in app.picker.min_memory._dom_classes
    assert len(_ids(app)) == len(db.devices)                    # the bad filter is ignored
    app.picker.min_bandwidth.value = "fast"
    assert "Min bandwidth" in app.picker.message.value
    app.picker.min_memory.value = "40 GiB"
    app.picker.min_bandwidth.value = ""
    assert app.picker.message.value == ""
    assert "vp-input-error" not in app.picker.min_memory._dom_classes


def test_filters_hide_but_never_change_the_choice(app):
    chosen = app.gpu
    app.picker.min_memory.value = "100 TiB"
    assert _ids(app) == []
    assert "No GPU matches" in app.picker.message.value
    assert app.gpu == chosen and "hidden by the filters" in app.picker.count.value
    app.picker.min_memory.value = ""
    assert app.picker.list.value == chosen


def test_search_matches_name_id_and_alias(app, db):
    dev = next(d for d in db.devices if d.aliases)
    app.picker.search.value = dev.aliases[0].lower()
    assert dev.id in _ids(app)
    app.picker.search.value = "no-such-gpu-anywhere"
    assert _ids(app) == []


def test_gpu_from_the_voila_query_string(db, monkeypatch):
    other = _other(db, default_gpu(db))
    monkeypatch.setenv("QUERY_STRING", f"gpu={other.id}&x=1")
    assert App(db=db, lazy_chart=False).gpu == other.id
    monkeypatch.setenv("QUERY_STRING", "gpu=not-a-gpu")
    app = App(db=db, lazy_chart=False)
    assert app.gpu == default_gpu(db)
    assert "unknown GPU" in app.notice.value and app.notice.layout.display != "none"
    app.picker.list.value = other.id
    assert app.notice.value == "" and app.notice.layout.display == "none"


def test_layout_hooks_for_later_panels(app):
    import ipywidgets as W
    extra_control, extra_result = W.HTML("control"), W.HTML("result")
    app.add_control(extra_control)
    app.add_result(extra_result)
    assert app.controls.children[-1] is extra_control
    assert app.results.children[-1] is extra_result


def test_chart_attaches_after_first_paint_in_a_kernel(db, monkeypatch):
    """In a kernel the chart is prepared in a thread and attached on the kernel's loop."""
    done = threading.Event()
    calls = []

    class Loop:                       # two charts: the breakdown and capacity/bandwidth
        def add_callback(self, fn):
            fn()
            calls.append(fn)
            if len(calls) == 2:
                done.set()

    class Kernel:
        io_loop = Loop()

    monkeypatch.setattr(panels, "_kernel", lambda: Kernel())
    monkeypatch.delenv("QUERY_STRING", raising=False)
    import vramplan.ui.app as app_mod
    monkeypatch.setattr(app_mod, "_kernel", lambda: Kernel())
    app = App(db=db)
    assert done.wait(60)
    assert app.panel.chart.loaded and app.panel.chart.error is None
    assert app.chart.loaded and selected_ids(app.chart.spec) == [app.gpu]
    other = _other(db, app.gpu)
    app.picker.list.value = other.id
    assert selected_ids(app.chart.spec) == [other.id]


def test_chart_widget_is_created_once_and_swapped(app, db):
    widget = app.chart.widget
    for dev in db.devices[:3]:
        app.picker.list.value = dev.id
        assert app.chart.widget is widget
        assert selected_ids(app.chart.spec) == [dev.id]


def test_importing_the_ui_does_not_import_altair():
    code = "import sys, vramplan.ui; assert 'altair' not in sys.modules, 'altair imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- `vramplan app` and the files it serves
def test_app_command_serves_the_notebook_with_the_cdn_free_template(capsys):
    from vramplan.cli import main
    from vramplan.commands import app as app_cmd
    assert main(["app", "--port", "9999", "--print-command"]) == 0
    out = capsys.readouterr().out
    assert "--template=vramplan-lab" in out and "--port=9999" in out
    assert "notebooks/planner.ipynb" in out
    assert out.startswith(f"JUPYTER_PATH={app_cmd.templates_dir()}")
    tpl = app_cmd.templates_dir() / "voila" / "templates" / "vramplan-lab"
    assert json.loads((tpl / "conf.json").read_text())["base_template"] == "lab"
    assert (tpl / "index.html.j2").is_file()
    assert app_cmd.jupyter_path({"JUPYTER_PATH": "/a"}).split(":") == [
        str(app_cmd.templates_dir()), "/a"]


def test_planner_notebook_is_a_thin_shell():
    nb = json.loads((ROOT / "notebooks" / "planner.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert len(code) == 1
    src = "".join(code[0]["source"])
    assert "from vramplan.ui import App" in src and src.rstrip().endswith("App()")
    assert all(c["cell_type"] == "code" for c in nb["cells"])  # Voila would show markdown
    assert not code[0]["outputs"]


# -- the planner: workload controls -> Scenario.from_dict -> estimate -> panels
def _plain(html: str) -> str:
    import re
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_default_plan_is_estimated_and_shown(app):
    from vramplan.estimate import estimate
    est = estimate(app.scenario).to_dict()
    assert app.scenario.task == "lora" and app.estimate is not None
    text = _plain(app.panel.value)
    assert f"Fits on {est['gpu']['name']}" in text if est["fits"] else "Does not fit" in text
    gib = est["per_gpu"]["device_used_bytes"] / 2**30
    assert f"{gib:,.1f} GiB" in text
    assert f"{est['per_gpu']['peak_allocated_bytes'] / 2**30:,.1f} GiB" in text
    assert est["peak_phase"] in text
    assert app.url.query == app.scenario.to_query()
    from vramplan.charts import chart_rows
    rows = chart_rows(app.panel.chart.spec)
    comps = {r["component"]: r["bytes"] for r in rows if "component" in r}
    assert comps == {k: v for k, v in est["per_gpu"]["components"].items() if v}


def test_model_task_and_batch_change_the_estimate(app):
    from vramplan.charts import chart_rows
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


def test_tasks_and_fields_follow_the_model_family(app):
    app.workload.set("model", "torchvision/resnet50")
    tasks = [v for _, v in app.workload.task.options]
    assert "generate" not in tasks and "lora" not in tasks and "train" in tasks
    assert app.scenario.task in tasks
    f = app.workload.fields
    assert f["resolution"].visible and not f["seq_len"].visible
    app.workload.set("resolution", "512x512")
    assert app.scenario.resolution == (512, 512)
    app.workload.set("model", "meta-llama/Llama-3.1-8B")
    app.workload.set("task", "generate")
    assert f["seq_len"].visible and f["new_tokens"].visible and not f["resolution"].visible
    assert not f["optimizer"].visible                  # generate does not train


def test_tasks_come_from_valid_tasks_not_from_trial_estimates(app, monkeypatch):
    from vramplan import estimate as E
    from vramplan.scenario import valid_tasks
    calls = []
    real = E.estimate
    monkeypatch.setattr(E, "estimate", lambda *a, **k: calls.append(a) or real(*a, **k))
    for model in ("torchvision/vit_b_16", "bert-base-uncased", "black-forest-labs/FLUX.1-dev",
                  "t5-small"):
        calls.clear()
        app.workload.set("model", model)
        assert tuple(v for _, v in app.workload.task.options) == valid_tasks(model)
        assert len(calls) <= 1                 # the plan's own estimate, no probing per task


def test_model_defaults_show_as_values_and_hints(app):
    w, f = app.workload, app.workload.fields
    w.set("model", "black-forest-labs/FLUX.1-dev")
    w.set("task", "denoise")
    shown = {k: f[k].widget.value for k in ("resolution", "steps", "text_len", "guidance")}
    assert shown == {"resolution": "1024 × 1024", "steps": "28", "text_len": "512",
                     "guidance": False}                # guidance-distilled: no CFG
    assert all(f[k].visible for k in shown) and not f["frames"].visible
    assert f["resolution"].widget.placeholder == "default 1024 × 1024"
    assert not w.entries and app.scenario.steps == 28
    w.set("steps", "8")
    assert app.scenario.steps == 8 and "steps=8" in app.url.query
    w.set("steps", "")                                 # cleared: the default again
    assert f["steps"].widget.value == "28" and app.scenario.steps == 28
    w.set("guidance", True)
    assert app.scenario.guidance is True
    w.set("model", "THUDM/CogVideoX-5b")
    assert f["frames"].visible and f["frames"].widget.value == "49"
    assert f["resolution"].widget.value == "480 × 720"
    w.set("model", "stable-diffusion-v1-5/stable-diffusion-v1-5")
    assert f["resolution"].widget.value == "512 × 512" and not f["frames"].visible
    w.set("model", "stabilityai/stable-diffusion-xl-base-1.0")
    assert f["resolution"].widget.value == "1024 × 1024"    # not SD 1.5's size carried over
    assert app.scenario.resolution == (1024, 1024)
    w.set("task", "lora")                              # training: no sampling steps, no CFG
    assert not f["steps"].visible and not f["guidance"].visible and f["resolution"].visible
    w.set("model", "torchvision/vit_b_16")
    assert f["resolution"].widget.value == "224 × 224" and not f["text_len"].visible


def test_size_only_plan(app):
    app.workload.set("params", "7B")
    assert app.scenario.architecture == {"params": 7e9}
    assert app.workload.fields["architecture"].visible
    app.workload.set("params", "lots")
    assert "architecture" in app.workload.errors.get("architecture", "")


@pytest.mark.parametrize("key,bad", [("batch_size", "0"), ("seq_len", "abc"),
                                     ("lora.rank", "-3"), ("parallel.gpus", "3x")])
def test_bad_value_is_explained_next_to_its_control(app, key, bad):
    good = app.panel.value
    good_sc = app.scenario
    app.workload.set(key, bad)
    msg = app.workload.errors.get(key, "")
    assert key in msg and "Traceback" not in msg
    assert app.workload.fields[key].widget.value == bad             # kept as typed
    assert app.panel.is_stale and app.scenario == good_sc           # last good plan, dimmed
    assert _plain(good).split("Fits")[-1][:40] in _plain(app.panel.value)
    app.workload.set(key, "")                                       # cleared: the default
    assert not app.workload.errors and not app.panel.is_stale


def test_too_small_gpu_does_not_fit(app, db):
    app.gpu = "nvidia-rtx-4060"
    assert not app.estimate.fits
    assert "Does not fit on" in app.panel.value and "short by" in app.panel.value
    assert app.scenario.gpu == "nvidia-rtx-4060"


def test_url_round_trip(db, monkeypatch):
    from vramplan.scenario import Scenario
    q = ("model=meta-llama/Llama-3.1-8B&task=lora&gpu=nvidia-rtx-4090&checkpointing=full"
         "&lora.rank=16&batch_size=2")
    monkeypatch.setenv("QUERY_STRING", q)
    app = App(db=db, lazy_chart=False)
    assert app.scenario == Scenario.from_query(q)
    assert app.gpu == "nvidia-rtx-4090"
    assert app.workload.fields["lora.rank"].widget.value == "16"
    assert app.workload.fields["checkpointing"].widget.value == "full"
    assert Scenario.from_query(app.url.query) == app.scenario
    again = App(db=db, lazy_chart=False, scenario=app.url.query)
    assert again.scenario == app.scenario
    monkeypatch.setenv("QUERY_STRING", "model=no-such-model&task=train")
    bad = App(db=db, lazy_chart=False)
    assert "rejected" in bad.notice.value and bad.scenario is not None


def test_export_holds_scenario_and_estimate_json(app):
    import html as H
    import json as J
    text = app.panel.export.value
    assert "data:application/json" in text and "http" not in text.replace("https://vega", "")
    sc_json = text.split("vp-scenario-json'>")[1].split("</pre>")[0]
    assert J.loads(H.unescape(sc_json)) == app.scenario.to_dict()


# -- offload, serving and the model-less workloads (render / volume / array)
def test_offload_boxes_follow_the_task_and_change_the_estimate(app):
    w = app.workload
    w.set("model", "meta-llama/Llama-3.1-8B")
    w.set("task", "train")
    shown = {k for k, b in w.offload.items() if b.layout.display != "none"}
    assert shown == {"optimizer", "params", "gradients", "activations"}
    before = app.estimate.device_used_bytes
    w.set("offload.optimizer", True)
    assert app.scenario.offload == ("optimizer",)
    assert app.estimate.device_used_bytes < before and "offload=optimizer" in app.url.query
    w.set("model", "stabilityai/stable-diffusion-xl-base-1.0")
    w.set("task", "denoise")                           # inference of a pipeline: `model`
    shown = {k for k, b in w.offload.items() if b.layout.display != "none"}
    assert shown == {"model"} and app.scenario.offload == ()
    before = app.estimate.device_used_bytes
    w.set("offload.model", True)
    assert app.scenario.offload == ("model",) and app.estimate.device_used_bytes < before


def test_serving_fields_for_serve(app):
    w, f = app.workload, app.workload.fields
    w.set("model", "meta-llama/Llama-3.1-8B")
    w.set("task", "generate")
    assert not f["serving.max_num_seqs"].visible
    w.set("task", "serve")
    keys = ("serving.gpu_memory_utilization", "serving.max_num_seqs", "serving.max_model_len",
            "serving.kv_cache_dtype", "serving.cuda_graphs")
    assert all(f[k].visible for k in keys)
    assert f["serving.max_num_seqs"].widget.value == "256"      # the normalised default
    w.set("serving.max_model_len", "8192")
    w.set("serving.kv_cache_dtype", "fp8")
    w.set("serving.cuda_graphs", False)
    s = app.scenario.serving
    assert (s.max_model_len, s.kv_cache_dtype, s.cuda_graphs) == (8192, "fp8", False)
    assert "serve" in app.panel.value and "8,192 tokens" in _plain(app.panel.value)
    w.set("serving.max_num_seqs", "0")
    assert "serving.max_num_seqs" in w.errors.get("serving.max_num_seqs", "")
    assert f["serving.max_num_seqs"].widget.value == "0" and app.panel.is_stale


def test_model_less_render_volume_array(app):
    w, f = app.workload, app.workload.fields
    w.set("family", "no-model")
    assert app.scenario.model is None and app.scenario.task == "render"
    assert [v for _, v in w.task.options] == ["render", "volume", "array"]
    assert not f["model"].visible and app.workload.run_box.layout.display == "none"
    assert not f["batch_size"].visible and f["msaa"].visible and f["fps"].visible
    assert f["resolution"].widget.placeholder == "default 1080 × 1920"
    before = app.estimate.device_used_bytes
    w.set("resolution", "2160x3840")
    w.set("msaa", 4)
    w.set("render_targets", "HDR · rgba16f")
    assert app.scenario.resolution == (2160, 3840) and app.scenario.extra["msaa"] == 4
    assert app.scenario.extra["render_targets"][0]["format"] == "rgba16f"
    assert app.estimate.device_used_bytes > before
    assert "render · 2160×3840, MSAA 4×" in _plain(app.panel.value)
    w.set("fps", "0")                                   # rejected, kept, explained
    assert "fps" in w.errors.get("fps", "") and f["fps"].widget.value == "0"
    w.set("fps", "120")
    assert not w.errors and app.scenario.extra["fps"] == 120
    # a link reopens it
    again = App(db=app.db, lazy_chart=False, scenario=app.url.query)
    assert again.scenario == app.scenario
    assert again.workload.fields["render_targets"].widget.value == "HDR · rgba16f"

    w.set("task", "volume")
    assert f["batch_size"].visible and f["channels"].visible and not f["msaa"].visible
    assert app.scenario.resolution == (512, 512, 512)   # volume's default, not render's pixels
    used = app.estimate.device_used_bytes
    w.set("resolution", "1024x1024x1024")
    w.set("dtype", "float16")
    assert app.scenario.resolution == (1024, 1024, 1024)
    assert app.scenario.extra["dtype"] == "float16" and app.estimate.device_used_bytes > used
    w.set("channels", "0")
    assert "channels" in w.errors.get("channels", "")
    w.set("channels", "")

    w.set("task", "array")
    assert f["arrays.shape"].visible and not f["dtype"].visible
    used = app.estimate.device_used_bytes
    w.set("arrays.shape", "8192 x 8192")
    w.set("arrays.dtype", "complex128")
    assert app.scenario.extra["arrays"][0]["shape"] == [8192, 8192]
    assert app.estimate.device_used_bytes - used >= 8192 * 8192 * 16
    w.set("arrays.shape", "0 x 5")
    assert "arrays[0].shape[0]" in w.errors.get("arrays.shape", "")
    assert f["arrays.shape"].widget.value == "0 x 5"

    w.set("family", "")                                # back to a model
    w.set("model", "gpt2")
    assert app.scenario.model == "gpt2" and app.workload.run_box.layout.display == ""
    assert f["batch_size"].visible and not f["arrays.shape"].visible
