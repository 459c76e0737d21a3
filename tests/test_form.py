"""`vramplan.scenario.form`: the fields that apply to a draft, with its choices and defaults
(values checkable on the model cards and in docs/scenario.md), every problem by key, and the
scenario a draft makes."""
from __future__ import annotations

import pytest

from vramplan.catalog import list_models
from vramplan.scenario import Scenario, valid_tasks
from vramplan.scenario.form import check, fields, normalise
from vramplan.scenario.resolution import with_path

LLAMA31 = "meta-llama/Llama-3.1-8B"
MODEL_KEYS = ("resolution", "frames", "steps", "text_len", "guidance")
PARALLEL = {f"parallel.{k}" for k in ("gpus", "data", "tensor", "pipeline", "context", "zero")}


def _by_key(draft):
    return {f.key: f for f in fields(draft)}


def test_cnn_has_no_sequence_attention_or_lora():
    f = _by_key({"model": "torchvision/resnet50"})
    assert set(f) == {"model", "task", "batch_size", "resolution", "precision", "optimizer",
                      "gradient_accumulation", "checkpointing", "offload", "options",
                      "stack", "gpu", "safety_margin"} | PARALLEL
    assert f["task"].choices == ("train", "forward", "load") and f["task"].default == "train"
    assert f["resolution"].default == [224, 224] and f["resolution"].kind == "resolution"
    assert f["offload"].choices == ("optimizer", "gradients")
    assert "optimizer-in-backward" in f["options"].choices
    assert "chunked-loss" not in f["options"].choices        # a transformer's loss
    assert f["model"].value == "torchvision/resnet50"


def test_render_has_no_batch_model_or_precision():
    f = _by_key({"task": "render"})
    assert "batch_size" not in f and "model" not in f and "precision" not in f
    assert "seq_len" not in f and "attention" not in f and not PARALLEL & set(f)
    assert f["resolution"].default == [1080, 1920]
    assert f["msaa"].choices == (1, 2, 4, 8, 16) and f["msaa"].default == 1
    assert f["fps"].default == 60.0 and f["fps"].unit == "frames/s"
    assert f["texture_budget"].kind == "size"
    assert f["task"].choices == ("render", "volume", "array")


def test_volume_and_array():
    v = _by_key({"task": "volume"})
    assert v["resolution"].default == [512, 512, 512] and v["batch_size"].default == 1
    assert (v["copies"].default, v["dtype"].default, v["channels"].default) == (3, "float32", 1)
    assert "patch" not in v                          # read only with a model: never yet
    a = _by_key({"task": "array"})
    assert "batch_size" not in a and "resolution" not in a and "dtype" not in a
    assert a["copies"].default == 1 and a["arrays"].default == []


def test_decoder_tasks_and_training_fields():
    f = _by_key({"model": LLAMA31})
    assert f["task"].choices == ("train", "lora", "qlora", "forward", "generate", "serve",
                                 "load")
    assert f["seq_len"].default == 2048 and f["seq_len"].unit == "tokens"
    assert f["precision"].choices == ("fp32", "tf32", "fp16", "bf16", "fp16-mixed",
                                      "bf16-mixed", "mxfp8-train", "nvfp4-train")
    # train refuses weight formats; takes the MXFP8 / NVFP4 training recipes
    assert f["precision"].default == "bf16-mixed" and f["optimizer"].default == "adamw"
    assert f["attention"].default == "sdpa"
    assert not {"new_tokens", "target_len", "resolution", "steps", "lora.rank"} & set(f)
    assert not any(k.startswith("serving.") for k in f)


def test_generate_and_inference_drop_the_training_fields():
    f = _by_key({"model": LLAMA31, "task": "generate"})
    assert (f["seq_len"].default, f["new_tokens"].default) == (512, 256)
    assert not {"optimizer", "gradient_accumulation", "checkpointing"} & set(f)
    assert "static-cache" in f["options"].choices and "fused-optimizer" not in f["options"].choices
    assert "nf4" in f["precision"].choices


def test_qlora_precisions_and_lora_fields():
    f = _by_key({"model": LLAMA31, "task": "qlora"})
    assert f["precision"].choices == ("fp8", "int8", "int4", "nf4")
    assert f["precision"].default == "nf4"
    assert (f["lora.rank"].default, f["lora.alpha"].default) == (8, 16)
    assert f["lora.targets"].default == ["q_proj", "v_proj"]
    assert f["lora.rank"].label == "LoRA rank" and f["lora.rank"].min == 1


def test_serve_links_batch_and_length_to_the_engine():
    f = _by_key({"model": LLAMA31, "task": "serve"})
    assert f["batch_size"].default == 256 and f["serving.max_num_seqs"].default == 256
    assert f["seq_len"].default == 131072 == f["serving.max_model_len"].default
    assert f["serving.max_num_batched_tokens"].default == 8192
    assert f["serving.kv_cache_dtype"].label == "KV cache dtype"
    assert f["offload"].choices == ("params",)
    g = _by_key({"model": LLAMA31, "task": "serve", "serving": {"max_model_len": 4096},
                 "batch_size": 64})
    assert g["seq_len"].default == 4096 and g["serving.max_num_seqs"].default == 64
    assert g["serving.max_model_len"].value == 4096


def test_learned_positions_cap_seq_len():
    f = _by_key({"model": "gpt2"})
    assert f["seq_len"].max == 1024 and f["seq_len"].default == 1024
    # rope models end at their positions too (issue 20.8): Llama 3.1's max_position_embeddings
    # 131072 (rope_type llama3 counts its factor 8 already); a size-only decoder states none
    assert _by_key({"model": LLAMA31})["seq_len"].max == 131072
    assert _by_key({"architecture": {"params": 7e9}})["seq_len"].max == 1 << 30


