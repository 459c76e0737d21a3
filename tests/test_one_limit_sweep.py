"""One memory limit for `sweep --gpus-needed` (issue 20.6): it keeps the scenario's
safety_margin, as the verdict, max batch and the advisor do; `--headroom` is that key under
another flag (read by the one reader, refused naming safety_margin), and the advisor's
`parse_headroom` is a view of the same reader with the same default (0)."""
import json

from cli_helpers import run
from vramplan.advisor import parse_headroom
from vramplan.sweep import gpus_needed

GiB = 2**30
PLAN = {"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": 1, "seq_len": 2048,
        "precision": "bf16-mixed", "gpu": "nvidia-h100-sxm5-80gb"}


def _row(rows, gid):
    return next(r for r in rows if r["gpu"] == gid)


def test_gpus_needed_keeps_the_scenarios_margin():
    """A margin of 60 GiB on an 80 GB H100 (79.65 GiB usable) leaves 19.65 GiB per GPU. The
    8B full training plan holds 8.03e9 x 16 B = 128.5 GB of weights, gradients and AdamW
    states, so it needs at least 128.5 GB / 21.1 GB = 7 GPUs (more than the 4 it needs with
    no margin), and every GPU of the answer stays within the smaller limit; the same margin
    given as `headroom` gives the same rows."""
    gid = "nvidia-h100-sxm5-80gb"
    none = _row(gpus_needed(PLAN, [gid]), gid)
    kept = _row(gpus_needed({**PLAN, "safety_margin": 60 * GiB}, [gid]), gid)
    assert none["gpus"] == 4 and kept["gpus"] >= 7
    assert kept["device_used_bytes"] <= kept["usable_bytes"] - 60 * GiB
    assert _row(gpus_needed(PLAN, [gid], headroom=60 * GiB), gid) == kept


def test_parse_headroom_is_the_safety_margin_reader():
    assert parse_headroom(None) == (0.0, 0)
    assert parse_headroom("5%") == (0.05, 0)
    assert parse_headroom("2 GiB") == (0.0, 2 * GiB)
    for bad in ("60%", "lots"):
        try:
            parse_headroom(bad)
        except Exception as exc:              # ScenarioError naming the key
            assert "safety_margin" in str(exc)
        else:
            raise AssertionError(bad)


def test_cli_sweep_gpus_needed_headroom_is_safety_margin(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(PLAN))
    args = ("sweep", "--scenario", str(f), "--gpus-needed", "--vary",
            "gpu=nvidia-h100-sxm5-80gb", "--format", "json")
    rc_a, out_a, err_a = run(capsys, *args, "--headroom", "60 GiB")
    g = tmp_path / "kept.json"                 # the margin as the plan's own key
    g.write_text(json.dumps({**PLAN, "safety_margin": "60 GiB"}))
    rc_b, out_b, err_b = run(capsys, "sweep", "--scenario", str(g), *args[3:])
    assert rc_a == 0 and rc_b == 0, err_a + err_b
    assert json.loads(out_a) == json.loads(out_b)
    rc, _out, err = run(capsys, *args, "--headroom", "60%")
    assert rc == 2 and "safety_margin" in err
    assert err.count("\n") == 1
