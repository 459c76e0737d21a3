"""The calibration database: one SQLite row per sample, concurrent writers lose nothing, the old
JSON file still opens (and is migrated once), an unwritable home leaves it working in memory."""
import json
import multiprocessing
import os
import sqlite3

import pytest

from vramplan.measure import calibration as C
from vramplan.measure.calibration import store as calibration_store
from vramplan.errors import VramplanError

GiB = 2 ** 30
H100 = "nvidia-h100-sxm5-80gb"
SOFT = {"torch": "2.5.1", "cuda": "12.4", "driver": "550.54"}


def est(used=40.0):
    return {"scenario": {"model": "x", "batch_size": 4}, "gpu": {"id": H100},
            "per_gpu": {"components": {"weights": 16 * GiB, "activations": 16 * GiB,
                                       "cuda_context": 2 * GiB, "allocator_slack": 2 * GiB},
                        "peak_allocated_bytes": 32 * GiB, "peak_reserved_bytes": 34 * GiB,
                        "device_used_bytes": int(used * GiB)},
            "fits": True, "headroom_bytes": int((79.6 - used) * GiB)}


def meas(used=44.0):
    return {"gpu": {"id": H100}, "measure": dict(SOFT),
            "per_gpu": {"peak_allocated_bytes": 32 * GiB, "peak_reserved_bytes": 34 * GiB,
                        "device_used_bytes": int(used * GiB)}}


@pytest.fixture(autouse=True)
def _fresh_memory():
    calibration_store.forget_memory()
    yield
    calibration_store.forget_memory()


@pytest.fixture
def db(tmp_path, monkeypatch):
    f = tmp_path / "cal.db"
    monkeypatch.setenv("VRAMPLAN_CALIBRATION", str(f))
    return f


def test_one_row_per_sample_with_versions_time_scenario_and_bytes(db):
    C.record(est(), meas())
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.row_factory = sqlite3.Row
    rows = con.execute("SELECT * FROM samples").fetchall()
    assert len(rows) == 1
    r = rows[0]
    assert (r["gpu_id"], r["torch_version"], r["cuda_version"], r["driver_version"]) == (
        H100, "2.5.1", "12.4", "550.54")
    assert r["recorded_at"].endswith("+00:00") and r["host"]
    assert json.loads(r["scenario_json"]) == {"model": "x", "batch_size": 4}
    assert r["estimate_device_used_bytes"] == 40 * GiB
    assert r["measured_device_used_bytes"] == 44 * GiB
    assert json.loads(r["ratios_json"])["device_used_bytes"] == pytest.approx(1.1)


def test_numbers_are_the_json_files_numbers(db):
    # 44 / 40 = 1.1 and 42 / 40 = 1.05: median of two = 1.075 -> 40 GiB * 1.075 = 43 GiB
    C.record(est(), meas(44.0))
    C.record(est(), meas(42.0))
    assert C.factors(H100, SOFT)["device_used_bytes"] == pytest.approx(1.075)
    out = C.apply(est())
    assert out["per_gpu"]["device_used_bytes"] == int(round(40 * GiB * 1.075))
    assert out["headroom_bytes"] == pytest.approx((79.6 - 43.0) * GiB, abs=2)   # 79.6 usable
    assert C.describe(est()) == "estimate 40.00 GiB, measured 42.00 GiB on this GPU, calibrated 43.00 GiB"
    old = C.load()
    k = C.key(H100, SOFT)
    assert list(old["entries"]) == [k] and len(old["entries"][k]["samples"]) == 2


def _writer(path, n, start):
    os.environ["VRAMPLAN_CALIBRATION"] = path
    from vramplan.measure import calibration
    for i in range(n):
        calibration.record(est(), meas(40.0 + (start + i) / 100))


def test_four_concurrent_writers_keep_all_40_samples(tmp_path):
    """Was: the JSON file rewritten in place through one fixed .tmp name kept 26 of 40, and 2
    writers crashed (FileNotFoundError on the rename)."""
    path = str(tmp_path / "shared.db")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, 10, 10 * w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    got = C.samples(file=path)
    assert len(got) == 40
    used = sorted(s["measured"]["device_used_bytes"] for s in got)
    assert used == sorted(int((40.0 + i / 100) * GiB) for i in range(40))
    assert len({s["uid"] for s in got}) == 40


OLD = {"version": 1, "entries": {
    f"{H100}|torch=2.5.1|cuda=12.4|driver=550.54": {
        "gpu": H100, "software": SOFT,
        "samples": [{"scenario": {"model": "x", "batch_size": 4},
                     "estimate": {"device_used_bytes": 40 * GiB},
                     "measured": {"device_used_bytes": 44 * GiB},
                     "ratios": {"device_used_bytes": 1.1}},
                    {"scenario": {"model": "y"}, "estimate": {}, "measured": {},
                     "ratios": {"device_used_bytes": 1.05}}]}}}