def test_encoder_decoder_target_len():
    assert _by_key({"model": "t5-small"})["target_len"].default == 512
    assert "target_len" not in _by_key({"model": "t5-small", "task": "generate"})


def test_diffusion_fields_follow_the_pipeline():
    f = _by_key({"model": "black-forest-labs/FLUX.1-dev"})
    assert f["task"].default == "denoise"
    assert (f["steps"].default, f["guidance"].default, f["text_len"].default) == (28, False, 512)
    assert f["resolution"].default == [1024, 1024] and "frames" not in f
    assert f["offload"].choices == ("model",) and "vae-tiling" in f["options"].choices
    assert "attention" in f and "seq_len" not in f
    lora = _by_key({"model": "black-forest-labs/FLUX.1-dev", "task": "lora"})
    assert "steps" not in lora and "guidance" not in lora and "lora.rank" in lora
    assert _by_key({"model": "THUDM/CogVideoX-5b"})["frames"].default == 49


def test_a_drafts_values_are_its_given_keys_nested():
    f = _by_key({"model": "gpt2", "task": "lora", "lora": {"rank": 16}, "parallel": {"gpus": 2}})
    assert f["lora.rank"].value == 16 and f["parallel.gpus"].value == 2
    assert f["lora.alpha"].value is None
    # a field edits its key by path; the draft stays the scenario's shape (no flat / fold)
    assert with_path({"precision": "bf16"}, "precision.vae", "fp32") == {
        "precision": {"default": "bf16", "vae": "fp32"}}
    assert with_path({"lora": {"rank": 16}, "batch_size": 2}, "lora.rank", None) == {
        "batch_size": 2}
    # a dotted top-level key is no draft's: the pass names it
    assert "lora.rank" in check({"model": "gpt2", "task": "lora", "lora.rank": 16})


def test_an_unknown_model_still_gets_a_form():
    f = _by_key({"model": "no-such-model"})
    assert "model" in f and "task" in f and f["task"].choices is not None


# ---- consistency with the scenario: what the form offers is what from_dict takes ---------------

def _one_per_family():
    seen = {}
    for spec in list_models():
        seen.setdefault(spec.family, spec.id)
    return sorted(seen.values())


@pytest.mark.parametrize("model", _one_per_family())
def test_every_field_default_is_accepted_and_model_keys_match(model):
    for task in valid_tasks(model):
        draft = {"model": model, "task": task}
        sc = Scenario.from_dict(draft).to_dict()
        fs = fields(draft)
        shown = {f.key for f in fs}
        assert {k for k in MODEL_KEYS if k in sc} == {k for k in MODEL_KEYS if k in shown}
        for f in fs:
            if f.default is None or f.key in ("model", "task"):
                continue
            d = with_path(draft, f.key, f.default)
            assert Scenario.from_dict(d).to_dict() == sc, (model, task, f.key)
            if f.choices and f.kind == "choice":
                for c in f.choices[:12]:
                    Scenario.from_dict(with_path(draft, f.key, c))


# ---- check and normalise -----------------------------------------------------------------------

def test_check_names_every_problem():
    errors = check({"model": "gpt2", "batch_size": 0, "bogus": 1, "seq_len": "x",
                    "parallel": {"gpus": 0, "tensor": "2"}, "resolution": [224, 224]})
    assert set(errors) == {"batch_size", "bogus", "seq_len", "parallel.gpus", "parallel.tensor",
                           "resolution"}
    assert "between 1 and" in errors["batch_size"]
    assert not errors["bogus"].startswith("scenario key")


def test_check_rules_between_keys_and_valid_drafts():
    assert check({"model": "gpt2"}) == {}
    assert set(check({"model": "gpt2", "parallel": {"gpus": 6, "tensor": 4}})) == {"parallel.gpus"}
    assert set(check({"model": "gpt2", "seq_len": 5000})) == {"seq_len"}
    assert set(check({"model": "gpt2", "task": "generate", "optimizer": "sgd"})) == {"optimizer"}
    assert set(check({"model": "no-such-model", "batch_size": 0})) == {"model", "batch_size"}
    assert set(check({"task": "train"})) == {"model"}
    assert set(check([])) == {"scenario"}


def test_normalise():
    sc, errors = normalise({"model": "gpt2", "parallel": {"gpus": 2}, "task": "", "gpu": None})
    assert errors == {} and sc == Scenario.from_dict({"model": "gpt2", "parallel": {"gpus": 2}})
    sc, errors = normalise({"model": "gpt2", "batch_size": -1})
    assert sc is None and set(errors) == {"batch_size"}


def test_low_precision_training_recipes_are_offered_to_train_only():
    """MXFP8 / NVFP4 training (torchao's converted linears) is a training recipe: the form
    offers it for `train` only, and any other task refuses it naming `precision` (the form
    offered it to lora and inference, where the estimate then refused it)."""
    from vramplan.errors import ScenarioError
    from vramplan.scenario import Scenario
    from vramplan.scenario.rules import precisions_for
    from vramplan.vocab import LOW_PRECISION_TRAINING
    assert set(LOW_PRECISION_TRAINING) <= set(precisions_for("train"))
    for task in ("lora", "qlora", "forward", "generate", "serve", "denoise", "load"):
        assert not set(LOW_PRECISION_TRAINING) & set(precisions_for(task)), task
    with pytest.raises(ScenarioError, match="precision"):
        Scenario.from_dict({"model": "meta-llama/Llama-3.1-8B", "task": "generate",
                            "precision": "mxfp8-train", "gpu": "nvidia-h100-sxm5-80gb"})
