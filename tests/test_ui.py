"""The planner widgets, driven in plain pytest by setting values (no browser, no kernel)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("altair")

from vramplan.charts import selected_ids  # noqa: E402
from vramplan.ui import App  # noqa: E402
from vramplan.ui.widgets.device_card import device_card_html  # noqa: E402
from vramplan.ui.widgets.gpu_picker import device_order, with_default_unit  # noqa: E402
from vramplan.ui.state.state import default_gpu  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def app(new_app):
    return new_app(lazy_chart=False)


def _other(db, gpu):
    dev = db.get(gpu)
    return next(d for d in db.devices if d.id != dev.id and d.memory_type != dev.memory_type)


def _ids(app):
    return [v for _, v in app.picker.list.options]


def _view(app, view):
    app.explore.view.value = view
    assert app.explore.shown_view == view, app.explore.status.value
    return app.chart.spec


def test_app_starts_on_the_default_gpu(app, db):
    assert app.gpu == default_gpu(db)
    dev = db.get(app.gpu)
    assert dev.name in app.card.value
    assert app.chart.loaded and app.chart.error is None
    assert app.explore.shown_view == "curve"
    assert selected_ids(_view(app, "landscape")) == [app.gpu]
    assert app.url.gpu == app.gpu
    assert app.picker.list.value == app.gpu
    assert len(_ids(app)) == len(db.devices)


def test_picking_a_gpu_updates_card_chart_and_url(app, db):
    _view(app, "landscape")
    before_card, before_spec = app.card.value, app.chart.spec
    other = _other(db, app.gpu)
    app.picker.list.value = other.id            # what a click in the list does
    assert app.gpu == other.id
    assert app.card.value != before_card
    assert other.name in app.card.value and other.memory_type in app.card.value
    assert selected_ids(app.chart.spec) == [other.id]
    assert selected_ids(before_spec) != [other.id]
    assert app.url.gpu == other.id and f"gpu={other.id}" in app.url.query


def test_setting_the_gpu_by_alias_moves_the_list(app, db):
    other = _other(db, app.gpu)
    app.gpu = other.name.upper()                # any name the database resolves
    assert app.gpu == other.id
    assert app.picker.list.value == other.id


def test_card_is_one_api_call(app, db):
    """Everything the card shows comes from get_gpu(id).to_dict() (and the source index)."""
    assert app.card.value == device_card_html(db.get(app.gpu).to_dict(), db.sources)


def test_card_shows_memory_bandwidth_hierarchy_links_and_sources(db):
    dev = max(db.devices, key=lambda d: (len(d.throughput), bool(d.interconnect)))
    d = dev.to_dict()
    html = device_card_html(d, db.sources)
    assert f"{dev.bandwidth_gbs:,.1f} GB/s" in html          # units.format_gbs (TB/s before)
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
    assert set(_ids(app)) == {d.id for d in db.filter(vendor=vendor)}
    app.picker.vendor.value = ""
    app.picker.min_memory.value = "80"          # plain number: GiB, as the label says
    assert set(_ids(app)) == {d.id for d in db.filter(min_memory="80 GiB")}
    assert "≥ 80 GiB" in app.picker.count.value
    app.picker.min_bandwidth.value = "2 TB/s"
    assert set(_ids(app)) == {d.id for d in db.filter(min_memory="80 GiB",
                                                       min_bandwidth="2 TB/s")}
    assert app.picker.message.value == ""
    assert with_default_unit("2000", "GB/s") == "2000 GB/s"
    assert with_default_unit("96GB", "GiB") == "96GB"


def test_the_list_keeps_one_order_whatever_the_filters(app, db):
    first = _ids(app)
    assert db.get(first[0]).vendor == "NVIDIA"
    assert first == [d.id for d in sorted(db.devices, key=device_order)]
    app.picker.min_memory.value = "16"
    after = _ids(app)
    assert after == [i for i in first if i in set(after)]     # NVIDIA first still
    assert db.get(after[0]).vendor == "NVIDIA"


def test_a_plain_number_too_large_for_its_unit_is_refused(app, db):
    app.picker.min_memory.value = "1e9"         # bytes or GiB? neither is assumed
    msg = app.picker.message.value
    assert "1e9" in msg and "write the unit" in msg and len(_ids(app)) == len(db.devices)
    app.picker.min_memory.value = "1e9 B"       # with its unit: 0.93 GiB
    assert app.picker.message.value == "" and len(_ids(app)) == len(db.filter(
        min_memory="1e9 B"))


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
    assert "unknown GPU" in app.notices.value and app.notices.layout.display != "none"
    buttons = app.notices.choices.children          # the page offers GPUs to pick
    assert buttons and all(b.tooltip in {d.id for d in db.devices} for b in buttons)
    buttons[1].click()
    assert app.gpu == buttons[1].tooltip
    assert app.notices.layout.display == "none"


def test_layout_hooks_for_later_panels(app):
    import ipywidgets as W
    extra_control, extra_result = W.HTML("control"), W.HTML("result")
    app.add_control(extra_control)
    app.add_result(extra_result)
    assert app.controls.children[-1] is extra_control
    assert app.results.children[-1] is extra_result
    heard = []
    app.on_estimate(lambda a: heard.append(a.estimate))
    app.workload.set("batch_size", "2")
    assert heard and heard[-1].scenario.batch_size == 2


def test_charts_attach_after_first_paint_in_a_kernel(new_app, kernel_loop):
    """In a kernel the charts are prepared in a thread and attached on the kernel's loop."""
    app = new_app()
    assert kernel_loop.wait_for(lambda: app.panel.chart.loaded and app.chart.loaded, 90)
    assert kernel_loop.calls                   # the charts came through the loop
    assert app.panel.chart.error is None and app.explore.shown_view == "curve"


def test_chart_widget_is_created_once_and_swapped(app, db):
    widget = app.chart.widget
    for view in ("compare", "hierarchy", "landscape"):
        _view(app, view)
        assert app.chart.widget is widget
    for dev in db.devices[:3]:
        app.picker.list.value = dev.id
        assert app.chart.widget is widget
        assert selected_ids(app.chart.spec) == [dev.id]


def test_importing_the_ui_does_not_import_altair():
    code = ("import sys, vramplan.ui, vramplan.ui.widgets.app; "
            "assert 'altair' not in sys.modules, 'altair imported'")
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




def test_verdict_says_no_limit_for_a_null_max_batch():
    """The estimate's null max batch (memory does not grow with the batch) is not 'none'
    (which means batch 1 does not fit) and never a search cap."""
    from vramplan.estimate import estimate
    from vramplan.ui.widgets.verdict import verdict_html
    e = estimate({"model": "gpt2", "task": "load"}, "nvidia-h100-sxm5-80gb").to_dict()
    assert e["max_batch_size"] is None
    html = verdict_html(e, batched=True)
    assert "no limit" in html and "memory does not grow with the batch" in html
    assert "1,048,576" not in html and "batch 1 does not fit" not in html
    zero = {**e, "max_batch_size": 0}
    assert "batch 1 does not fit" in verdict_html(zero, batched=True)
