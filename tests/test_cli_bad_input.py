"""The CLI on bad input: exit status 2, one line `vramplan: error: <message naming the problem>`,
never a traceback; and a failure is never reported with status 0."""
import json

import pytest

from cli_helpers import clean_hwdb, run  # noqa: F401 (clean_hwdb: the fixture pytestmark uses)
from vramplan import scenario
from vramplan.cli import build_parser

GPT2 = {"model": "gpt2", "task": "forward", "precision": "fp32", "gpu": "nvidia-l4"}
GPT2_WEIGHTS = 4 * 124_439_808          # GPT-2 small: 124,439,808 parameters, fp32
HWDB_DEVICE = ('[[source]]\nid = "s"\ntitle = "t"\ndoc = "d"\n\n[[device]]\nid = "my-card"\n'
               'vendor = "Lab"\nname = "My Card"\narchitecture = "X"\nyear = 2024\n'
               'form_factor = "PCIe"\nmemory = "{memory}"\nmemory_type = "GDDR6"\n'
               'bus_width_bits = 128\ndata_rate_gbps = 16\nbandwidth_gbs = 256\nsources = ["s"]\n')
DEEP = "[" * 3000 + "]" * 3000


pytestmark = pytest.mark.usefixtures("clean_hwdb")


def one_error_line(err: str) -> str:
    """The single `vramplan: error:` line of stderr (and nothing else there)."""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vramplan: error: "), err
    return lines[0]


# ---- estimate --scenario FILE: any failure is exit 2 ---------------------------------------

@pytest.mark.parametrize("name, data", [
    ("truncated.json", b'{"model": "gpt2", "task": "forw'),
    ("text.json", b"this is not json"),
    ("binary.json", bytes(range(256))),
    ("deep.json", DEEP.encode()),
])
def test_scenario_file_that_is_no_scenario_exits_2(tmp_path, capsys, name, data):
    f = tmp_path / name
    f.write_bytes(data)
    rc, out, err = run(capsys, "estimate", "--scenario", str(f), "--format", "json")
    assert rc == 2 and out == ""
    assert name in one_error_line(err)


def test_scenario_file_with_utf8_bom_is_estimated(tmp_path, capsys):
    f = tmp_path / "bom.json"
    f.write_bytes(b"\xef\xbb\xbf" + json.dumps(GPT2).encode())
    rc, out, err = run(capsys, "estimate", "--scenario", str(f), "--format", "json")
    assert rc == 0, err
    assert json.loads(out)["per_gpu"]["components"]["weights"] == GPT2_WEIGHTS


def test_scenario_file_list_of_non_objects_exits_2(tmp_path, capsys):
    f = tmp_path / "list.json"
    f.write_text("[1, 2]")
    rc, out, err = run(capsys, "estimate", "--scenario", str(f), "--format", "json")
    assert rc == 2 and "Traceback" not in err
    for line in out.splitlines():        # a batch of two rejected scenarios, or one file error
        assert "error" in json.loads(line)


def test_batch_reports_failures_in_place_and_exits_2(tmp_path, capsys):
    f = tmp_path / "plans.jsonl"
    f.write_text("\n".join(json.dumps(d) for d in (GPT2, {**GPT2, "task": "nope"}, GPT2)))
    rc, out, err = run(capsys, "estimate", "--scenario", str(f), "--format", "json")
    lines = [json.loads(x) for x in out.splitlines()]
    assert rc == 2
    assert [("error" in d) for d in lines] == [False, True, False]
    assert lines[0]["per_gpu"]["components"]["weights"] == GPT2_WEIGHTS
    assert "'nope'" in lines[1]["error"]
    msg = one_error_line(err)
    assert "1 of 3" in msg and "scenario 2" in msg


def test_batch_honours_format_table(tmp_path, capsys):
    f = tmp_path / "plans.jsonl"
    f.write_text(json.dumps(GPT2) + "\n" + json.dumps({**GPT2, "model": "bert-base-uncased"}))
    rc, out, err = run(capsys, "estimate", "--scenario", str(f))
    assert rc == 0, err
    rows = out.strip().splitlines()
    assert rows[0].split()[:4] == ["#", "model", "task", "gpu"]
    assert rows[2].split()[:4] == ["1", "gpt2", "forward", "nvidia-l4"]
    assert rows[3].split()[:2] == ["2", "bert-base-uncased"]
    assert not out.lstrip().startswith("{")