def test_old_json_named_by_the_env_var_still_opens_read_only(tmp_path, monkeypatch):
    f = tmp_path / "calibration.json"
    f.write_text(json.dumps(OLD))
    monkeypatch.setenv("VRAMPLAN_CALIBRATION", str(f))
    assert C.factors(H100, SOFT) == {"device_used_bytes": pytest.approx(1.075)}
    assert C.apply(est())["per_gpu"]["device_used_bytes"] == int(round(40 * GiB * 1.075))
    assert "measured 44.00 GiB" in C.describe(est())
    st = C.status()
    assert st["mode"] == "read-only" and st["samples"] == 2 and "import" in st["notice"]
    with pytest.raises(VramplanError, match=f"calibration file {f} is JSON.*calibration import"):
        C.record(est(), meas())
    assert json.loads(f.read_text()) == OLD


def test_old_default_json_is_migrated_once(tmp_path, monkeypatch):
    monkeypatch.delenv("VRAMPLAN_CALIBRATION", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    d = tmp_path / ".config" / "vramplan"
    d.mkdir(parents=True)
    (d / "calibration.json").write_text(json.dumps(OLD))
    assert C.factors(H100)["device_used_bytes"] == pytest.approx(1.075)   # read before any write
    assert not (d / "calibration.db").exists()
    C.record(est(), meas(46.0))                 # creates the database: the 2 old + 1 new
    C.record(est(), meas(46.0))                 # the old file is not imported again
    assert len(C.samples()) == 4
    assert C.factors(H100)["device_used_bytes"] == pytest.approx((1.1 + 1.15) / 2)
    assert json.loads((d / "calibration.json").read_text()) == OLD


def test_export_import_round_trip_adds_each_sample_once(db, tmp_path):
    C.record(est(), meas(44.0))
    C.record(est(), meas(42.0), software={"torch": "2.6.0", "cuda": "12.6", "driver": "560.35"})
    out = tmp_path / "share" / "cal.json"
    assert C.export(out) == 2
    doc = json.loads(out.read_text())
    assert doc["format"] == "vramplan-calibration" and doc["version"] == 2
    assert [s["software"]["torch"] for s in doc["samples"]] == ["2.5.1", "2.6.0"]
    other = tmp_path / "other.db"
    assert C.import_file(out, file=other) == (2, 0)
    assert C.import_file(out, file=other) == (0, 2)
    assert C.factors(H100, file=other) == C.factors(H100)
    assert C.export(tmp_path / "a100.json", gpu_id="nvidia-a100-sxm4-80gb") == 0


def test_import_of_the_old_format(db, tmp_path):
    f = tmp_path / "old.json"
    f.write_text(json.dumps(OLD))
    assert C.import_file(f) == (2, 0)
    assert C.import_file(f) == (0, 2)
    assert C.factors(H100, SOFT)["device_used_bytes"] == pytest.approx(1.075)


def test_missing_home_keeps_calibration_in_memory_and_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("VRAMPLAN_CALIBRATION", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "gone"))
    assert C.apply(est())["calibration"] is None
    C.record(est(), meas(44.0))
    assert C.factors(H100)["device_used_bytes"] == pytest.approx(1.1)
    st = C.status()
    assert st["mode"] == "memory" and st["samples"] == 1
    assert "does not exist" in st["notice"] and "in memory" in st["notice"]
    assert "in memory" in C.describe(est())
    assert not (tmp_path / "gone").exists()


def test_unwritable_config_folder_keeps_calibration_in_memory(tmp_path, monkeypatch):
    monkeypatch.delenv("VRAMPLAN_CALIBRATION", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".config").write_text("a file where the folder should be")
    C.record(est(), meas(44.0))
    st = C.status()
    assert st["mode"] == "memory" and "cannot create the calibration database" in st["notice"]
    assert C.factors(H100)["device_used_bytes"] == pytest.approx(1.1)


def test_read_only_database_is_read_and_new_samples_stay_in_memory(db, monkeypatch):
    C.record(est(), meas(44.0))
    real = calibration_store._connect

    def read_only(path, mode):
        con = real(path, "ro")
        if mode != "ro":
            con.execute("PRAGMA query_only = ON")   # what a read-only file or folder does
        return con
    monkeypatch.setattr(calibration_store, "_connect", read_only)
    calibration_store.forget_memory()
    assert C.factors(H100)["device_used_bytes"] == pytest.approx(1.1)
    C.record(est(), meas(42.0))
    st = C.status()
    assert st["mode"] == "read-only" and "not writable" in st["notice"] and st["samples"] == 2
    monkeypatch.setattr(calibration_store, "_connect", real)
    calibration_store.forget_memory()
    assert C.status()["samples"] == 1          # the file itself was not touched


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_folder_for_real(tmp_path, monkeypatch):
    d = tmp_path / "ro"
    d.mkdir()
    f = d / "cal.db"
    C.record(est(), meas(44.0), file=f)
    d.chmod(0o500)
    f.chmod(0o400)
    try:
        calibration_store.forget_memory()
        C.record(est(), meas(42.0), file=f)
        assert C.status(f)["mode"] == "read-only"
        assert len(C.samples(file=f)) == 2
    finally:
        d.chmod(0o700)


def test_corrupt_database_is_one_clear_error(tmp_path):
    f = tmp_path / "cal.db"
    f.write_bytes(calibration_store.SQLITE_MAGIC + b"\x07" * 200)
    with pytest.raises(VramplanError, match=f"calibration database {f}: "):
        C.factors(H100, file=f)


def test_newer_schema_is_refused(db):
    C.record(est(), meas())
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(VramplanError, match="schema version 99, newer than this vramplan"):
        C.factors(H100)
