"""The page's "Software" field (`stack`, ui/stack_field.py) driven without a browser: it offers
the stacks the core says run the plan's family and task (catalog.stacks.applicable via the
form's choices) with their change points as versions, a choice changes the estimate and the
address, a link round-trips, a bad link names `stack` and keeps the rest; the assumptions
panel shows the stack, its change point and each mechanism with its source."""
from __future__ import annotations

import html as H
import re

import pytest

pytest.importorskip("ipywidgets")

from vramplan.catalog import stacks  # noqa: E402
from vramplan.scenario import Scenario, form  # noqa: E402
from vramplan.ui import App  # noqa: E402

H100 = "nvidia-h100-sxm5-80gb"
# tests/test_stack_mechanisms.py's plan: Llama-3 8B, FSDP over 8 GPUs, compile on, 1 x 8192
FSDP = {"model": "meta-llama/Meta-Llama-3-8B", "task": "train", "batch_size": 1,
        "seq_len": 8192, "precision": "bf16-mixed", "parallel": {"gpus": 8, "zero": 3},
        "options": ["compile"]}


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", H.unescape(text)))


def _stack_field(plan: dict):
    return next(f for f in form.fields(plan) if f.key == "stack")


# ---------------------------------------------------------------- the core says which
def test_the_stacks_offered_follow_the_family_and_task():
    """From stacks.toml's families / tasks: a detector trains under torchvision, detectron2
    and mmdet, not torchtitan; an LLM engine is served by vLLM / SGLang / litgpt."""
    assert stacks.applicable("detection", "train") == (
        "pytorch", "hf", "deepspeed", "mmdet", "detectron2", "torchvision")
    assert stacks.applicable("decoder", "serve") == ("pytorch", "litgpt", "vllm", "sglang")
    assert stacks.applicable("diffusion", "denoise") == ("pytorch", "diffusers")
    assert "torchtitan" in stacks.applicable("decoder", "train")
    assert "torchtitan" not in stacks.applicable("decoder", "lora")    # pre-training only
    # torchtitan's change points (stacks.toml), newest first
    assert stacks.versions("torchtitan") == ("2025-12", "2025-07", "2025-05", "2025-04",
                                             "2024-10", "2024-04")
    assert stacks.versions("timm") == ()
    got = _stack_field({"model": "torchvision/resnet50", "task": "train"}).choices
    assert got[:2] == ("pytorch", "hf") and "torchtitan" not in got and "timm" in got
    llm = _stack_field({"model": "meta-llama/Llama-3.1-8B", "task": "train"}).choices
    assert llm[llm.index("torchtitan"):llm.index("torchtitan") + 7] == (
        "torchtitan", "torchtitan@2025-12", "torchtitan@2025-07", "torchtitan@2025-05",
        "torchtitan@2025-04", "torchtitan@2024-10", "torchtitan@2024-04")


def test_every_applicable_stack_and_version_is_a_valid_scenario():
    for fam_plan in ({"model": "meta-llama/Llama-3.1-8B", "task": "train"},
                     {"model": "meta-llama/Llama-3.1-8B", "task": "serve"},
                     {"model": "torchvision/resnet50", "task": "train"}):
        for value in _stack_field(fam_plan).choices:
            assert not form.check({**fam_plan, "stack": value}), value


# ---------------------------------------------------------------- the widget
@pytest.fixture
def fsdp(new_app):
    return new_app(lazy_chart=False, charts=False, gpu=H100, scenario=dict(FSDP))


def test_the_software_field_offers_names_and_change_points(fsdp):
    w = fsdp.workload.fields["stack"]
    assert [v for _, v in w.name.options] == list(stacks.applicable("decoder", "train"))
    assert w.value == "pytorch" and w.children_inputs() == (w.name,)     # no versions
    assert len(w.children) == 2                    # label and name: three models, as a FieldBox
    fsdp.workload.set("stack", "torchtitan")
    w = fsdp.workload.fields["stack"]
    assert list(w.version.options) == list(stacks.versions("torchtitan"))
    assert w.children_inputs() == (w.name, w.version) and w.version.placeholder == "latest"
    assert fsdp.scenario.stack == "torchtitan" and "stack=torchtitan" in fsdp.url.query
    assert "2025-04 compiled-loss on" in _plain(w.about.value)