def test_batch_table_lists_failures_below(tmp_path, capsys):
    f = tmp_path / "plans.jsonl"
    f.write_text(json.dumps(GPT2) + "\n" + json.dumps({**GPT2, "gpu": "nvidia-h1000"}))
    rc, out, err = run(capsys, "estimate", "--scenario", str(f))
    assert rc == 2
    assert "scenario 2: error:" in out and "unknown GPU 'nvidia-h1000'" in out
    one_error_line(err)


def test_scenario_flags_with_a_file_are_refused(tmp_path, capsys):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(GPT2))
    rc, _, err = run(capsys, "estimate", "--scenario", str(f), "--batch-size", "4")
    assert rc == 2 and "--batch-size" in one_error_line(err)


def test_gpu_flag_replaces_the_files_gpu(tmp_path, capsys):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(GPT2))
    rc, out, err = run(capsys, "estimate", "--scenario", str(f), "--gpu", "nvidia-t4",
                       "--format", "json")
    d = json.loads(out)
    assert rc == 0 and d["gpu"]["id"] == "nvidia-t4" and d["scenario"]["gpu"] == "nvidia-t4"


# ---- no GPU, unknown LoRA targets ----------------------------------------------------------

def test_estimate_without_gpu_says_so(capsys):
    rc, out, err = run(capsys, "estimate", "--model", "gpt2")
    msg = one_error_line(err)
    assert rc == 2 and out == ""
    assert "no GPU given" in msg and "--gpu" in msg and "None" not in msg


def test_scenario_file_without_gpu_says_so(tmp_path, capsys):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps({"model": "gpt2", "task": "forward"}))
    rc, _, err = run(capsys, "estimate", "--scenario", str(f))
    assert rc == 2 and "no GPU given" in one_error_line(err)


def test_unknown_lora_target_is_refused_listing_valid_ones(capsys):
    rc, out, err = run(capsys, "estimate", "--model", "gpt2", "--task", "lora",
                       "--lora-targets", "nosuch_proj", "--gpu", "nvidia-l4")
    msg = one_error_line(err)
    assert rc == 2 and out == ""
    assert "'nosuch_proj'" in msg and "c_attn" in msg and "q_proj" in msg


def test_known_lora_targets_pass(capsys):
    rc, out, err = run(capsys, "estimate", "--model", "gpt2", "--task", "lora",
                       "--lora-targets", "c_attn,c_proj", "--gpu", "nvidia-l4", "--format", "json")
    assert rc == 0, err


def test_unknown_diffusion_lora_target_is_refused(capsys):
    rc, _, err = run(capsys, "estimate", "--model", "stabilityai/stable-diffusion-xl-base-1.0",
                     "--task", "lora", "--lora-targets", "to_q,nosuch", "--gpu",
                     "nvidia-a100-sxm4-80gb")
    msg = one_error_line(err)
    assert rc == 2 and "'nosuch'" in msg and "to_q" in msg


def test_diffusion_lora_targets_are_the_ones_the_workload_counts():
    """Each name the CLI accepts adds one adapted matrix per block: with 'to_q' as well, the
    adapter gradients double (n_targets 1 -> 2 in workloads/diffusion.py)."""
    from vramplan.commands.estimate import DIFFUSION_LORA_TARGETS
    from vramplan.estimate import estimate

    def grads(targets):
        return estimate({"model": "stabilityai/stable-diffusion-xl-base-1.0", "task": "lora",
                         "lora": {"targets": targets}, "gpu": "nvidia-a100-sxm4-80gb"},
                        with_max_batch=False).components["gradients"]
    one = grads(["to_q"])
    for name in DIFFUSION_LORA_TARGETS:
        if name != "to_q":
            assert grads(["to_q", name]) == 2 * one, name


# ---- overflow, binary files, deep nesting --------------------------------------------------

def test_gpus_min_memory_1e999(capsys):
    rc, out, err = run(capsys, "gpus", "--min-memory", "1e999 GiB")
    msg = one_error_line(err)
    assert rc == 2 and out == "" and "--min-memory" in msg and "1e999 GiB" in msg


