"""Every `vramplan ...` line of the README's shell blocks runs as pasted from the repository
root: exit 0; the lines that need an NVIDIA GPU (probe, monitor, measure) either work (a GPU
is here) or end with the one-line "no GPU" error and status 2."""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VRAMPLAN = Path(sys.executable).with_name("vramplan")
NEEDS_GPU = ("probe", "monitor", "measure")


def readme_commands() -> list[str]:
    """The `vramplan` command lines of the ```bash blocks, continuation lines joined."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "vramplan":
                out.append(line)
    return out


COMMANDS = readme_commands()


def test_readme_has_the_cli_lines():
    assert len(COMMANDS) >= 10
    assert {shlex.split(c, comments=True)[1] for c in COMMANDS} >= {
        "gpus", "gpu", "estimate", "trace", *NEEDS_GPU}


@pytest.mark.parametrize("line", COMMANDS, ids=[c.split("#")[0].strip()[:60] for c in COMMANDS])
def test_readme_line_runs(line):
    words = shlex.split(line, comments=True)
    assert VRAMPLAN.exists(), "run `make venv` first"
    r = subprocess.run([str(VRAMPLAN), *words[1:]], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    assert "Traceback" not in r.stderr
    if words[1] in NEEDS_GPU and r.returncode != 0:
        err = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(err) == 1, r.stderr
        assert err[0].startswith("vramplan: error: ") and re.search(
            r"no NVIDIA driver|no CUDA device|no GPU", err[0]), err[0]
    else:
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip()


def test_readme_names_only_files_that_exist():
    for line in COMMANDS:
        for w in shlex.split(line, comments=True):
            if w.startswith("examples/"):
                assert (ROOT / w).is_file(), w