def test_choosing_torchtitan_2025_06_changes_the_estimate_and_the_url(fsdp):
    """The compiled loss (PR #1033, change point 2025-04) on the FSDP compile plan: T V =
    8192 x 128256 = 1,050,673,152; eager 12 TV, compiled 4 TV + 12 T: the peak drops by
    8 TV - 12 T = 8,405,286,912 B against torchtitan@2025-02 (before the change point)."""
    w = fsdp.workload
    w.set("stack", "torchtitan@2025-02")
    assert fsdp.scenario.stack == "torchtitan@2025-02" and not w.errors
    before = fsdp.estimate.peak_allocated_bytes
    w.set("stack", "torchtitan@2025-06")
    assert fsdp.scenario.stack == "torchtitan@2025-06"
    assert w.fields["stack"].value == "torchtitan@2025-06"
    assert before - fsdp.estimate.peak_allocated_bytes == 8 * 8192 * 128256 - 12 * 8192 \
        == 8_405_286_912
    assert "stack=torchtitan@2025-06" in fsdp.url.query            # '@' kept readable
    assert Scenario.from_query(fsdp.url.query) == fsdp.scenario
    w.set("stack", "pytorch")                                      # back to the default
    assert fsdp.scenario.stack is None and "stack=" not in fsdp.url.query


def test_a_link_with_a_stack_round_trips(db, monkeypatch):
    q = ("model=meta-llama/Meta-Llama-3-8B&task=train&gpu=nvidia-h100-sxm5-80gb&seq_len=8192"
         "&parallel.gpus=8&parallel.zero=3&options=compile&stack=torchtitan@2025-06")
    monkeypatch.setenv("QUERY_STRING", q)
    app = App(db=db, lazy_chart=False, charts=False)
    f = app.workload.fields["stack"]
    assert (f.name.value, f.version.value) == ("torchtitan", "2025-06")
    assert app.scenario == Scenario.from_query(q) and "stack=torchtitan@2025-06" in app.url.query
    again = App(db=db, lazy_chart=False, charts=False, scenario=app.url.query)
    assert again.scenario == app.scenario


def test_a_bad_stack_in_a_link_names_stack_and_keeps_the_rest(db, monkeypatch):
    monkeypatch.setenv("QUERY_STRING", "model=gpt2&task=train&batch_size=4&stack=foo@x")
    app = App(db=db, lazy_chart=False, charts=False)
    assert app.scenario.model == "gpt2" and app.scenario.batch_size == 4    # the rest kept
    assert app.scenario.stack is None
    err = app.workload.errors["stack"]
    assert "unknown stack" in err and "foo" in err and "Traceback" not in err
    assert "stack" in app.notices.value
    assert app.workload.fields["stack"].value == "foo@x"                  # shown as given
    app.workload.set("stack", "hf")                                       # a person fixes it
    assert app.scenario.stack == "hf" and "stack" not in app.workload.errors


def test_a_typed_version_of_the_wrong_scheme_is_explained(fsdp):
    fsdp.workload.set("stack", "torchtitan")
    fsdp.workload.fields["stack"].version.value = "0.4"
    err = fsdp.workload.errors["stack"]
    assert "stack" in err and "is not a month" in err
    assert fsdp.scenario.stack == "torchtitan"                           # the last good plan


# ---------------------------------------------------------------- the assumptions panel
def test_the_assumptions_panel_shows_the_stack_and_each_mechanism_with_its_source(fsdp):
    assert "vp-stack" not in fsdp.details.value                          # default: nothing
    fsdp.workload.set("stack", "torchtitan@2025-06")
    text = _plain(fsdp.details.value)
    assert "torchtitan@2025-06" in text and "change point 2025-05" in text
    assert "compiled-loss : applied to this plan" in text
    assert "loss-parallel-backward : not used by this plan" in text      # no tensor parallel
    assert "PR #1033" in text and "commit bbb1b616" in text


def test_the_software_field_in_chinese(db, monkeypatch):
    monkeypatch.delenv("QUERY_STRING", raising=False)
    app = App(db=db, charts=False, lazy_chart=False, lang="zh", gpu=H100,
              scenario={**FSDP, "stack": "torchtitan@2025-06"})
    f = app.workload.fields["stack"]
    assert "软件栈" in f.label.value and f.version.placeholder == "最新"
    assert "已用于本方案" in app.details.value and "变更点" in f.about.value
