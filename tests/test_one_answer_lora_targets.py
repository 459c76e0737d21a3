"""Issue 19.1: LoRA target names that adapt no module are refused by the scenario validation,
so `estimate()`, the form and every command refuse them with the same message (naming
`lora.targets` and the valid names); before, only `vramplan estimate` checked, and the library,
the page, advise, sweep and report estimated a plan without those adapters."""
import pytest

from vramplan.cli import main
from vramplan.errors import ScenarioError
from vramplan.estimate import estimate
from vramplan.scenario import Scenario, form

LLAMA = "meta-llama/Llama-3.1-8B"
SDXL = "stabilityai/stable-diffusion-xl-base-1.0"
GPU = "nvidia-a100-sxm4-80gb"
TYPO = {"model": LLAMA, "task": "lora", "lora": {"targets": ["q_proj", "qproj_typo"]},
        "gpu": GPU}


def test_library_refuses_naming_key_and_valid_names():
    with pytest.raises(ScenarioError) as exc:
        Scenario.from_dict(TYPO)
    msg = str(exc.value)
    assert exc.value.key == "lora.targets"
    assert "'qproj_typo' is not a module name of " + LLAMA in msg
    for name in ("q_proj", "v_proj", "o_proj", "down_proj", "all-linear"):
        assert name in msg
    with pytest.raises(ScenarioError, match="lora.targets"):
        estimate(TYPO)


def test_valid_names_still_accepted_case_insensitively():
    sc = Scenario.from_dict({**TYPO, "lora": {"targets": ["Q_PROJ", "v_proj", "all"]}})
    assert sc.lora.targets == ("Q_PROJ", "v_proj", "all")
    assert Scenario.from_dict({"model": LLAMA, "task": "qlora"}).lora.targets == \
        ("q_proj", "v_proj")


def test_diffusion_names():
    with pytest.raises(ScenarioError) as exc:
        Scenario.from_dict({"model": SDXL, "task": "lora", "lora": {"targets": ["to_q", "x"]}})
    assert exc.value.key == "lora.targets" and "to_out.0" in str(exc.value)


def test_replace_refuses_too():
    sc = Scenario.from_dict({**TYPO, "lora": {"targets": ["q_proj"]}})
    with pytest.raises(ScenarioError, match="qproj_typo"):
        sc.replace(lora={"targets": ["qproj_typo"]})


def test_form_check_names_the_key():
    errors = form.check(TYPO)
    assert "qproj_typo" in errors["lora.targets"]


@pytest.mark.parametrize("command", ["estimate", "advise", "sweep", "report"])
def test_every_command_refuses(command, tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text('{"model": "%s", "task": "lora", "lora": {"targets": ["qproj_typo"]}, '
                 '"gpu": "%s"}' % (LLAMA, GPU))
    argv = [command, "--scenario", str(f)]
    if command == "report":
        argv += ["-o", str(tmp_path / "r.md")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "lora.targets" in err and "'qproj_typo'" in err
