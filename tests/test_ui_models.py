"""How many widget models the page makes: the browser fetches the state of every one when the
page loads (Voila's widget manager gives the kernel 4 s for all of them, then asks one widget
at a time), so the first chart waits on this count. A field's widgets are made when the form
first shows it; layouts and styles are shared (`ui/looks.py`)."""
from __future__ import annotations

import warnings

import pytest

W = pytest.importorskip("ipywidgets")

from vramplan.ui.widgets.workload import SKIP  # noqa: E402

# 623 models before the form built its fields on first show with shared layouts and styles
# (2026-12-01). The default plan's page: 318 -> 305 and 196 -> 128 before the first paint
# (2026-12-02, issue 19.6): the first screen's boxes share one layout, and the form's
# parallelism section and the GPU picker (below the first screen) are made at the first paint
PAGE_MODELS = 310
FIRST_SCREEN_MODELS = 130


def _models() -> set[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)    # Widget.widgets
        return set(W.Widget.widgets)


def _tree(widget, seen: set) -> set:
    """The model ids of a widget, its layout, its style and its children's, recursively."""
    if not isinstance(widget, W.Widget) or widget.model_id in seen:
        return seen
    seen.add(widget.model_id)
    for name in ("layout", "style", "children"):
        v = getattr(widget, name, None)
        for x in v if isinstance(v, (list, tuple)) else [v]:
            _tree(x, seen)
    return seen


@pytest.fixture
def built(new_app):
    """(the default plan's page, the ids of the models its build made)."""
    before = _models()
    app = new_app(lazy_chart=True, charts=False)
    return app, _models() - before


def test_the_form_makes_widgets_only_for_the_fields_it_shows(built):
    app, _made = built
    shown = [f.key for f in app.state.fields if f.key not in SKIP]
    assert app.scenario.task == "lora" and len(shown) == 23   # + stack, safety_margin,
    # parallel.virtual_stages (parallel.expert: MoE models only)
    assert sorted(app.workload.widgets) == sorted(shown)   # nothing for another family's keys
    for key in ("resolution", "steps", "serving.max_num_seqs", "arrays", "new_tokens"):
        assert key not in app.workload.widgets
    assert set(app.workload.picker.boxes) == {"family", "model"}   # no size / config box yet


def test_a_field_is_three_models_and_a_check_box_one(built):
    """A text field: its box, its label and its input (the layouts and the styles shared, the
    message made at the first problem); a check box: itself."""
    app, _made = built
    fields = app.workload.widgets
    boxes = sum(len(getattr(w, "boxes", {})) for w in fields.values())
    assert boxes == 13                       # offload 3 + options 10 for Llama LoRA
    ids = set()
    for w in fields.values():
        ids |= _tree(w, set())
    shared = 5                               # layout; HTML, text, dropdown and check box styles
    assert len(ids) == 3 * len(fields) + boxes + shared == 87
    batch = fields["batch_size"]
    assert batch.message is None and batch.children == (batch.label, batch.input)
    app.workload.set("batch_size", "0")
    assert batch.error and batch.children[-1] is batch.message
    app.workload.set("batch_size", "4")
    assert not batch.error and batch.children == (batch.label, batch.input)


def test_the_page_stays_under_its_model_bound(built):
    """Building every field of every family again (or a layout and a style per widget) would
    pass the bound: each of the 20 fields alone was 11 models."""
    _app, made = built
    assert len(made) <= PAGE_MODELS, len(made)


def test_a_family_s_fields_are_made_when_it_is_chosen_then_kept(built):
    app, _made = built
    form = app.workload
    form.set("batch_size", "2")
    form.set("family", "diffusion")
    assert "resolution" in form.fields and "steps" in form.fields
    resolution = form.widgets["resolution"]
    form.set("family", "decoder")
    form.set("model", "meta-llama/Llama-3.1-8B")
    assert "resolution" not in form.fields and form.widgets["resolution"] is resolution
    form.set("family", "size-only")
    assert set(form.picker.boxes) == {"family", "model", "architecture"}
    assert form.picker.boxes["architecture"].layout.display == ""
    form.set("params", "70B")
    assert app.scenario.architecture == {"params": 70_000_000_000}


def test_the_panels_below_the_verdict_are_made_after_the_first_paint(new_app, kernel_loop):
    """In a kernel the page's first screen (the controls, the notices, the verdict and its
    breakdown) is all the browser fetches before the verdict shows; the advice, charts,
    details, GPU card, export, trace and live panels follow its first view. The kernel's loop
    keeps the timed callbacks: none are expected (a timer that built the panels while the
    browser still fetched the first screen's states made the widget manager log "widget model
    not found")."""
    before = _models()
    app = new_app(lazy_chart=True, charts=False)
    first = _models() - before
    assert not app.later and app.trace is None and not hasattr(app, "advisor")
    assert list(app.results.children) == [app.notices, app.panel]
    assert len(first) <= FIRST_SCREEN_MODELS, len(first)
    assert app.picker is None and list(app.controls.children) == [app.workload]
    assert not any(k.startswith("parallel.") for k in app.workload.widgets)
    assert app.workload.sections["parallel"].layout.display == "none"
    app.workload.set("batch_size", "2")            # edits before the paint render what exists
    app.panel.banner._view_count = 1               # the browser shows the verdict
    assert list(app.controls.children) == [app.workload, app.picker]
    assert app.picker.value == app.gpu and "parallel.gpus" in app.workload.fields
    assert app.workload.sections["parallel"].layout.display == ""
    assert app.later and app.results.children[2:4] == (app.ranks, app.advisor)
    assert app.results.children[-2:] == (app.trace, app.live)
    assert app.device.name in app.card.value and "batch_size=2" in app.export.share.query
    assert len(_models() - before) <= PAGE_MODELS
    app.set_lang("zh")                             # a new first screen, in Chinese
    assert not app.later and list(app.results.children) == [app.notices, app.panel, app.trace,
                                                           app.live]
    app.panel.banner._view_count = 1
    assert app.later and "撤销" == app.notices.undo.description
    assert list(app.results.children).count(app.trace) == 1
    fresh = new_app(lazy_chart=True, charts=False)
    english = fresh.panel.banner
    fresh.set_lang("zh")                           # switched before the first paint
    english._view_count = 1                        # a late view of the English page: its
    assert not fresh.later                         # build was replaced, so it makes nothing
    assert not kernel_loop.timed                          # and no timer builds while the browser
    fresh.panel.banner._view_count = 1             # may still fetch states; the Chinese view
    assert fresh.later and fresh.trace in fresh.results.children
