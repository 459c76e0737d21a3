"""What the CLI tests share: `run` calls `vramplan` in-process and returns (status, stdout,
stderr); the `clean_hwdb` fixture gives each test the built-in hardware database only (no
VRAMPLAN_HWDB in the environment, no extra file set), restored after."""
import pytest

from vramplan import hardware
from vramplan.cli import main


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def clean_hwdb(monkeypatch):
    monkeypatch.delenv(hardware.ENV_VAR, raising=False)
    hardware.set_extra_path(None)
    yield
    hardware.set_extra_path(None)
