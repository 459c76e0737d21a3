"""`--model 70B` on the command line means what '70B' means in the page's model box: a
size-only decoder of that many parameters (catalog.size_only, issue 19 'size-only "70B"
parsed only in ui/text.py'); every command reads the plan flags in commands/_plan.py."""
import json

from cli_helpers import run
from vramplan.estimate import estimate
from vramplan.scenario import Scenario


def test_size_alone_is_a_size_only_decoder(capsys):
    rc, out, err = run(capsys, "estimate", "--model", "70B", "--task", "train",
                       "--gpu", "nvidia-h100-sxm5-80gb", "--format", "json")
    assert rc == 0, err
    got = json.loads(out)
    # the same plan as the library's architecture {"params": 7e10}
    want = estimate(Scenario.from_dict({"architecture": {"params": 7e10}, "task": "train",
                                        "gpu": "nvidia-h100-sxm5-80gb"}))
    assert got["scenario"]["architecture"] == {"params": 7e10}
    assert "model" not in got["scenario"]
    assert got["per_gpu"] == want.to_dict()["per_gpu"]
    rc, text, err = run(capsys, "estimate", "--model", "350M", "--gpu", "nvidia-rtx-4090")
    assert rc == 0, err
    assert text.startswith("size-only decoder of 350M parameters")


def test_size_beside_architecture_is_refused_naming_both(capsys):
    rc, _, err = run(capsys, "estimate", "--model", "7b", "--architecture", '{"params": 1e9}',
                     "--gpu", "nvidia-rtx-4090")
    assert rc != 0 and "give either 'model' or 'architecture'" in err


def test_a_mistyped_id_still_names_the_model(capsys):
    rc, _, err = run(capsys, "estimate", "--model", "70Bx", "--gpu", "nvidia-h100-sxm5-80gb")
    assert rc != 0 and "scenario key 'model'" in err and "'70Bx'" in err
