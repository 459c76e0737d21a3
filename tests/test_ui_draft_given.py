"""The page's draft is the given keys (issue 19, Build 1): the dict `scenario.resolve` takes,
nested keys as objects (the shape of `Scenario.given_dict()`, a scenario file and the link),
edited one key at a time by its dotted name; no flat / fold / compact. `form.fields` /
`form.check` are views of the one pass (`scenario.resolution.Resolution`): a field's default
is what the resolved scenario holds when the field is left empty."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from vramplan.scenario import Scenario, form, resolve
from vramplan.scenario.resolution import get_path, with_path
from vramplan.ui.state import state as S

LLAMA = "meta-llama/Llama-3.1-8B"
H100 = "nvidia-h100-sxm5-80gb"
V100 = "nvidia-v100-sxm2-32gb"      # no bf16 tensor cores (compute capability 7.0)
FORM = Path(__file__).resolve().parents[1] / "app" / "vramplan" / "scenario" / "form.py"


@pytest.fixture
def st():
    return S.PlanState(gpu=H100)


def test_an_edit_of_a_nested_key_is_stored_nested(st):
    st.set("lora.rank", 32)
    assert st.draft == {"model": LLAMA, "task": "lora", "lora": {"rank": 32}}
    st.set("lora.alpha", 64)
    assert st.draft["lora"] == {"rank": 32, "alpha": 64}
    assert (st.scenario.lora.rank, st.scenario.lora.alpha) == (32, 64)
    st.set("lora.rank", None)                   # cleared: back to the row's default 8
    assert st.draft == {"model": LLAMA, "task": "lora", "lora": {"alpha": 64}}
    assert st.scenario.lora.rank == 8 and st.value("lora.rank") == 8
    assert st.given("lora.alpha") and not st.given("lora.rank")


def test_the_draft_is_the_scenarios_given_keys(st):
    st.set("lora.rank", 32)
    st.set("parallel.gpus", 2)
    st.set("batch_size", 4)
    # the scenario remembers exactly the draft (and the page's GPU) as given
    assert st.scenario.given_dict() == {**st.draft, "gpu": H100}
    assert resolve(st.draft, H100) == st.scenario
    # the link holds the given keys and opens as the same draft
    assert "lora.rank=32" in st.query and "parallel.gpus=2" in st.query
    again = S.PlanState(gpu=H100)
    again.load_query(st.query)
    assert again.draft == st.draft and again.scenario == st.scenario


def test_a_bad_nested_value_is_kept_as_typed_and_named(st):
    good = st.scenario
    st.set("lora.rank", "lots")
    assert st.draft["lora"] == {"rank": "lots"}          # nothing the person typed is lost
    assert set(st.errors) == {"lora.rank"} and st.stale and st.scenario == good
    assert st.value("lora.rank") == "lots"
    st.set("lora.rank", 16)
    assert not st.errors and st.scenario.lora.rank == 16


def test_an_advisor_plan_applies_its_given_keys():
    st = S.PlanState(gpu=H100, draft={"model": LLAMA, "task": "serve"})
    plan = st.scenario.replace(batch_size=8)
    st.apply(plan)
    # serving.max_num_seqs 8 is derived from batch_size: not pinned in the draft
    assert st.draft == {"model": LLAMA, "task": "serve", "batch_size": 8}
    st.set("batch_size", 16)
    assert st.scenario.serving.max_num_seqs == 16


def test_field_defaults_follow_the_gpu_the_pass_resolves_on():
    """Before: the page asked form.fields(draft) without the GPU, so on a V100 (no bf16) the
    precision field said 'default bf16-mixed' while the plan ran fp16-mixed (rules.
    default_precision: bf16 becomes fp16 below compute capability 8.0)."""
    st = S.PlanState(gpu=V100, draft={"model": "gpt2", "task": "train"})
    assert st.scenario.precision == "fp16-mixed" == st.field("precision").default
    assert {f.key: f.default for f in form.fields({"model": "gpt2"}, V100)}["precision"] == \
        "fp16-mixed"


@pytest.mark.parametrize("draft, gpu", [
    ({"model": "gpt2"}, V100),
    ({"model": LLAMA, "task": "serve", "serving": {"max_model_len": 4096}}, H100),
    ({"model": LLAMA, "task": "lora", "parallel": {"gpus": 8, "tensor": 2}}, H100),
    ({"model": "t5-small", "seq_len": 256}, None),
    ({"model": "black-forest-labs/FLUX.1-dev"}, H100),
    ({"task": "render"}, None),
])
def test_every_default_is_the_resolved_scenarios_value(draft, gpu):
    """No rule of the form's own: each field left empty shows what the one pass resolved
    (serve: seq_len 4096 follows max_model_len; parallel.data 8 / 2 = 4; t5 target_len
    follows seq_len 256; V100: fp16-mixed)."""
    sc = resolve(draft, gpu).to_dict()
    shown = {f.key: f for f in form.fields(draft, gpu)}
    for key, f in shown.items():
        if f.value is None and key not in ("task",):
            assert f.default == get_path(sc, key), key
    if get_path(draft, "serving.max_model_len") == 4096:
        assert shown["seq_len"].default == 4096
    if get_path(draft, "parallel.gpus") == 8:
        assert shown["parallel.data"].default == 4


def test_form_is_a_view_with_no_rule_of_its_own():
    """form.py reads the pass only: it imports nothing from the key table, the task rules,
    the catalog or the hardware database (before: its _Draft restated shows / choices /
    bounds / defaults from rules.py and keys.py)."""
    tree = ast.parse(FORM.read_text(encoding="utf-8"))
    mods = {(n.level, n.module) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert {m for lvl, m in mods if lvl} <= {"model", "resolution"}, mods
    assert not any(isinstance(n, ast.ClassDef) and n.name != "Field" for n in ast.walk(tree))


def test_a_rows_derivation_changed_in_a_fixture_shows_in_the_form(monkeypatch):
    """serve's batch_size follows serving.max_num_seqs (its row's `derive`); a fixture
    replaces the serving.max_num_seqs row's derivation (64 instead of vLLM's 256): the pass
    and so the form's defaults follow, with no form code touched."""
    from dataclasses import replace

    from vramplan.scenario import keys as K
    row = K.BY_NAME["serving.max_num_seqs"]
    new = replace(row, derive=lambda v: (v.get("batch_size") or 64) if v.get("task") == "serve"
                  else None)
    monkeypatch.setitem(K.BY_NAME, row.name, new)
    monkeypatch.setattr(K, "DERIVED", tuple(new if k is row else k for k in K.DERIVED))
    draft = {"model": "gpt2", "task": "serve"}
    f = {x.key: x for x in form.fields(draft, H100)}
    assert resolve(draft, H100).batch_size == 64
    assert f["batch_size"].default == 64 == f["serving.max_num_seqs"].default


def test_with_path_edits_one_key():
    d = {"model": "gpt2", "lora": {"rank": 8}}
    assert with_path(d, "lora.alpha", 16) == {"model": "gpt2", "lora": {"rank": 8, "alpha": 16}}
    assert with_path(d, "lora.rank", "") == {"model": "gpt2"}
    assert with_path(d, "batch_size", 4)["batch_size"] == 4 and d == {"model": "gpt2",
                                                                       "lora": {"rank": 8}}
    assert Scenario.from_dict(with_path(d, "task", "lora")).lora.rank == 8
