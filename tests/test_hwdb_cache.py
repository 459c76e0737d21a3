"""The hwdb parse cache (vramplan/hardware/toml_cache.py): a hit gives what tomllib gives, an
edit misses, a corrupt entry is ignored and rewritten, an unusable folder falls back to
parsing silently, and the database loads the same through the cache as without it."""
import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest

from vramplan.errors import HwdbError
from vramplan.hardware import builtin_path, load_hwdb, toml_cache

DC = "devices/nvidia-datacenter.toml"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(toml_cache.ENV, str(folder))
    return folder


@pytest.fixture
def hwdb(tmp_path) -> Path:
    dst = tmp_path / "hwdb"
    shutil.copytree(Path(str(builtin_path())), dst)
    return dst


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def load_file(path: Path) -> dict:
    data = path.read_bytes()
    return toml_cache.loads(data, data.decode("utf-8-sig"))


def test_hit_equals_tomllib(cache, hwdb):
    f = hwdb / DC
    expected = tomllib.loads(f.read_text(encoding="utf-8"))
    cold = load_file(f)
    assert cold == expected
    (entry,) = entries(cache)               # one file parsed -> one entry, named by its key
    assert entry.name == toml_cache.key(f.read_bytes()) + ".json"
    warm = load_file(f)
    assert warm == expected and warm is not cold
    assert json.loads(entry.read_text())["data"] == expected


def test_hit_does_not_parse(cache, hwdb, monkeypatch):
    f = hwdb / DC
    load_file(f)

    def no_parse(text):
        raise AssertionError("parsed although cached")
    monkeypatch.setattr(toml_cache.tomllib, "loads", no_parse)
    assert load_file(f)["device"][0]["id"]


def test_edit_misses(cache, hwdb):
    f = hwdb / DC
    load_file(f)
    text = f.read_text()
    assert "tdp_w = 70\n" in text           # the T4's TDP, 70 W
    f.write_text(text.replace("tdp_w = 70\n", "tdp_w = 71\n", 1))
    got = load_file(f)
    t4 = next(d for d in got["device"] if d["id"] == "nvidia-t4")
    assert t4["tdp_w"] == 71
    assert len(entries(cache)) == 2         # the old entry and the edited file's


def test_version_in_key(monkeypatch):
    before = toml_cache.key(b"a = 1\n")
    monkeypatch.setattr(toml_cache, "__version__", "99.0.0")
    assert toml_cache.key(b"a = 1\n") != before


@pytest.mark.parametrize("junk", ["{not json", "[1, 2]", '{"format": 1, "key": "x", "data": {}}',
                                  ""])
def test_corrupt_entry_ignored_and_rewritten(cache, hwdb, junk):
    f = hwdb / DC
    expected = tomllib.loads(f.read_text(encoding="utf-8"))
    load_file(f)
    (entry,) = entries(cache)
    entry.write_text(junk)
    assert load_file(f) == expected
    assert json.loads(entry.read_text())["data"] == expected


def test_unwritable_folder_falls_back(tmp_path, hwdb, monkeypatch):
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    monkeypatch.setenv(toml_cache.ENV, str(folder))
    try:
        f = hwdb / DC
        assert load_file(f) == tomllib.loads(f.read_text(encoding="utf-8"))
        assert len(load_hwdb(hwdb, extra_paths=[])) >= 60
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o700)


def test_write_refused_falls_back(cache, hwdb, monkeypatch):
    """A folder that refuses the write (a read-only file system: EROFS; root passes the
    permission test above): the file is parsed, nothing is left behind, no error."""
    def refuse(*args, **kwargs):
        raise OSError(30, "Read-only file system")
    monkeypatch.setattr(toml_cache.tempfile, "mkstemp", refuse)
    f = hwdb / DC
    assert load_file(f) == tomllib.loads(f.read_text(encoding="utf-8"))
    assert len(load_hwdb(hwdb, extra_paths=[])) >= 60
    assert list(cache.iterdir()) == []


def test_replace_refused_leaves_no_temp(cache, hwdb, monkeypatch):
    def refuse(src, dst):
        raise OSError(13, "Permission denied")
    monkeypatch.setattr(toml_cache.os, "replace", refuse)
    f = hwdb / DC
    assert load_file(f) == tomllib.loads(f.read_text(encoding="utf-8"))
    assert list(cache.iterdir()) == []


def test_missing_home_falls_back(hwdb, monkeypatch):
    monkeypatch.delenv(toml_cache.ENV)
    monkeypatch.delenv("VRAMPLAN_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home():
        raise RuntimeError("Could not determine home directory.")
    monkeypatch.setattr(toml_cache.Path, "home", staticmethod(no_home))
    assert toml_cache.cache_dir() is None
    f = hwdb / DC
    assert load_file(f) == tomllib.loads(f.read_text(encoding="utf-8"))


def test_folder_is_a_file_falls_back(tmp_path, hwdb, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv(toml_cache.ENV, str(blocker / "sub"))
    assert toml_cache.cache_dir() is None
    assert len(load_hwdb(hwdb, extra_paths=[])) >= 60


def test_off(tmp_path, monkeypatch):
    monkeypatch.setenv(toml_cache.ENV, "off")
    assert toml_cache.cache_dir() is None


def test_default_folder_under_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv(toml_cache.ENV)
    monkeypatch.delenv("VRAMPLAN_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert toml_cache.cache_dir() == tmp_path / "vramplan" / "hwdb"


def test_session_cache_is_not_home():
    """conftest.py points the session's cache at a temporary folder."""
    folder = toml_cache.cache_dir()
    assert folder is None or Path.home() / ".cache" not in folder.parents


def test_dates_not_cached(cache, tmp_path):
    f = tmp_path / "d.toml"
    f.write_text("when = 2025-01-02\n")
    assert load_file(f) == tomllib.loads(f.read_text())
    assert entries(cache) == []


def test_db_same_through_cache(cache, hwdb):
    cold = load_hwdb(hwdb, extra_paths=[])
    n = len(entries(cache))
    assert n >= 12                          # every file of the built-in database cached
    warm = load_hwdb(hwdb, extra_paths=[])
    assert [d for d in warm] == [d for d in cold]
    assert len(entries(cache)) == n


def test_validation_runs_on_a_hit(cache, hwdb):
    """A cached file still goes through validation: an edit that breaks a field is refused
    with the file, device and field named (the edited file misses; the error is the same
    whether the entry was warm or cold)."""
    text = (hwdb / DC).read_text()
    (hwdb / DC).write_text(text.replace("tdp_w = 70\n", 'tdp_w = "70 W"\n', 1))
    for _ in range(2):                      # cold, then warm
        with pytest.raises(HwdbError) as e:
            load_hwdb(hwdb, extra_paths=[])
        msg = str(e.value)
        assert DC in msg and "nvidia-t4" in msg and "tdp_w" in msg and "must be int" in msg
