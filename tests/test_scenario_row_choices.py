"""Each key row carries its own derivation of choices and bounds (issue 19, Build 1: "from the
key table, each row carrying its own derivation"): `Key.choices_of(ctx)` / `Key.bounds_of(ctx)`
read the one pass (`resolution.Resolution`: task, family, spec, given), so the form's view has
no case by key name and a row added to the table brings its own."""
from __future__ import annotations

import inspect

import pytest

from key_fixture import add_row
from vramplan.scenario import form, keys
from vramplan.scenario.keys import key
from vramplan.scenario.resolution import Resolution
from vramplan.scenario.schema import Key
from vramplan.vocab import TRAINING_TASKS

H100 = "nvidia-h100-sxm5-80gb"
ROW = Key("warmup_shape", "choice", "Warm-up shape", "learning-rate warm-up (a test key)",
          choices=("linear", "cosine", "constant"), tasks=TRAINING_TASKS, default="linear",
          choices_of=lambda r: ("linear", "cosine") if r.family == "decoder"
          else ("constant",))


@pytest.fixture
def added(monkeypatch):
    """The key table with one more contract row (after `gpu`): tests/key_fixture.py."""
    return add_row(monkeypatch, ROW)


def _choices(draft, name):
    return next(f.choices for f in form.fields(draft, H100) if f.key == name)


def test_a_new_row_brings_its_choices(added):
    # gpt2 is a decoder: the row's choices_of gives linear, cosine; a ViT gets constant
    assert _choices({"model": "gpt2", "task": "train"}, "warmup_shape") == ("linear", "cosine")
    assert _choices({"model": "torchvision/vit_b_16", "task": "train"},
                    "warmup_shape") == ("constant",)


def test_the_rows_give_the_draft_s_choices_and_bounds():
    # gpt2's 1024 positions bound seq_len (GPT2Config.n_positions); without a model, LIMIT
    r = Resolution({"model": "gpt2", "task": "train"}, H100)
    assert r.bounds(key("seq_len")) == (1, 1024)
    assert r.bounds(key("batch_size")) == (key("batch_size").lo, key("batch_size").hi)
    # train's precisions (rules.precisions_for): no weight-only format such as nf4; qlora's
    assert r.choices(key("precision")) == ("fp32", "tf32", "fp16", "bf16", "fp16-mixed",
                                           "bf16-mixed", "mxfp8-train", "nvfp4-train")
    assert "nf4" in Resolution({"model": "gpt2", "task": "qlora"}).choices(key("precision"))
    assert "nf4" not in r.choices(key("precision"))
    # the model-less tasks without a model; a model's own tasks with one
    assert set(Resolution({}).choices(key("task"))) == {"render", "volume", "array"}
    assert "denoise" not in r.choices(key("task"))
    assert H100 in r.choices(key("gpu"))


def test_the_form_view_has_no_case_by_key_name():
    for fn in (Resolution.choices, Resolution.bounds):
        assert "k.name" not in inspect.getsource(fn)
    owners = {k.name for k in keys.KEYS if k.choices_of is not None or k.bounds_of is not None}
    assert {"task", "precision", "options", "offload", "stack", "model", "gpu",
            "seq_len"} <= owners


def test_the_table_s_names_stay_importable_from_keys():
    from vramplan.scenario.keys import (BIG, BY_NAME, CONTRACT, EXTRA, LIMIT, MODEL_TASKS,
                                        NESTED, cli_flags, markdown)
    assert BIG == 1 << 20 and LIMIT == 1 << 30 and "array" not in MODEL_TASKS
    assert BY_NAME["lora.rank"] in NESTED and BY_NAME["msaa"] in EXTRA
    assert CONTRACT[0].name == "model" and callable(cli_flags) and callable(markdown)
