"""How the form reads a key is the key's row (issue 19.1: 'from the key table, each row
carrying its own derivation'): which keys the other keys' defaults read (`seeds`), which say
what the plan is and are never dropped from a draft (`kept`), which show before a task is
known (`before_task`), only when (`shows_if`), and a value left empty read from the pass
(`default_of`). `Resolution` (the pass as a form reads it) names no key; a row added to the
table brings its own rules (the fixture of tests/key_fixture.py)."""
from __future__ import annotations

import inspect

import pytest

from key_fixture import add_row
from vramplan.scenario import form, keys
from vramplan.scenario.resolution import Resolution
from vramplan.scenario.schema import Key
from vramplan.vocab import TRAINING_TASKS

H100 = "nvidia-h100-sxm5-80gb"
ROW = Key("site", "choice", "Site", "where the job runs (a test key)", choices=("lab", "cloud"),
          default="lab", seeds=True, kept=True, before_task=True)
QUIET = Key("warmup_shape", "choice", "Warm-up shape", "learning-rate warm-up (a test key)",
            choices=("linear", "cosine"), tasks=TRAINING_TASKS, default="linear",
            shows_if=lambda r: (r.given or {}).get("batch_size", 1) > 1,
            default_of=lambda r: "cosine" if r.family == "decoder" else "linear")


def test_the_pass_as_a_form_reads_it_names_no_key():
    for fn in (Resolution.shows, Resolution._default, Resolution._seed, Resolution.minimal,
               Resolution.kept):
        src = inspect.getsource(fn)
        assert "SEED" not in src and "name ==" not in src and "name in (" not in src, fn
        for name in ("model", "architecture", "task", "gpu", "stack"):
            # (the one literal left: the derivations' context, `keys.derive`'s 'task')
            assert src.count(f'"{name}"') == (name == "task" and fn is Resolution._default), (
                fn.__name__, name)


def test_the_rows_carry_the_rules_the_pass_had_by_name():
    seeds = {k.name for k in keys.KEYS if k.seeds}
    kept = {k.name for k in keys.KEYS if k.kept}
    before = {k.name for k in keys.KEYS if k.before_task}
    assert seeds == {"model", "architecture", "task", "stack", "gpu"}
    assert kept == {"model", "architecture", "task"}
    assert before == {"model", "architecture", "task", "gpu"}
    # what the form showed by name before, now by the rows: a draft without a task shows
    # model, task and gpu (architecture only once given); with one, the model or the
    # architecture, whichever is given
    assert [f.key for f in form.fields({})] == ["model", "task", "gpu"]
    assert [f.key for f in form.fields({"architecture": {"params": 7e9}})][:2] == [
        "architecture", "task"]
    assert "model" not in [f.key for f in form.fields({"architecture": {"params": 7e9}})]
    r = Resolution({"model": "gpt2", "task": "lora", "gpu": H100})
    assert r.default("task") == "lora" and r.default("gpu") == H100


@pytest.fixture
def site(monkeypatch):
    return add_row(monkeypatch, ROW)


def test_a_new_row_shows_before_the_task_and_is_kept(site):
    # before_task: on a draft with no model and no task, beside model, task and gpu
    assert "site" in [f.key for f in form.fields({})]
    # seeds: given, the value it takes when left empty is its own (the seed's), not the row's
    r = Resolution({"model": "gpt2", "task": "train", "site": "cloud"}, H100)
    assert r.scenario.site == "cloud" and r.default("site") == "cloud"
    # kept: a plan's given keys are minimised (batch_size 1 is train's default and goes),
    # but what the plan is stays given, its default value too
    r = Resolution({"model": "gpt2", "task": "train", "site": "lab", "batch_size": 1}, H100)
    assert r.minimal() == {"model": "gpt2", "task": "train", "site": "lab"}


def test_a_new_row_brings_when_it_shows_and_its_default(monkeypatch):
    add_row(monkeypatch, QUIET)
    shown = [f.key for f in form.fields({"model": "gpt2", "task": "train"})]
    assert "warmup_shape" not in shown                      # shows_if: batch_size 1
    fields = {f.key: f for f in form.fields({"model": "gpt2", "task": "train",
                                             "batch_size": 4})}
    assert fields["warmup_shape"].default == "cosine"       # default_of: gpt2 is a decoder