def test_hwdb_device_memory_1e999(tmp_path, capsys):
    f = tmp_path / "mine.toml"
    f.write_text(HWDB_DEVICE.format(memory="1e999 GiB"))
    rc, _, err = run(capsys, "--hwdb", str(f), "gpus")
    msg = one_error_line(err)
    assert rc == 2 and "mine.toml" in msg and "my-card" in msg and "'memory'" in msg


@pytest.mark.parametrize("argv", [["--hwdb", "{f}", "gpus"], ["trace", "--scenario", "{f}"]])
def test_binary_file(tmp_path, capsys, argv):
    f = tmp_path / "blob.bin"
    f.write_bytes(bytes(range(128, 256)) * 4)
    rc, _, err = run(capsys, *[a.format(f=f) for a in argv])
    msg = one_error_line(err)
    assert rc == 2 and "blob.bin" in msg and "binary" in msg


def test_deep_architecture_flag_inline_and_file(tmp_path, capsys):
    f = tmp_path / "config.json"
    f.write_text(DEEP)
    for value in (DEEP, str(f), '{"a": ' * 3000 + "1" + "}" * 3000):
        rc, _, err = run(capsys, "estimate", "--architecture", value, "--gpu", "nvidia-l4")
        msg = one_error_line(err)
        assert rc == 2 and "--architecture" in msg and "nested" in msg


def test_architecture_neither_file_nor_json(capsys):
    rc, _, err = run(capsys, "estimate", "--architecture", "x" * 5000, "--gpu", "nvidia-l4")
    msg = one_error_line(err)
    assert rc == 2 and "neither a file nor JSON" in msg and len(msg) < 300


def test_deep_trace_scenario_file(tmp_path, capsys):
    f = tmp_path / "deep.json"
    f.write_text('{"model": ' * 3000 + '"gpt2"' + "}" * 3000)
    rc, _, err = run(capsys, "trace", "--scenario", str(f))
    assert rc == 2 and "nested" in one_error_line(err)


# ---- --hwdb paths --------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["broken", "empty-dir", "missing"])
def test_hwdb_bad_path_names_it(tmp_path, capsys, kind):
    p = tmp_path / {"broken": "broken.toml", "empty-dir": "mydb", "missing": "nothere.toml"}[kind]
    if kind == "broken":
        p.write_text("[[device]\nid = ")
    elif kind == "empty-dir":
        p.mkdir()
        (p / "notes.txt").write_text("no toml here")
    rc, out, err = run(capsys, "--hwdb", str(p), "gpus")
    msg = one_error_line(err)
    assert rc == 2 and out == "" and p.name in msg


# ---- flags: ranges, help, choices ----------------------------------------------------------

@pytest.mark.parametrize("steps", ["-1", "0", "two"])
def test_trace_steps_must_be_at_least_one(tmp_path, capsys, steps):
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(GPT2))
    rc, out, err = run(capsys, "trace", "--scenario", str(f), "--steps", steps)
    msg = one_error_line(err)
    assert rc == 2 and out == "" and "--steps" in msg


def _estimate_parser():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices["estimate"]


def test_every_estimate_flag_has_help():
    missing = [a.option_strings[0] for a in _estimate_parser()._actions
               if a.option_strings and a.dest != "help" and not a.help]
    assert missing == []


def test_estimate_enum_flags_take_the_scenario_constants():
    choices = {a.dest: a.choices for a in _estimate_parser()._actions}
    assert tuple(choices["task"]) == scenario.TASKS
    assert tuple(choices["precision"]) == scenario.PRECISIONS
    assert tuple(choices["optimizer"]) == scenario.OPTIMIZERS
    assert tuple(choices["checkpointing"]) == scenario.CHECKPOINTING
    assert tuple(choices["attention"]) == scenario.ATTENTION
    assert tuple(choices["offload"]) == tuple(scenario.OFFLOAD)
    assert tuple(choices["option"]) == tuple(scenario.OPTIONS)
    assert tuple(choices["zero"]) == (0, 1, 2, 3)


def test_bad_choice_is_one_error_line(capsys):
    rc, out, err = run(capsys, "estimate", "--model", "gpt2", "--precision", "fp64",
                       "--gpu", "nvidia-l4")
    msg = one_error_line(err)
    assert rc == 2 and "--precision" in msg and "'fp64'" in msg and "bf16-mixed" in msg
