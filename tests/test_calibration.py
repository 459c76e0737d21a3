"""calibration: ratios stored per GPU + software, applied and described."""
import pytest

from vramplan.measure import calibration as C

GiB = 2 ** 30


def est(used=41.2, alloc=36.0, res=38.0):
    return {"scenario": {"model": "x", "batch_size": 4}, "gpu": {"id": "nvidia-h100-sxm5-80gb"},
            "per_gpu": {"components": {"weights": int(alloc * GiB / 2), "activations": int(alloc * GiB / 2),
                                       "cuda_context": int((used - res) * GiB),
                                       "allocator_slack": int((res - alloc) * GiB)},
                        "peak_allocated_bytes": int(alloc * GiB), "peak_reserved_bytes": int(res * GiB),
                        "device_used_bytes": int(used * GiB)},
            "fits": True, "headroom_bytes": int((79.6 - used) * GiB)}


def meas(used=43.0, alloc=37.0, res=40.0):
    return {"gpu": {"id": "nvidia-h100-sxm5-80gb"},
            "per_gpu": {"components": {"weights": int(alloc * GiB / 2), "activations": int(alloc * GiB / 2)},
                        "peak_allocated_bytes": int(alloc * GiB), "peak_reserved_bytes": int(res * GiB),
                        "device_used_bytes": int(used * GiB)},
            "measure": {"torch": "2.5.1", "cuda": "12.4", "driver": "550.54"}}


@pytest.fixture
def calfile(tmp_path, monkeypatch):
    f = tmp_path / "cal.json"
    monkeypatch.setenv("VRAMPLAN_CALIBRATION", str(f))
    return f


def test_default_path_and_env(calfile, monkeypatch):
    assert C.path() == calfile
    monkeypatch.delenv("VRAMPLAN_CALIBRATION")
    assert str(C.path()).endswith(".config/vramplan/calibration.db")


def test_uncalibrated_is_unchanged(calfile):
    e = est()
    out = C.apply(e)
    assert out["calibration"] is None and out["per_gpu"] == e["per_gpu"]
    assert "not calibrated" in C.describe(e)


def test_record_apply_describe(calfile):
    C.record(est(), meas())
    assert calfile.exists()
    f = C.factors("nvidia-h100-sxm5-80gb", {"torch": "2.5.1", "cuda": "12.4", "driver": "550.54"})
    assert f["device_used_bytes"] == pytest.approx(43.0 / 41.2)
    out = C.apply(est())
    pg = out["per_gpu"]
    assert pg["device_used_bytes"] == pytest.approx(43.0 * GiB, rel=1e-6)
    assert pg["peak_allocated_bytes"] == pytest.approx(37.0 * GiB, rel=1e-6)
    live = sum(v for k, v in pg["components"].items() if k not in ("cuda_context", "allocator_slack"))
    assert live == pg["peak_allocated_bytes"]
    assert pg["components"]["allocator_slack"] == pg["peak_reserved_bytes"] - pg["peak_allocated_bytes"]
    assert out["headroom_bytes"] == pytest.approx((79.6 - 43.0) * GiB, rel=1e-6)
    assert C.describe(est()) == "estimate 41.20 GiB, measured 43.00 GiB on this GPU, calibrated 43.00 GiB"


def test_other_software_falls_back_to_same_gpu_and_median(calfile):
    C.record(est(), meas(used=43.0))
    C.record(est(), meas(used=45.0), software={"torch": "2.6", "cuda": "12.6", "driver": "560"})
    C.record(est(), meas(used=44.0), software={"torch": "2.6", "cuda": "12.6", "driver": "560"})
    f = C.factors("nvidia-h100-sxm5-80gb", {"torch": "9.9"})
    assert f["device_used_bytes"] == pytest.approx(44.0 / 41.2)
    assert C.factors("nvidia-a100-sxm4-80gb") is None


def test_bad_file_is_a_clear_error(calfile):
    calfile.write_text("{not json")
    from vramplan.errors import VramplanError
    with pytest.raises(VramplanError, match=f"calibration file {calfile}: not JSON"):
        C.load()
