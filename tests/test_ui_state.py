"""The planner's state (`vramplan.ui.state.state`) and text helpers in plain Python: no widgets, no
browser. Values checkable by hand: the form's fields and defaults, the catalog's families."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from vramplan.scenario import Scenario
from vramplan.scenario.form import fields as form_fields
from vramplan.ui.state import state as S
from vramplan.ui.state import text as T

UI = Path(__file__).resolve().parents[1] / "app" / "vramplan" / "ui"
LLAMA = "meta-llama/Llama-3.1-8B"
H100 = "nvidia-h100-sxm5-80gb"


@pytest.fixture
def st():
    return S.PlanState(gpu=H100)


def test_state_text_and_jobs_import_no_widgets():
    for name in ("state/state.py", "state/draft.py", "state/text.py", "widgets/jobs.py"):
        tree = ast.parse((UI / name).read_text())
        mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
        mods |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
        assert not mods & {"ipywidgets", "traitlets", "anywidget", "altair"}, name
    code = ("import sys, vramplan.ui.state.state; s = vramplan.ui.state.state.PlanState(); "
            "assert s.estimate is not None; "
            "assert not {'ipywidgets', 'altair'} & set(sys.modules), 'widgets imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_probing_is_gone():
    src = "".join(p.read_text() for p in UI.rglob("*.py"))
    assert "_PROBES" not in src and "def accepts" not in src and "_BATCHLESS" not in src


def test_default_plan(st):
    assert st.draft == {"model": LLAMA, "task": "lora"} and st.gpu == H100
    assert st.estimate.fits and not st.errors and not st.stale
    assert st.query == "model=meta-llama/Llama-3.1-8B&task=lora&gpu=nvidia-h100-sxm5-80gb"
    assert Scenario.from_query(st.query) == st.scenario == Scenario.from_query(
        st.scenario.to_query())


@pytest.mark.parametrize("draft", [{"model": "torchvision/resnet50"}, {"task": "render"},
                                   {"model": LLAMA, "task": "serve"},
                                   {"model": "black-forest-labs/FLUX.1-dev"},
                                   {"task": "array"}, {"model": "t5-small"}])
def test_fields_are_the_forms(st, draft):
    st.apply(draft)
    assert [f.key for f in st.fields] == [f.key for f in form_fields(draft)]


def test_resnet_has_no_attention_and_render_no_batch(st):
    st.set_model("torchvision/resnet50")
    assert not st.shown("attention") and not st.shown("seq_len") and st.shown("resolution")
    st.set_family(S.NO_MODEL)
    assert st.task == "render" and not st.shown("batch_size") and st.shown("msaa")


def test_a_new_family_or_task_starts_from_its_defaults(st):
    st.set_model("torchvision/resnet50")
    st.set("batch_size", 256)
    st.set("resolution", [512, 512])
    assert st.scenario.batch_size == 256
    st.set_family(S.NO_MODEL)                        # render: none of ResNet's values
    assert st.draft == {"task": "render"} and st.scenario.resolution == (1080, 1920)
    st.set_task("volume")
    assert st.scenario.batch_size == 1 and st.scenario.resolution == (512, 512, 512)
    assert st.estimate.fits                          # 3 copies of 512^3 fp32: 1.5 GiB
    st.set("batch_size", 4)
    st.set_task("render")
    assert st.draft == {"task": "render"}


def test_a_model_of_the_same_family_keeps_what_still_applies(st):
    st.set_model("gpt2")
    st.set("batch_size", 8)
    st.set("seq_len", 1024)
    st.set_model("gpt2-medium")
    assert st.draft == {"model": "gpt2-medium", "task": "lora", "batch_size": 8,
                        "seq_len": 1024}
    st.set_model("torchvision/vit_b_16")             # another family: its defaults
    assert st.draft == {"model": "torchvision/vit_b_16"}   # no lora for a ViT here
    assert st.scenario.resolution == (224, 224)


def test_picking_a_family_picks_one_of_its_models(st):
    st.set_model("mistralai/Mixtral-8x7B-v0.1")
    st.set_family("diffusion")
    assert st.family == "diffusion" and st.scenario.task == "denoise"
    assert st.scenario.model != "mistralai/Mixtral-8x7B-v0.1"


def test_a_size_typed_as_a_model_is_a_size_only_decoder(st):
    st.set_model("70B")
    assert st.draft["architecture"] == {"params": 70_000_000_000}
    assert st.family == S.SIZE_ONLY and not st.errors
    assert "70B parameters" in S.describe_model(st.draft)
    st.set_size("lots")
    assert "not a parameter count" in st.errors["architecture"]


def test_unknown_model_names_the_closest(st):
    st.set_model("Llama-3.1-8")
    assert "closest" in st.errors["model"] and st.stale


def test_a_link_keeps_every_valid_key_and_names_the_bad_one(st):
    st.load_query("model=gpt2&batch_size=abc&seq_len=512")
    assert st.draft == {"model": "gpt2", "batch_size": "abc", "seq_len": 512}
    assert set(st.errors) == {"batch_size"} and "abc" in st.errors["batch_size"]
    assert st.scenario.model == "gpt2" and st.scenario.seq_len == 512   # the rest is kept
    assert st.partial and not st.stale
    assert st.query == "model=gpt2&batch_size=abc&seq_len=512"          # address kept
    assert any("batch_size" in n.text for n in st.notices)
    st.set("batch_size", 4)
    assert not st.errors and st.scenario.batch_size == 4 and not st.partial
    assert "batch_size=4" in st.query


def test_a_link_to_an_unknown_gpu_offers_gpus(st):
    st.load_query("gpu=not-a-gpu")
    assert st.gpu == H100
    n = st.notices[0]
    assert "unknown GPU 'not-a-gpu'" in n.text and n.choices
    assert all(st.db.get(g) for g in n.choices)
    st.load_query("gpu=h1000")
    assert any("h100" in g for g in st.notices[0].choices)
    st.set_gpu(st.notices[0].choices[0])
    assert not st.notices


def test_a_links_derived_keys_are_not_pinned(st):
    st.load_query("model=gpt2&parallel.gpus=8&parallel.data=8&parallel.zero=3")
    assert st.draft == {"model": "gpt2", "parallel": {"gpus": 8, "zero": 3}}
    st.set("parallel.gpus", 16)
    assert not st.errors and st.scenario.parallel.data == 16


def test_url_round_trip(st):
    q = ("model=meta-llama/Llama-3.1-8B&task=lora&gpu=nvidia-rtx-4090&checkpointing=full"
         "&lora.rank=16&batch_size=2")
    st.load_query(q)
    assert st.scenario == Scenario.from_query(q) and st.gpu == "nvidia-rtx-4090"
    st.set("batch_size", 3)
    assert Scenario.from_query(st.query) == st.scenario


def test_bad_edit_keeps_the_last_plan(st):
    good = st.scenario
    st.set("batch_size", 0)
    assert "batch_size" in st.errors and st.stale and st.scenario == good
    assert st.value("batch_size") == 0
    st.set("batch_size", None)
    assert not st.errors and not st.stale


def test_undo_and_apply(st):
    st.set("batch_size", 2)
    st.set_gpu("nvidia-rtx-4090")
    st.apply({"model": "gpt2", "task": "train", "gpu": "nvidia-l4"}, label="applied")
    assert st.scenario.model == "gpt2" and st.gpu == "nvidia-l4"
    assert st.undo() and st.gpu == "nvidia-rtx-4090" and st.scenario.batch_size == 2
    assert st.undo() and st.gpu == H100
    assert st.undo() and st.draft == {"model": LLAMA, "task": "lora"}
    assert not st.undo()


def test_listeners_hear_every_change(st):
    heard = []
    st.on_change(lambda s, what: heard.append(what))
    st.set("batch_size", 2)
    st.set_gpu("nvidia-rtx-4090")
    assert "estimate" in heard[0] and "gpu" in heard[1]


def test_machine_notes_are_not_shown(st):
    assert any(n.startswith("components sum to") for n in st.result["notes"])
    assert st.notes() and not any(n.startswith("components sum to") for n in st.notes())


def test_search_models_by_id_alias_and_family():
    assert any(m.id == "gpt2" for m in S.search_models("openai-community"))
    assert all(m.family == "cnn" for m in S.search_models("", "cnn"))
    assert {m.family for m in S.search_models("diffusion")} == {"diffusion"}
    assert S.search_models("llama 8b")


def test_draft_from_query_reads_each_key_alone():
    d, bad = S.draft_from_query("model=gpt2&lora.rank=x&resolution=1,2&offload=params")
    assert d == {"model": "gpt2", "lora": {"rank": "x"}, "resolution": [1, 2],
                 "offload": ["params"]}
    assert set(bad) == {"lora.rank"}


# ---- text
def test_numbers_read_and_print():
    assert T.parse("int", "2,048") == 2048 and T.parse("int", "abc") == "abc"
    assert T.parse("resolution", "1024 × 768") == [1024, 768] and T.parse("int", " ") is None
    assert T.parse_params("70B") == 7e10 and T.parse_params("350M") == 3.5e8
    assert T.looks_like_size("70B") and not T.looks_like_size("gpt2")
    assert T.human_bytes(6199793.27e15) == "6.2 ZB"           # not "6199793.27 PB"
    assert T.human_bytes(87.53e9) == "87.5 GB" and T.human_bytes(1e30) == "1,000,000 YB"
    assert T.human_bytes(512) == "512 B" and T.si(2.5e11, "FLOP") == "250 GFLOP"
    assert T.gib(1234.5 * 2**30) == "1,234.50 GiB" and T.count(131072) == "131,072"
    assert T.label_of("kv_pool_tokens") == "KV pool tokens"
    assert T.show("size", 4 * 2**30) == "4 GiB"
    assert T.size(8294400) == "7.9 MiB" and T.size(1.5 * 2**30) == "1.50 GiB"
