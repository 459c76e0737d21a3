"""The key table (`vramplan.scenario.keys`): one row per key, from which validation, the query
string's types, the CLI flags and docs/scenario-keys.md are derived."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from vramplan import readers
from vramplan.errors import ScenarioError
from vramplan.scenario import CONTRACT_KEYS, PRECISIONS, Scenario
from vramplan.scenario import query
from vramplan.scenario.keys import (BY_NAME, EXTRA_DEFAULTS, KEYS, KINDS, cli_flags, keys_for,
                                    markdown, parse_resolution, scenario_from_flags)

ROOT = Path(__file__).resolve().parents[1]
LLAMA = {"model": "meta-llama/Llama-2-7b-hf"}

# shared/SCENARIO.md, in its order
CONTRACT = ("model", "architecture", "task", "batch_size", "seq_len", "new_tokens", "target_len",
            "text_len", "guidance", "resolution", "frames", "steps", "precision", "optimizer",
            "gradient_accumulation", "checkpointing", "attention", "lora", "parallel",
            "offload", "options", "serving", "stack", "gpu")


def test_contract_keys_in_contract_order():
    # the project's additions follow the contract's keys (safety_margin: issue 20.6)
    assert CONTRACT_KEYS == CONTRACT + ("safety_margin",)


def test_every_row_is_complete_and_labelled_for_people():
    for k in KEYS:
        assert k.kind in KINDS, k.name
        assert k.doc and k.label, k.name
        assert k.label[0].isupper() and "_" not in k.label, k.label
        assert not any(w in k.label for w in ("Kv", "Gpu", "Lora", "Cuda", "Msaa")), k.label
    assert BY_NAME["serving.kv_cache_dtype"].label == "KV cache dtype"
    assert BY_NAME["batch_size"].label == "Batch size"


def test_docs_page_is_the_table():
    """docs/scenario-keys.md is generated: regenerate it after editing the table with
    .venv/bin/python -c "from vramplan.scenario.keys import markdown; print(markdown(), end='')"
    > docs/scenario-keys.md"""
    assert (ROOT / "docs" / "scenario-keys.md").read_text(encoding="utf-8") == markdown()


def test_docs_page_names_every_key():
    text = markdown()
    for k in KEYS:
        assert f"`{k.name}`" in text, k.name


def test_query_types_come_from_the_table():
    # the sets the query string used to spell out by hand
    assert query._INT == {"batch_size", "seq_len", "new_tokens", "target_len", "text_len",
                          "frames", "steps", "gradient_accumulation", "parallel.gpus",
                          "parallel.data", "parallel.tensor", "parallel.pipeline",
                          "parallel.context", "parallel.zero", "lora.rank",
                          "serving.max_num_seqs", "serving.max_model_len",
                          "serving.max_num_batched_tokens", "parallel.expert",
                          "parallel.virtual_stages"}
    assert query._NUM == {"lora.alpha", "lora.dropout", "serving.gpu_memory_utilization"}
    assert query._BOOL == {"guidance", "serving.cuda_graphs"}
    assert query._LIST == {"offload", "options", "lora.targets"}
    assert query._INT_LIST == {"resolution"}
    assert set(query._NESTED) == {"lora", "parallel", "serving", "precision"}


@pytest.mark.parametrize("name, base", [
    ("batch_size", LLAMA), ("seq_len", LLAMA), ("gradient_accumulation", LLAMA),
    ("lora.rank", {**LLAMA, "task": "lora"}), ("parallel.zero", LLAMA),
    ("serving.max_model_len", {"model": "meta-llama/Llama-3.1-8B", "task": "serve"}),
    ("new_tokens", {**LLAMA, "task": "generate"}),
    ("steps", {"model": "black-forest-labs/FLUX.1-dev"}),
    ("swapchain_images", {"task": "render"}), ("channels", {"task": "volume"}),
    ("copies", {"task": "array"}),
])
def test_table_ranges_are_what_validation_enforces(name, base):
    k = BY_NAME[name]

    def with_value(v):
        d = dict(base)
        top, _, sub = name.partition(".")
        d[top] = {sub: v} if sub else v
        return d

    Scenario.from_dict(with_value(int(k.lo)))
    for bad in (int(k.lo) - 1, int(k.hi) + 1):
        with pytest.raises(ScenarioError) as e:
            Scenario.from_dict(with_value(bad))
        assert e.value.key == name


@pytest.mark.parametrize("name, draft", [
    ("seq_len", {"model": "torchvision/resnet50"}), ("fps", {"task": "array"}),
    ("serving", LLAMA), ("steps", LLAMA), ("new_tokens", LLAMA),
    ("channels", {"task": "render"}), ("lora", LLAMA),
])
def test_a_key_where_the_table_says_it_does_not_apply_is_refused(name, draft):
    sc = Scenario.from_dict(draft)
    k = BY_NAME[name]
    assert not k.applies(sc.task, sc.family)
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict({**draft, name: {} if k.kind == "object" else 1})
    assert e.value.key == name and "applies to" in str(e.value)


def test_keys_for_a_task_and_family():
    names = {k.name for k in keys_for("generate", "decoder")}
    assert {"seq_len", "new_tokens", "lora.rank", "parallel.tensor"} <= names
    assert not names & {"serving", "serving.max_num_seqs", "resolution", "fps", "steps"}
    assert {"fps", "render_targets", "resolution"} <= {k.name for k in keys_for("render", None)}


def test_workload_defaults_by_task():
    r = EXTRA_DEFAULTS("render")
    assert (r["msaa"], r["swapchain_images"], r["frames_in_flight"], r["fps"]) == (1, 3, 2, 60.0)
    assert [t["format"] for t in r["render_targets"]] == ["rgba8", "d32f"]
    assert EXTRA_DEFAULTS("volume")["copies"] == 3 and EXTRA_DEFAULTS("array")["copies"] == 1
    assert EXTRA_DEFAULTS("volume")["dtype"] == "float32"
    # train reads the image keys of a VLM only (no default: no images)
    assert EXTRA_DEFAULTS("train") == {"images": None, "image_size": None}
    a, b = EXTRA_DEFAULTS("render"), EXTRA_DEFAULTS("render")
    a["render_targets"].clear()
    assert b["render_targets"]                       # a fresh copy each time


# ---- CLI flags -------------------------------------------------------------------------------

def _parser():
    p = argparse.ArgumentParser(exit_on_error=False)
    for f in cli_flags():
        if f.type is bool:
            p.add_argument(f.flag, dest=f.dest, action=argparse.BooleanOptionalAction,
                           default=None, help=f.help)
        else:
            p.add_argument(f.flag, dest=f.dest, type=f.type, choices=f.choices, help=f.help)
    return p


def test_cli_flags_of_the_scalar_keys():
    flags = {f.flag: f for f in cli_flags()}
    assert flags["--batch-size"][:4] == ("--batch-size", "batch_size", int, None)
    assert flags["--gpus"].dest == "gpus" and flags["--zero"].type is int
    assert flags["--precision"].choices == PRECISIONS
    assert flags["--guidance"].type is bool and flags["--fps"].type is float
    assert flags["--msaa"].choices == (1, 2, 4, 8, 16) and flags["--msaa"].type is int
    assert "--lora" not in flags and "--offload" not in flags and "--render-targets" not in flags
    assert all(len(f) == 5 and f.help for f in cli_flags())
    assert len({f.dest for f in cli_flags()}) == len(cli_flags())
    assert parse_resolution("1024x768") == [1024, 768]
    with pytest.raises(ValueError):
        parse_resolution("big")


def test_flags_parse_into_a_scenario():
    a = _parser().parse_args(["--model", "meta-llama/Llama-2-7b-hf", "--task", "lora",
                              "--lora-rank", "16", "--gpus", "2", "--tensor", "2",
                              "--no-guidance", "--resolution", "512x512"])
    d = scenario_from_flags(vars(a))
    assert d == {"model": "meta-llama/Llama-2-7b-hf", "task": "lora", "lora": {"rank": 16},
                 "parallel": {"gpus": 2, "tensor": 2}, "guidance": False,
                 "resolution": [512, 512]}
    d.pop("guidance"), d.pop("resolution")
    sc = Scenario.from_dict(d)
    assert sc.lora.rank == 16 and sc.parallel.data == 1


# ---- readers ---------------------------------------------------------------------------------

def test_readers_name_the_key():
    assert readers.read_int("k", 4) == 4
    for bad in (True, 4.0, "4"):
        with pytest.raises(ScenarioError, match="'k'"):
            readers.read_int("k", bad)
    assert readers.read_int("k", 4.0, whole_floats=True) == 4
    assert readers.read_num("k", 16, 0, 100) == 16 and readers.read_num("k", 16, 0, 100,
                                                                       as_float=True) == 16.0
    with pytest.raises(ScenarioError):
        readers.read_num("k", float("nan"), 0, 1)
    assert readers.read_choice("k", " FP32 ", ("fp32",), fold_case=True) == "fp32"
    with pytest.raises(ScenarioError, match="fp32, bf16"):
        readers.read_choice("k", "FP32", ("fp32", "bf16"))
    assert readers.read_size("k", "2 GiB") == 2 * 2**30
    assert readers.read_names("k", ["b", "a", "b"], ("a", "b")) == ("a", "b")
    with pytest.raises(ScenarioError) as e:
        readers.read_obj("lora", {"rank": 1, "bogus": 2}, ("rank",))
    assert e.value.key == "lora.bogus"
