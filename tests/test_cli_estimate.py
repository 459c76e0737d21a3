import json

from vramplan.cli import main


def test_flags_json(capsys):
    rc = main(["estimate", "--model", "bert-base-uncased", "--task", "forward", "--batch-size",
               "8", "--seq-len", "128", "--precision", "fp32", "--gpu", "nvidia-a100-sxm4-80gb",
               "--format", "json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    # bert-base-uncased has 109,482,240 parameters (HF model card), 4 bytes each in fp32
    assert d["per_gpu"]["components"]["weights"] == 4 * 109_482_240


def test_table(capsys):
    assert main(["estimate", "--model", "bert-base-uncased", "--task", "forward",
                 "--gpu", "nvidia-a100-sxm4-80gb"]) == 0
    assert "device used" in capsys.readouterr().out


def test_jsonl_with_bad_lines(tmp_path, capsys):
    """A rejected scenario gives {"error": ...} in its place; the run still ends with status 2
    (a script must be able to tell). A line that is not JSON at all is reported naming its
    line, in place or for the whole file (vramplan.scenario.load_scenarios decides)."""
    f = tmp_path / "s.jsonl"
    good = {"model": "bert-base-uncased", "task": "forward", "gpu": "nvidia-a100-sxm4-80gb"}
    f.write_text(json.dumps(good) + "\n" + json.dumps({**good, "task": "nope"}) + "\n"
                 + json.dumps(good) + "\n")
    assert main(["estimate", "--scenario", str(f), "--format", "json"]) == 2
    out, err = capsys.readouterr()
    lines = [json.loads(x) for x in out.splitlines()]
    assert len(lines) == 3
    assert "per_gpu" in lines[0] and "error" in lines[1] and "per_gpu" in lines[2]
    assert "scenario 2" in err and "Traceback" not in err

    f.write_text(json.dumps(good) + "\n{not json\n" + json.dumps(good) + "\n")
    assert main(["estimate", "--scenario", str(f), "--format", "json"]) == 2
    out, err = capsys.readouterr()
    assert "line 2" in (err + out) and "Traceback" not in err


def test_errors_exit_2(tmp_path, capsys):
    assert main(["estimate", "--scenario", str(tmp_path / "missing.json")]) == 2
    assert main(["estimate", "--model", "no-such-model", "--gpu", "nvidia-a100-sxm4-80gb"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "vramplan: error:" in err


# --- flags for the non-transformer families, inline architectures and calibration ----------

def _run_json(capsys, *argv):
    from vramplan.cli import main
    rc = main(["estimate", *argv, "--format", "json"])
    out = capsys.readouterr()
    return rc, out


def test_resolution_steps_and_guidance_flags_reach_the_scenario(capsys):
    import json
    rc, out = _run_json(capsys, "--model", "stabilityai/stable-diffusion-xl-base-1.0",
                        "--task", "denoise", "--resolution", "768x1024", "--steps", "20",
                        "--no-guidance", "--gpu", "nvidia-l4")
    assert rc == 0, out.err
    sc = json.loads(out.out)["scenario"]
    assert sc["resolution"] == [768, 1024] and sc["steps"] == 20 and sc["guidance"] is False


def test_bad_resolution_text_names_the_flag(capsys):
    from vramplan.cli import main
    rc = main(["estimate", "--model", "torchvision/resnet50", "--resolution", "12xab",
               "--gpu", "nvidia-l4"])
    err = capsys.readouterr().err
    assert rc == 2 and "--resolution" in err and "Traceback" not in err


def test_inline_architecture_size_only(capsys):
    import json
    rc, out = _run_json(capsys, "--architecture", '{"params": 7e9}', "--task", "forward",
                        "--precision", "bf16", "--gpu", "nvidia-a100-sxm4-80gb")
    assert rc == 0, out.err
    w = json.loads(out.out)["per_gpu"]["components"]["weights"]
    assert abs(w - 14e9) / 14e9 < 0.03          # 7e9 params x 2 bytes, within the size rule


def test_modelless_task_needs_no_model(capsys):
    import json
    rc, out = _run_json(capsys, "--task", "render", "--resolution", "3840x2160",
                        "--gpu", "nvidia-rtx-4090")
    assert rc == 0, out.err
    # nvidia-smi shows 24,564 MiB total on an RTX 4090 (the database's usable_memory)
    assert json.loads(out.out)["gpu"]["usable_memory_bytes"] == 24_564 * 2**20


def test_calibrate_applies_recorded_ratios(capsys, tmp_path, monkeypatch):
    import json
    from vramplan.measure import calibration
    from vramplan.estimate import estimate
    monkeypatch.setenv("VRAMPLAN_CALIBRATION", str(tmp_path / "cal.json"))
    plan = {"model": "gpt2", "task": "forward", "gpu": "nvidia-l4"}
    e = estimate(plan).to_dict()
    measured = {"per_gpu": {k: int(e["per_gpu"][k] * 1.10) for k in calibration.PEAKS}}
    calibration.record(e, measured, software={"torch": "2.5.1", "cuda": "12.4", "driver": "550"})
    rc, out = _run_json(capsys, "--model", "gpt2", "--task", "forward", "--gpu", "nvidia-l4",
                        "--calibrate")
    assert rc == 0, out.err
    d = json.loads(out.out)
    used = d["per_gpu"]["device_used_bytes"]
    assert abs(used - e["per_gpu"]["device_used_bytes"] * 1.10) <= 2
    assert "calibrated" in d["calibration_summary"] and "measured" in d["calibration_summary"]


def test_table_says_no_limit_for_a_null_max_batch_and_names_the_roof(capsys):
    """`load` holds no batch-dependent memory: the estimate's max_batch_size is null (no search
    cap printed) and the table says why; the time line names both floors and the bound."""
    assert main(["estimate", "--model", "gpt2", "--task", "load", "--gpu",
                 "nvidia-h100-sxm5-80gb", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_batch_size"] is None
    assert main(["estimate", "--model", "gpt2", "--task", "load", "--gpu",
                 "nvidia-h100-sxm5-80gb"]) == 0
    out = capsys.readouterr().out
    assert "max batch size: no limit (memory does not grow with the batch)" in out
    assert "None" not in out
    assert main(["estimate", "--model", "gpt2", "--task", "train", "--gpu",
                 "nvidia-h100-sxm5-80gb", "--format", "json"]) == 0
    bw = json.loads(capsys.readouterr().out)["bandwidth"]
    assert main(["estimate", "--model", "gpt2", "--task", "train", "--gpu",
                 "nvidia-h100-sxm5-80gb"]) == 0
    out = capsys.readouterr().out
    floor = max(bw["memory_floor_s"], bw["compute_floor_s"])       # the higher roof
    assert bw["min_step_time_s"] == floor
    from vramplan.report.text import seconds       # the report's time format, one for all
    assert (f"time per step >= {seconds(floor)} ({bw['bound']}-bound: memory "
            f"{seconds(bw['memory_floor_s'])}, compute {seconds(bw['compute_floor_s'])})"
            in out)
    assert "(memory-bound)" not in out or bw["bound"] == "memory"


def test_the_text_names_model_task_and_gpu_first(capsys):
    """Before: the text began 'GPU: NVIDIA H100 SXM5 80GB (80.0 GiB)   peak phase:
    optimizer-step' and named neither the model nor the task; components were raw keys."""
    from vramplan.cli import main as cli_main
    assert cli_main(["estimate", "--model", "meta-llama/Llama-3.1-8B", "--task", "train",
                     "--gpus", "8", "--zero", "3", "--gpu", "nvidia-h100-sxm5-80gb"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("meta-llama/Llama-3.1-8B · train on 8 x NVIDIA H100 SXM5 80GB "
                        "(80.00 GiB each)")
    assert lines[1].startswith("Fits on NVIDIA H100 SXM5 80GB: ")          # the report's words
    assert lines[2].startswith("peak phase: ") and "-" not in lines[2]   # vocab's name
    assert any(x.startswith("  Optimizer states ") for x in lines)       # vocab's names


def test_the_text_gives_bytes_moved_in_gib(capsys):
    """Before: 'bytes per step 7.66 GB' (decimal); memory and bytes moved are GiB everywhere
    (units.format_size), bandwidth GB/s."""
    from vramplan.cli import main as cli_main
    from vramplan.estimate import estimate
    from vramplan.units import format_size
    assert cli_main(["estimate", "--model", "gpt2", "--task", "train", "--gpu",
                     "nvidia-rtx-4090"]) == 0
    out = capsys.readouterr().out
    e = estimate({"model": "gpt2", "task": "train", "gpu": "nvidia-rtx-4090"})
    assert f"bytes per step {format_size(e.bandwidth['bytes_per_step'])}" in out
    assert format_size(e.bandwidth["bytes_per_step"]).endswith(" GiB")
