"""Calibration JSON files: written atomically (never through a planted link), and every broken
file is one VramplanError naming the file and the problem (API and CLI)."""
import json
import os

import pytest

from vramplan.measure import calibration as C
from vramplan.measure.calibration import files as calibration_io, store as calibration_store
from vramplan.cli import main
from vramplan.errors import VramplanError

H100 = "nvidia-h100-sxm5-80gb"
OK_SAMPLE = {"scenario": {"model": "x"}, "estimate": {"device_used_bytes": 100},
             "measured": {"device_used_bytes": 110}, "ratios": {"device_used_bytes": 1.1}}


@pytest.fixture(autouse=True)
def _fresh_memory():
    calibration_store.forget_memory()
    yield
    calibration_store.forget_memory()


def old(sample=OK_SAMPLE, **entry):
    e = {"gpu": H100, "software": {"torch": "2.5.1"}, "samples": [sample], **entry}
    return {"version": 1, "entries": {f"{H100}|torch=2.5.1|cuda=None|driver=None": e}}


def test_save_never_writes_through_a_link_at_the_old_temp_name(tmp_path):
    """Was: save() wrote `<file>.tmp` with write_text, which follows a symlink planted there."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    target = tmp_path / "cal.json"
    (tmp_path / "cal.tmp").symlink_to(victim)
    C.save(old(), target)
    assert victim.read_text() == "precious"
    assert os.readlink(tmp_path / "cal.tmp") == str(victim)
    assert json.loads(target.read_text()) == old()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cal.json", "cal.tmp", "victim.txt"]


def test_export_never_writes_through_a_planted_link(tmp_path, monkeypatch):
    monkeypatch.setenv("VRAMPLAN_CALIBRATION", str(tmp_path / "cal.db"))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "share.json"
    for name in ("share.tmp", "share.json.tmp", ".share.json.tmp"):
        (tmp_path / name).symlink_to(victim)
    C.export(out)
    assert victim.read_text() == "precious"
    assert json.loads(out.read_text())["samples"] == []


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "cal.json"
    target.write_text('{"old": true}')

    def boom(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(calibration_io.os, "replace", boom)
    with pytest.raises(VramplanError, match=f"cannot write {target}: No space left on device"):
        calibration_io.write_atomic(target, {"new": True})
    assert target.read_text() == '{"old": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["cal.json"]


def test_write_keeps_the_replaced_files_permissions(tmp_path):
    target = tmp_path / "cal.json"
    target.write_text("{}")
    target.chmod(0o640)
    calibration_io.write_atomic(target, {"a": 1})
    assert target.stat().st_mode & 0o777 == 0o640


BAD = {
    "missing samples": (json.dumps({"version": 1, "entries": {"k": {"gpu": H100}}}),
                        "entry 'k': 'samples' is missing"),
    "missing ratios": (json.dumps(old({"scenario": None, "estimate": {}, "measured": {}})),
                       "sample 0: 'ratios' is missing"),
    "string ratio": (json.dumps(old({**OK_SAMPLE, "ratios": {"device_used_bytes": "1.04"}})),
                     "ratio 'device_used_bytes' is \"1.04\", not a positive number"),
    "zero ratio": (json.dumps(old({**OK_SAMPLE, "ratios": {"weights": 0}})),
                   "ratio 'weights' is 0, not a positive number"),
    "ratios a list": (json.dumps(old({**OK_SAMPLE, "ratios": [1.1]})),
                      "'ratios' is not an object"),
    "samples not a list": (json.dumps(old(samples={"a": 1})), "'samples' is not a list"),
    "entries a list": (json.dumps({"version": 1, "entries": []}), "'entries' is not an object"),
    "neither": (json.dumps({"version": 1}), "not a vramplan calibration"),
    "a list": ("[1, 2]", "not a vramplan calibration"),
    "binary": (b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x00", "not UTF-8 text"),
    "truncated": (json.dumps(old())[:60], "not JSON"),
    "not JSON": ("gpu = h100\nratio = 1.1\n", "not JSON"),
    "empty": ("  \n", "empty"),
    "NaN ratio": ('{"version": 1, "entries": {"k": {"gpu": "g", "samples": [{"ratios": '
                  '{"device_used_bytes": NaN}}]}}}', "NaN is not a number"),
    "too deep": ('{"version": 1, "entries": ' + "[" * 40 + "]" * 40 + "}", "nested more than"),
}


def _write(path, content):
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


@pytest.mark.parametrize("case", list(BAD))
def test_broken_calibration_file_is_one_clear_error(case, tmp_path, monkeypatch):
    """Was: KeyError ('samples', 'ratios'), TypeError (a string ratio), UnicodeDecodeError."""
    content, problem = BAD[case]
    f = tmp_path / "calibration.json"
    _write(f, content)
    monkeypatch.setenv("VRAMPLAN_CALIBRATION", str(f))
    for call in (lambda: C.factors(H100), lambda: C.apply({"gpu": {"id": H100}, "per_gpu": {}}),
                 lambda: C.load(), lambda: C.import_file(f, file=tmp_path / "db.sqlite")):
        with pytest.raises(VramplanError) as err:
            call()
        msg = str(err.value)
        assert msg.startswith(f"calibration file {f}: ") and problem in msg, msg
        assert "\n" not in msg


@pytest.mark.parametrize("case", ["missing samples", "string ratio", "binary", "truncated"])
def test_cli_import_of_a_broken_file_is_one_line_exit_2(case, tmp_path, capsys):
    f = tmp_path / "bad.json"
    _write(f, BAD[case][0])
    assert main(["calibration", "import", str(f), "--calibration", str(tmp_path / "c.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"vramplan: error: calibration file {f}:")


def test_cli_path_list_export_import(tmp_path, capsys, monkeypatch):
    db = tmp_path / "cal.db"
    monkeypatch.setenv("VRAMPLAN_CALIBRATION", str(db))
    src = tmp_path / "old.json"
    src.write_text(json.dumps(old()))
    assert main(["calibration", "import", str(src)]) == 0
    assert capsys.readouterr().out.strip() == f"{src}: added 1 samples (0 already there)"
    assert main(["calibration", "path"]) == 0
    assert capsys.readouterr().out.strip() == f"{db} (read-write, 1 samples)"
    assert main(["calibration", "list"]) == 0
    out = capsys.readouterr().out
    assert H100 in out and "2.5.1" in out and "1.100" in out
    dest = tmp_path / "out.json"
    assert main(["calibration", "export", str(dest)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 1 samples to {dest}"
    other = tmp_path / "other.db"
    assert main(["calibration", "import", str(dest), "--calibration", str(other)]) == 0
    assert main(["calibration", "import", str(dest), "--calibration", str(other)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{dest}: added 0 samples (1 already there)"


def test_cli_keeps_working_without_a_home(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("VRAMPLAN_CALIBRATION", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "nobody-home"))
    assert main(["calibration", "path"]) == 0
    out = capsys.readouterr().out
    assert "(memory, 0 samples)" in out and "note: home directory" in out
    assert main(["estimate", "--model", "gpt2", "--task", "forward", "--gpu", "nvidia-l4",
                 "--calibrate", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "not calibrated" in d["calibration_summary"] and "in memory" in d["calibration_summary"]
