"""Every contract key, fed a wrong type, a wrong value and an out-of-range value, is rejected
with one ScenarioError naming the key; the CLI turns it into exit status 2 without a traceback."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vramplan.errors import ScenarioError
from vramplan.scenario import CONTRACT_KEYS, Scenario

TRAIN = {"model": "meta-llama/Llama-2-7b-hf", "task": "train"}
GEN = {"model": "meta-llama/Llama-2-7b-hf", "task": "generate"}
SERVE = {"model": "meta-llama/Llama-3.1-8B", "task": "serve"}
LORA = {"model": "meta-llama/Llama-2-7b-hf", "task": "lora"}
T5 = {"model": "t5-small", "task": "train"}
DIFF = {"model": "black-forest-labs/FLUX.1-dev", "task": "denoise"}
ARRAY = {"task": "array"}

# key -> (base scenario, [(label, value, key named in the error)])
BAD = {
    "model": (TRAIN, [("type", 5, "model"), ("value", "no-such-org/no-such-model", "model"),
                      ("range", "", "model")]),
    "architecture": ({"task": "train"}, [("type", [1, 2], "architecture"),
                                         ("value", {"hidden_size": 64}, "architecture"),
                                         ("range", {"params": 0}, "architecture")]),
    "task": (TRAIN, [("type", 3, "task"), ("value", "fly", "task"), ("range", "denoise", "task")]),
    "batch_size": (TRAIN, [("type", "8", "batch_size"), ("value", 1.5, "batch_size"),
                           ("range", 0, "batch_size")]),
    "seq_len": (TRAIN, [("type", True, "seq_len"), ("value", 20.5, "seq_len"),
                        ("range", 0, "seq_len")]),
    "new_tokens": (GEN, [("type", "5", "new_tokens"), ("value", 2.5, "new_tokens"),
                         ("range", -1, "new_tokens")]),
    "target_len": (T5, [("type", "5", "target_len"), ("value", 1.5, "target_len"),
                        ("range", 0, "target_len")]),
    "text_len": (DIFF, [("type", "77", "text_len"), ("value", 7.7, "text_len"),
                        ("range", 0, "text_len")]),
    "guidance": (DIFF, [("type", "yes", "guidance"), ("value", 1, "guidance"),
                        ("range", 0, "guidance")]),
    "resolution": (DIFF, [("type", "1024x1024", "resolution"), ("value", [1024], "resolution"),
                          ("range", [0, 1024], "resolution")]),
    "frames": (DIFF, [("type", "49", "frames"), ("value", 2.5, "frames"), ("range", 0, "frames")]),
    "steps": (DIFF, [("type", "50", "steps"), ("value", 1.5, "steps"), ("range", 0, "steps")]),
    "precision": (TRAIN, [("type", 16, "precision"), ("value", "fp64", "precision"),
                          ("range", "nf4", "precision")]),
    "optimizer": (TRAIN, [("type", 1, "optimizer"), ("value", "adamz", "optimizer"),
                          ("range", ["adamw"], "optimizer")]),
    "gradient_accumulation": (TRAIN, [("type", "4", "gradient_accumulation"),
                                      ("value", 1.5, "gradient_accumulation"),
                                      ("range", 0, "gradient_accumulation")]),
    "checkpointing": (TRAIN, [("type", True, "checkpointing"), ("value", "some", "checkpointing"),
                              ("range", "FULL", "checkpointing")]),
    "attention": (TRAIN, [("type", 1, "attention"), ("value", "paged", "attention"),
                          ("range", "", "attention")]),
    "lora": (LORA, [("type", "r8", "lora"), ("value", {"rank": 8, "bogus": 1}, "lora.bogus"),
                    ("range", {"rank": 0}, "lora.rank")]),
    "parallel": (TRAIN, [("type", 8, "parallel"),
                         ("value", {"gpus": 8, "data": 3}, "parallel.gpus"),
                         ("range", {"zero": 4}, "parallel.zero")]),
    "offload": (TRAIN, [("type", "optimizer", "offload"), ("value", ["disk"], "offload"),
                        ("range", [""], "offload")]),
    "options": (TRAIN, [("type", "compile", "options"), ("value", ["turbo"], "options"),
                        ("range", [5], "options")]),
    "serving": (SERVE, [("type", "fast", "serving"),
                        ("value", {"kv_cache_dtype": "int3"}, "serving.kv_cache_dtype"),
                        ("range", {"gpu_memory_utilization": 1.5},
                         "serving.gpu_memory_utilization")]),
    "stack": (TRAIN, [("type", 80, "stack"), ("value", "pytorchh", "stack"),
                      ("range", "hf@0.4", "stack")]),
    "safety_margin": (TRAIN, [("type", True, "safety_margin"),
                              ("value", "lots", "safety_margin"),
                              ("range", "60%", "safety_margin")]),
    "gpu": (TRAIN, [("type", 80, "gpu"), ("value", "nvidia-a100-sxm4-80gbx", "gpu"),
                    ("range", "", "gpu")]),
}

# more ways to get a key wrong: nested keys and rules between keys
MORE = [
    (TRAIN, {"model": "gpt2", "seq_len": 2048}, "seq_len"),          # > learned positions
    (TRAIN, {"new_tokens": 5}, "new_tokens"),                          # generate only
    (TRAIN, {"target_len": 5}, "target_len"),                          # encoder-decoder only
    (TRAIN, {"resolution": [224, 224]}, "resolution"),                 # not for text models
    (TRAIN, {"guidance": True}, "guidance"),                           # diffusion only
    (TRAIN, {"steps": 20}, "steps"),
    (TRAIN, {"text_len": 77}, "text_len"),
    (TRAIN, {"frames": 9}, "frames"),
    (TRAIN, {"serving": {}}, "serving"),                               # serve only
    (TRAIN, {"lora": {"rank": 8}}, "lora"),                            # task lora for adapters
    (TRAIN, {"architecture": {"params": 7e9}}, "architecture"),        # not both
    (TRAIN, {"precision": {"default": "fp64"}}, "precision.default"),
    (TRAIN, {"precision": {"vae": 3}}, "precision.vae"),
    (TRAIN, {"precision": {}}, "precision"),
    (TRAIN, {"parallel": {"tensor": "2"}}, "parallel.tensor"),
    (TRAIN, {"parallel": {"gpus": True}}, "parallel.gpus"),
    (TRAIN, {"parallel": {"gpus": 6, "tensor": 4}}, "parallel.gpus"),
    (TRAIN, {"parallel": {"pipeline": 0}}, "parallel.pipeline"),
    (TRAIN, {"parallel": {"context": 1.5}}, "parallel.context"),
    (TRAIN, {"parallel": {"data": -1}}, "parallel.data"),
    (LORA, {"lora": {"alpha": 0}}, "lora.alpha"),
    (LORA, {"lora": {"alpha": "16"}}, "lora.alpha"),
    (LORA, {"lora": {"targets": []}}, "lora.targets"),
    (LORA, {"lora": {"targets": "q_proj"}}, "lora.targets"),
    (LORA, {"lora": {"rank": True}}, "lora.rank"),
    (LORA, {"lora": {"dropout": 1.5}}, "lora.dropout"),
    ({"model": "meta-llama/Llama-2-7b-hf", "task": "qlora"}, {"precision": "bf16"}, "precision"),
    (SERVE, {"serving": {"max_num_seqs": 0}}, "serving.max_num_seqs"),
    (SERVE, {"serving": {"max_model_len": "8k"}}, "serving.max_model_len"),
    (SERVE, {"serving": {"cuda_graphs": 1}}, "serving.cuda_graphs"),
    (SERVE, {"serving": {"gpu_memory_utilization": 0}}, "serving.gpu_memory_utilization"),
    (SERVE, {"serving": {"gpu_memory_utilization": True}}, "serving.gpu_memory_utilization"),
    (SERVE, {"serving": {"max_num_batched_tokens": -5}}, "serving.max_num_batched_tokens"),
    (SERVE, {"seq_len": 9000, "serving": {"max_model_len": 8192}}, "seq_len"),
    (GEN, {"checkpointing": "full"}, "checkpointing"),
    (GEN, {"gradient_accumulation": 4}, "gradient_accumulation"),
    ({"model": "bert-base-uncased"}, {"task": "generate"}, "task"),
    (ARRAY, {"model": "gpt2"}, "model"),
    ({}, {"task": "train"}, "model"),
    ({}, {}, "task"),
    (TRAIN, {"batch_size": None, "bogus": 1}, "bogus"),
    (TRAIN, {"batch_size": 2**40}, "batch_size"),
    (DIFF, {"resolution": [512, 512, 512, 512]}, "resolution"),
    (DIFF, {"resolution": [512, True]}, "resolution"),
    (ARRAY, {"fps": 60}, "fps"),                                       # render key on array
]

CASES = [(base, key, label, value, named)
         for key, (base, bads) in BAD.items() for label, value, named in bads]


def test_every_contract_key_is_covered():
    assert set(BAD) == set(CONTRACT_KEYS)


def _scenario(base, key, value):
    d = {k: v for k, v in base.items() if not (key == "model" and k == "architecture")}
    d[key] = value
    if key == "architecture":
        d.pop("model", None)
    return d


@pytest.mark.parametrize("base, key, label, value, named", CASES,
                         ids=[f"{c[1]}-{c[2]}" for c in CASES])
def test_bad_value_names_the_key(base, key, label, value, named):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(_scenario(base, key, value))
    assert e.value.key == named
    assert f"'{named}'" in str(e.value)


@pytest.mark.parametrize("base, change, named", MORE, ids=[m[2] for m in MORE])
def test_more_bad_inputs_name_the_key(base, change, named):
    d = {**base, **change}
    d = {k: v for k, v in d.items() if v is not None}
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(d)
    assert e.value.key == named, str(e.value)
    assert f"'{named}'" in str(e.value)


def test_enumeration_errors_list_allowed_values():
    with pytest.raises(ScenarioError, match="adamw, adam, sgd"):
        Scenario.from_dict({**TRAIN, "optimizer": "adamz"})
    with pytest.raises(ScenarioError, match="eager, sdpa, flash"):
        Scenario.from_dict({**TRAIN, "attention": "paged"})


def test_unknown_gpu_lists_closest():
    with pytest.raises(ScenarioError, match="nvidia-a100-sxm4-80gb"):
        Scenario.from_dict({**TRAIN, "gpu": "nvidia-a100-sxm4-80gbx"})


def test_not_an_object():
    for d in ([], "train", None, 3):
        with pytest.raises(ScenarioError):
            Scenario.from_dict(d)


# ---- CLI -------------------------------------------------------------------------------------

VRAMPLAN = Path(sys.executable).with_name("vramplan")
needs_estimate = pytest.mark.skipif(
    importlib.util.find_spec("vramplan.commands.estimate") is None,
    reason="vramplan.commands.estimate not written yet")


def _run(tmp_path, text):
    f = tmp_path / "bad.json"
    f.write_text(text)
    return subprocess.run([str(VRAMPLAN), "estimate", "--scenario", str(f), "--format", "json"],
                          capture_output=True, text=True, timeout=120)


CLI_CASES = [(base, key, value, named) for key, (base, bads) in BAD.items()
             for label, value, named in bads if label == "value"]


@needs_estimate
@pytest.mark.parametrize("base, key, value, named", CLI_CASES, ids=[c[1] for c in CLI_CASES])
def test_cli_rejects_bad_scenario_file(tmp_path, base, key, value, named):
    r = _run(tmp_path, json.dumps(_scenario(base, key, value)))
    assert r.returncode == 2, r.stderr
    assert f"'{named}'" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


@needs_estimate
def test_cli_not_json_names_the_line(tmp_path):
    """Either the whole run stops (exit 2) or the line's output is {"error": ...}; both name
    the line (estimate.py treats an unparsable file as JSON Lines)."""
    r = _run(tmp_path, "{ not json\n")
    assert "Traceback" not in r.stderr + r.stdout
    if r.returncode == 2:
        assert "line 1" in r.stderr
    else:
        assert r.returncode == 0 and "line 1" in json.loads(r.stdout.splitlines()[0])["error"]
