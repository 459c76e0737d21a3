import json

from vramplan.cli import main


def test_flags_json(capsys):
    rc = main(["estimate", "--model", "bert-base-uncased", "--task", "forward", "--batch-size",
               "8", "--seq-len", "128", "--precision", "fp32", "--gpu", "nvidia-a100-sxm4-80gb",
               "--format", "json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["per_gpu"]["peak_allocated_bytes"] > 0


def test_table(capsys):
    assert main(["estimate", "--model", "bert-base-uncased", "--task", "forward",
                 "--gpu", "nvidia-a100-sxm4-80gb"]) == 0
    assert "device used" in capsys.readouterr().out


def test_jsonl_with_bad_lines(tmp_path, capsys):
    f = tmp_path / "s.jsonl"
    good = {"model": "bert-base-uncased", "task": "forward", "gpu": "nvidia-a100-sxm4-80gb"}
    f.write_text(json.dumps(good) + "\n{not json\n" + json.dumps({**good, "task": "nope"})
                 + "\n" + json.dumps(good) + "\n")
    assert main(["estimate", "--scenario", str(f)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 4
    assert "per_gpu" in lines[0] and "error" in lines[1] and "error" in lines[2]
    assert "per_gpu" in lines[3]


def test_errors_exit_2(tmp_path, capsys):
    assert main(["estimate", "--scenario", str(tmp_path / "missing.json")]) == 2
    assert main(["estimate", "--model", "no-such-model", "--gpu", "nvidia-a100-sxm4-80gb"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "vramplan: error:" in err
