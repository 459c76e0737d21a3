"""Model-given defaults (resolution, steps, frames, text_len, guidance) and the tasks a model
supports: both come from the workload registrations' one table per family, fed by the catalog
entry. Values are the published pipeline / model defaults (checkable on each model card)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from vramplan.catalog import get_model, list_models
from vramplan.errors import ScenarioError
from vramplan.estimate import estimate
from vramplan.scenario import TASKS, Scenario, model_defaults, valid_tasks
from vramplan.workloads.registry import families, family_tasks

ROOT = Path(__file__).resolve().parents[1]
GPU = "nvidia-a100-sxm4-80gb"
MODEL_KEYS = ("resolution", "frames", "steps", "text_len", "guidance")

# ---- defaults filled by normalisation -------------------------------------------------------

# (model, task or None for its default task) -> the model-given keys to_dict() shows
FILLED = [
    # vision: the native input size of the model card / mm config
    ("torchvision/resnet50", None, {"resolution": [224, 224]}),
    ("torchvision/vit_b_16", "forward", {"resolution": [224, 224]}),
    ("torchvision/efficientnet_b7", None, {"resolution": [600, 600]}),
    ("mmdet/faster-rcnn_r50_fpn", None, {"resolution": [800, 1333]}),   # 1333x800 test scale
    ("mmseg/pspnet_r50-d8", None, {"resolution": [512, 1024]}),        # cityscapes crop
    ("unet/unet-3d", "load", {"resolution": [128, 128, 128]}),
    # diffusion: pipeline __call__ defaults (height/width, num_inference_steps, num_frames,
    # max_sequence_length / CLIP's 77), CFG on unless guidance-distilled
    ("stable-diffusion-v1-5/stable-diffusion-v1-5", None,
     {"resolution": [512, 512], "steps": 50, "text_len": 77, "guidance": True}),
    ("stabilityai/stable-diffusion-xl-base-1.0", None,
     {"resolution": [1024, 1024], "steps": 50, "text_len": 77, "guidance": True}),
    ("black-forest-labs/FLUX.1-dev", None,
     {"resolution": [1024, 1024], "steps": 28, "text_len": 512, "guidance": False}),
    ("black-forest-labs/FLUX.1-schnell", "forward",
     {"resolution": [1024, 1024], "steps": 4, "text_len": 256, "guidance": False}),
    ("stabilityai/stable-diffusion-3-medium-diffusers", None,
     {"resolution": [1024, 1024], "steps": 28, "text_len": 256, "guidance": True}),
    ("THUDM/CogVideoX-5b", None,
     {"resolution": [480, 720], "frames": 49, "steps": 50, "text_len": 226, "guidance": True}),
    ("facebook/DiT-XL-2-256", None, {"resolution": [256, 256], "steps": 50, "guidance": True}),
    # training reads no sampling steps and no CFG
    ("stabilityai/stable-diffusion-xl-base-1.0", "lora",
     {"resolution": [1024, 1024], "text_len": 77}),
    ("THUDM/CogVideoX-2b", "train", {"resolution": [480, 720], "frames": 49, "text_len": 226}),
    # transformers: none (their sizes are the task's: seq_len, new_tokens)
    ("meta-llama/Llama-3.1-8B", "generate", {}),
    ("bert-base-uncased", None, {}),
]


@pytest.mark.parametrize("model,task,want", FILLED, ids=[f"{m}:{t}" for m, t, _ in FILLED])
def test_normalisation_fills_the_model_given_defaults(model, task, want):
    d = {"model": model, **({"task": task} if task else {})}
    out = Scenario.from_dict(d).to_dict()
    assert {k: out[k] for k in MODEL_KEYS if k in out} == want
    assert model_defaults(model, task) == want
    # the estimate's "scenario" is the normalised one: the defaults show there too
    est = estimate({**d, "gpu": GPU}, with_max_batch=False).to_dict()
    assert {k: est["scenario"][k] for k in MODEL_KEYS if k in est["scenario"]} == want


def test_given_values_win_and_are_checked():
    sc = Scenario.from_dict({"model": "black-forest-labs/FLUX.1-dev", "resolution": [768, 1360],
                             "steps": 50, "text_len": 256, "guidance": True})
    assert (sc.resolution, sc.steps, sc.text_len, sc.guidance) == ((768, 1360), 50, 256, True)
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict({"model": "torchvision/resnet50", "resolution": [0, 224]})
    assert e.value.key == "resolution"


@pytest.mark.parametrize("model", ["torchvision/resnet50", "black-forest-labs/FLUX.1-dev",
                                   "THUDM/CogVideoX-5b", "mmdet/faster-rcnn_r50_fpn"])
def test_filled_defaults_do_not_move_the_estimate(model):
    """Workloads read the scenario's (now always filled) value: leaving a key out and giving
    the default explicitly are the same plan and the same bytes."""
    for task in valid_tasks(model):
        d = {"model": model, "task": task, "gpu": GPU}
        explicit = {**d, **model_defaults(model, task)}
        a = estimate(d, with_max_batch=False).to_dict()
        b = estimate(explicit, with_max_batch=False).to_dict()
        assert a == b
        assert Scenario.from_dict(d) == Scenario.from_dict(explicit)


def test_round_trips_and_compact_query_keep_the_defaults():
    sc = Scenario.from_dict({"model": "THUDM/CogVideoX-5b", "batch_size": 2})
    out = sc.to_dict()
    assert Scenario.from_dict(out) == sc and Scenario.from_dict(out).to_dict() == out
    q = sc.to_query()
    assert Scenario.from_query(q) == sc
    for k in MODEL_KEYS:                       # defaults are not repeated in the link
        assert f"{k}=" not in q


def test_replace_redefaults_model_given_keys():
    sd15 = Scenario.from_dict({"model": "stable-diffusion-v1-5/stable-diffusion-v1-5"})
    xl = sd15.replace(model="stabilityai/stable-diffusion-xl-base-1.0")
    assert xl.resolution == (1024, 1024)                 # not SD 1.5's 512 carried over
    flux = sd15.replace(model="black-forest-labs/FLUX.1-dev")
    assert (flux.steps, flux.guidance, flux.text_len) == (28, False, 512)
    lora = flux.replace(task="lora")
    assert lora.steps is None and lora.guidance is None and lora.resolution == (1024, 1024)
    assert lora.replace(task="denoise") == flux
    custom = flux.replace(resolution=[512, 512]).replace(task="lora")
    assert custom.resolution == (512, 512)               # a chosen size survives a task change
    vit = Scenario.from_dict({"model": "torchvision/vit_b_16"})
    assert vit.replace(model="mmseg/pspnet_r50-d8").resolution == (512, 1024)
    assert vit.replace(batch_size=8).resolution == (224, 224)


def test_every_catalog_model_normalises_and_estimates_each_valid_task():
    for spec in list_models():
        if spec.family not in ("cnn", "vit", "detection", "segmentation", "unet", "diffusion"):
            continue
        for task in valid_tasks(spec):
            sc = Scenario.from_dict({"model": spec.id, "task": task, "gpu": GPU})
            assert sc.resolution is not None, (spec.id, task)
            if spec.config.get("video"):
                assert sc.frames == spec.config["default_frames"]
            estimate(sc, with_max_batch=False)


# ---- what a model supports ------------------------------------------------------------------

SUPPORTED = {
    "meta-llama/Llama-3.1-8B": ("train", "lora", "qlora", "forward", "generate", "serve", "load"),
    "bert-base-uncased": ("train", "lora", "qlora", "forward", "load"),
    "t5-small": ("train", "lora", "qlora", "forward", "generate", "load"),
    "torchvision/resnet50": ("train", "forward", "load"),
    "torchvision/vit_b_16": ("train", "forward", "load"),
    "mmdet/faster-rcnn_r50_fpn": ("train", "forward", "load"),
    "mmseg/pspnet_r50-d8": ("train", "forward", "load"),
    "unet/unet-2d": ("train", "forward", "load"),
    "black-forest-labs/FLUX.1-dev": ("train", "lora", "forward", "denoise", "load"),
}


@pytest.mark.parametrize("model,tasks", SUPPORTED.items(), ids=list(SUPPORTED))
def test_valid_tasks_per_family(model, tasks):
    assert valid_tasks(model) == tasks
    assert valid_tasks(get_model(model)) == tasks
    assert valid_tasks(get_model(model)) == tasks
    for task in TASKS:
        d = {"model": model, "task": task}
        if task in tasks:
            Scenario.from_dict(d)
        elif task not in valid_tasks(None):
            with pytest.raises(ScenarioError) as e:
                Scenario.from_dict(d)
            assert e.value.key == "task"


def test_valid_tasks_other_forms():
    assert valid_tasks(None) == ("render", "volume", "array")
    assert valid_tasks({"params": 7e9}) == SUPPORTED["meta-llama/Llama-3.1-8B"]
    with pytest.raises(ScenarioError) as e:
        valid_tasks("no-such-model")
    assert e.value.key == "model"


def test_every_catalog_family_has_a_table():
    fams = {s.family for s in list_models()}
    assert fams <= set(families())
    for f in fams:
        assert family_tasks(f) and set(family_tasks(f)) <= set(TASKS)


@pytest.mark.parametrize("model,task,valid,hint", [
    ("torchvision/resnet50", "lora", "train, forward, load", "decoder, encoder"),
    ("bert-base-uncased", "generate", "train, lora, qlora, forward, load",
     "decoder, encoder-decoder"),
    ("gpt2", "denoise", "train, lora, qlora, forward, generate, serve, load", "diffusion"),
    ("black-forest-labs/FLUX.1-dev", "qlora", "train, lora, forward, denoise, load",
     "decoder, encoder"),
    ("t5-small", "serve", "train, lora, qlora, forward, generate, load", "decoder models"),
])
def test_unsupported_task_is_rejected_naming_the_valid_ones(model, task, valid, hint):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict({"model": model, "task": task, "gpu": GPU})
    msg = str(e.value)
    assert e.value.key == "task"
    assert f"'{task}'" in msg and f"valid tasks: {valid}" in msg and hint in msg
    assert get_model(model).family in msg


def test_public_cases_still_load():
    """E01 (load + attached LoRA on a decoder) and M03 (diffusion LoRA) stay valid."""
    lines = (ROOT / "tests" / "data" / "public_cases.jsonl").read_text().splitlines()
    cases = {c["case_id"]: c for c in map(json.loads, filter(str.strip, lines))}
    for cid, case in cases.items():
        sc = Scenario.from_dict(case["scenario"])
        assert sc.task in valid_tasks(sc.spec), cid
    assert Scenario.from_dict(cases["E01"]["scenario"]).lora is not None
    assert Scenario.from_dict(cases["M03"]["scenario"]).task == "lora"
