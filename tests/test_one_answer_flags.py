"""Issue 20.9: `advise`, `sweep`, `report` and `trace` take the scenario flags `estimate` takes
(one definition: commands/_plan.py over the key table's `cli_flags()`), and `--scenario FILE`
still works; the same plan given either way gives the same answer. Before, these commands
accepted only `--scenario`."""
import json

import pytest

from vramplan.cli import build_parser, main
from vramplan.scenario.keys import cli_flags

GPT2 = {"model": "gpt2", "task": "train", "batch_size": 2, "seq_len": 512,
        "gpu": "nvidia-rtx-4090"}
FLAGS = ["--model", "gpt2", "--task", "train", "--batch-size", "2", "--seq-len", "512",
         "--gpu", "nvidia-rtx-4090"]


def _options(command: str) -> set:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return {o for a in sub.choices[command]._actions for o in a.option_strings}


@pytest.mark.parametrize("command", ["estimate", "advise", "sweep", "report", "trace"])
def test_every_command_has_every_key_flag(command):
    have = _options(command)
    want = {f.flag for f in cli_flags()} | {"--scenario", "--architecture", "--lora-targets",
                                           "--option", "--offload"}
    if command == "trace":
        want.discard("--steps")     # trace's own --steps (steps traced), not denoising steps
    assert want <= have, sorted(want - have)


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


@pytest.fixture
def plan_file(tmp_path):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(GPT2))
    return str(f)


def test_advise_flags_equal_file(capsys, plan_file):
    a = json.loads(_run(capsys, "advise", *FLAGS, "--no-gpu-table", "--format", "json"))
    b = json.loads(_run(capsys, "advise", "--scenario", plan_file, "--no-gpu-table",
                        "--format", "json"))
    assert a == b and a["scenario"]["batch_size"] == 2


def test_sweep_flags_equal_file(capsys, plan_file):
    vary = ["--vary", "batch_size=1,2", "--vary", "gpu=nvidia-rtx-4090", "--format", "json"]
    a = json.loads(_run(capsys, "sweep", *FLAGS, *vary))
    b = json.loads(_run(capsys, "sweep", "--scenario", plan_file, *vary))
    assert a["points"] == b["points"] and len(a["points"]) == 2


def test_report_flags_equal_file(capsys, plan_file):
    a = _run(capsys, "report", *FLAGS, "--no-advice")
    b = _run(capsys, "report", "--scenario", plan_file, "--no-advice")
    assert a == b and "gpt2" in a


def test_report_gpu_flag_replaces_the_files(capsys, plan_file):
    out = _run(capsys, "report", "--scenario", plan_file, "--gpu", "nvidia-a100-sxm4-80gb",
               "--no-advice")
    assert "A100" in out


def test_trace_flags_equal_file(capsys, tmp_path):
    arch = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128,
            "vocab_size": 256, "max_position_embeddings": 128}
    plan = {"architecture": arch, "task": "train", "batch_size": 1, "seq_len": 32,
            "precision": "fp32", "gpu": "nvidia-rtx-4090"}
    f = tmp_path / "t.json"
    f.write_text(json.dumps(plan))
    flags = ["--architecture", json.dumps(arch), "--task", "train", "--batch-size", "1",
             "--seq-len", "32", "--precision", "fp32", "--gpu", "nvidia-rtx-4090"]
    a = json.loads(_run(capsys, "trace", *flags, "--steps", "1", "--format", "json"))
    b = json.loads(_run(capsys, "trace", "--scenario", str(f), "--steps", "1",
                        "--format", "json"))
    assert a["per_gpu"] == b["per_gpu"] and a["scenario"] == b["scenario"]


@pytest.mark.parametrize("command", ["advise", "sweep", "report"])
def test_file_plus_key_flags_is_refused(command, capsys, plan_file):
    rc = main([command, "--scenario", plan_file, "--batch-size", "4"])
    err = capsys.readouterr().err
    assert rc == 2 and "--batch-size would be ignored" in err


@pytest.mark.parametrize("command", ["advise", "sweep", "report"])
def test_no_plan_is_one_error_line(command, capsys):
    rc = main([command])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("vramplan: error: ") and "--scenario FILE" in err


def test_bad_key_flag_names_the_key(capsys):
    rc = main(["advise", "--model", "gpt2", "--gpu", "nvidia-rtx-4090", "--seq-len", "4096"])
    err = capsys.readouterr().err
    assert rc == 2 and "seq_len" in err and "1,024 positions" in err
