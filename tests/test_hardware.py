"""vramplan.hardware: loading, lookup, filtering, to_dict and the reference-table cross-check."""
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vramplan import hardware
from vramplan.errors import HwdbError, UnknownIdError
from vramplan.hardware import Device, HardwareDB, default_db, get_gpu, load_hwdb
from vramplan.units import GiB, MiB

REF_CSV = Path(__file__).parent / "data" / "gpu_specs.csv"
REQUIRED_IDS = [
    "nvidia-v100-sxm2-16gb", "nvidia-v100-sxm2-32gb", "nvidia-t4", "nvidia-a10", "nvidia-a10g",
    "nvidia-a30", "nvidia-a40", "nvidia-a100-pcie-40gb", "nvidia-a100-sxm4-40gb",
    "nvidia-a100-pcie-80gb", "nvidia-a100-sxm4-80gb", "nvidia-h100-pcie-80gb",
    "nvidia-h100-sxm5-80gb", "nvidia-h100-sxm5-96gb", "nvidia-h100-nvl-94gb",
    "nvidia-h200-sxm-141gb", "nvidia-h200-nvl-141gb", "nvidia-gh200-96gb", "nvidia-gh200-144gb",
    "nvidia-b100-sxm", "nvidia-b200-sxm", "nvidia-l4", "nvidia-l40", "nvidia-l40s",
    "nvidia-quadro-rtx-8000", "nvidia-rtx-a6000", "nvidia-rtx-6000-ada",
    "nvidia-rtx-pro-6000-blackwell", "nvidia-titan-rtx", "nvidia-rtx-2060-super",
    "nvidia-rtx-2080-ti", "nvidia-rtx-3060-12gb", "nvidia-rtx-3080", "nvidia-rtx-3090",
    "nvidia-rtx-3090-ti", "nvidia-rtx-4060-ti-16gb", "nvidia-rtx-4070", "nvidia-rtx-4080",
    "nvidia-rtx-4090", "nvidia-rtx-5080", "nvidia-rtx-5090", "amd-mi100", "amd-mi210",
    "amd-mi250x", "amd-mi300x", "amd-mi325x", "amd-rx-7900-xtx", "intel-gaudi2", "intel-gaudi3",
    "intel-max-1550", "intel-arc-a770", "google-tpu-v4", "google-tpu-v5e", "google-tpu-v5p",
    "apple-m2-ultra", "apple-m3-max", "apple-m4-max",
]


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_hwdb(extra_paths=[])


def test_size_and_required_ids(db):
    assert len(db) >= 60
    for i in REQUIRED_IDS:
        assert db.get(i).id == i
    with open(REF_CSV) as f:
        for row in csv.DictReader(f):
            assert db.get(row["id"]).id == row["id"]


def test_scenario_example_a100_80gb(db):
    """SCENARIO.md: nvidia-a100-sxm4-80gb has memory_bytes 85899345920 (80 GiB)."""
    d = db.get("nvidia-a100-sxm4-80gb")
    assert d.memory_bytes == 85_899_345_920 == 80 * GiB
    assert d.name == "NVIDIA A100 SXM4 80GB"
    assert d.usable_memory_bytes == 81920 * MiB
    assert d.compute_capability == "8.0"
    assert d.bandwidth_gbs == 2039


@pytest.mark.parametrize("gpu,cc", [("nvidia-a100-pcie-40gb", "8.0"), ("nvidia-h100-sxm5-80gb", "9.0"),
                                    ("nvidia-rtx-4090", "8.9"), ("nvidia-l40s", "8.9"),
                                    ("nvidia-rtx-5090", "12.0"), ("nvidia-rtx-pro-6000-blackwell", "12.0"),
                                    ("nvidia-b200-sxm", "10.0"), ("nvidia-v100-sxm2-16gb", "7.0"),
                                    ("nvidia-t4", "7.5"), ("nvidia-a10", "8.6")])
def test_compute_capability(db, gpu, cc):
    assert db.get(gpu).compute_capability == cc


def test_usable_memory_from_driver_logs(db):
    assert db.get("nvidia-h100-sxm5-80gb").usable_bytes == 81559 * MiB
    assert db.get("nvidia-rtx-4090").usable_bytes == 24564 * MiB
    assert db.get("nvidia-a100-sxm4-40gb").usable_bytes == 40960 * MiB
    assert db.get("nvidia-t4").usable_bytes == 15360 * MiB
    # unknown usable -> nominal
    d = db.get("nvidia-h200-sxm-141gb")
    assert d.usable_memory_bytes is None and d.usable_bytes == 141 * GiB
    # Apple: 75% GPU working set by default
    m2 = db.get("apple-m2-ultra")
    assert m2.unified_memory and m2.usable_bytes == 144 * GiB == m2.memory_bytes * 3 // 4


@pytest.mark.parametrize("name", [
    "nvidia-a100-sxm4-80gb", "NVIDIA A100-SXM4-80GB", "nvidia a100-sxm4-80gb", "A100-SXM4-80GB",
    "  NVIDIA-A100-SXM4-80GB ", "a100 sxm4 80gb", "NVIDIA A100 SXM4 80GB",
])
def test_lookup_forms(db, name):
    assert db.get(name).id == "nvidia-a100-sxm4-80gb"


@pytest.mark.parametrize("nvml,gpu", [
    ("NVIDIA H100 80GB HBM3", "nvidia-h100-sxm5-80gb"), ("NVIDIA GeForce RTX 4090", "nvidia-rtx-4090"),
    ("Tesla V100-SXM2-16GB", "nvidia-v100-sxm2-16gb"), ("Tesla T4", "nvidia-t4"),
    ("NVIDIA H100 NVL", "nvidia-h100-nvl-94gb"), ("NVIDIA H200", "nvidia-h200-sxm-141gb"),
    ("NVIDIA H200 NVL", "nvidia-h200-nvl-141gb"), ("NVIDIA A100 80GB PCIe", "nvidia-a100-pcie-80gb"),
    ("NVIDIA RTX 6000 Ada Generation", "nvidia-rtx-6000-ada"), ("GeForce RTX 3090", "nvidia-rtx-3090"),
    ("NVIDIA B200", "nvidia-b200-sxm"), ("Quadro RTX 8000", "nvidia-quadro-rtx-8000"),
])
def test_nvml_names(db, nvml, gpu):
    assert db.get(nvml).id == gpu


def test_unknown_id_lists_closest(db):
    with pytest.raises(UnknownIdError) as e:
        db.get("nvidia-a100-sxm4-81gb")
    assert "nvidia-a100-sxm4-80gb" in str(e.value)
    assert "unknown GPU" in str(e.value)


def test_filter(db):
    amd = db.filter(vendor="amd")
    assert amd and all(d.vendor == "AMD" for d in amd)
    big = db.filter(min_memory="100GiB")
    assert {"nvidia-h200-sxm-141gb", "amd-mi300x"} <= {d.id for d in big}
    assert all(d.memory_bytes >= 100 * GiB for d in big)
    assert "nvidia-a100-sxm4-80gb" in {d.id for d in db.filter(min_memory=80 * GiB)}
    fast = db.filter(min_bandwidth="2 TB/s")
    assert "nvidia-a100-sxm4-80gb" in {d.id for d in fast}  # 2039 GB/s
    assert "nvidia-a100-pcie-80gb" not in {d.id for d in fast}  # 1935 GB/s
    assert "nvidia-h100-pcie-80gb" in {d.id for d in fast}  # exactly 2000 GB/s
    assert db.filter(vendor="nvidia", min_memory="48GiB", min_bandwidth="3 TB/s")


def test_to_dict_contract(db):
    for d in db:
        j = d.to_dict()
        for key in ("id", "vendor", "name", "memory_bytes", "memory_type", "bus_width_bits",
                    "data_rate_gbps", "bandwidth_gbs", "sources", "aliases"):
            assert key in j
        assert isinstance(j["memory_bytes"], int)
        assert j["sources"] and all(s["title"] and (s.get("url") or s.get("doc")) for s in j["sources"])
        json.dumps(j)
        if j["bus_width_bits"] and j["data_rate_gbps"]:
            calc = j["bus_width_bits"] * j["data_rate_gbps"] / 8
            if abs(j["bandwidth_gbs"] / calc - 1) > 0.05:
                assert j["bandwidth_note"]


def test_devices_are_frozen_and_hashable(db):
    d = db.get("nvidia-t4")
    with pytest.raises(Exception):
        d.memory_bytes = 1
    assert {d: 1}[d] == 1 and isinstance(d, Device)


def test_dense_values_are_not_sparse(db):
    """H100 SXM5 BF16 dense is 989.4 TF, not the datasheet's sparse 1979."""
    h = db.get("nvidia-h100-sxm5-80gb")
    assert h.throughput["bf16"] == 989.4 and h.sparse_throughput["bf16"] == 1978.9
    assert db.get("nvidia-a100-sxm4-80gb").throughput["bf16"] == 312
    assert db.get("nvidia-rtx-4090").throughput["fp16"] == 165.2  # FP32 accumulate on GeForce
    assert db.get("nvidia-rtx-4090").throughput["fp16_acc16"] == 330.3


def test_systems(db):
    s = db.get_system("nvidia-dgx-h100")
    assert s.gpu_count == 8 and s.link_gbs_per_direction == 450 and db.get(s.gpu)
    nvl = db.get_system("nvidia-gb200-nvl72")
    assert nvl.gpu_count == 72 and nvl.gpus_per_node == 4
    assert {x.id for x in db.systems} >= {"nvidia-dgx-a100-640gb", "nvidia-hgx-h200", "nvidia-dgx-b200"}


def test_default_db_cached_and_get_gpu(monkeypatch):
    monkeypatch.delenv(hardware.ENV_VAR, raising=False)
    assert default_db() is default_db()
    assert get_gpu("nvidia-l4").memory_bytes == 24 * GiB


def test_env_and_extra_path(tmp_path, monkeypatch):
    user = tmp_path / "mine.toml"
    user.write_text("""
[[source]]
id = "my-lab"
title = "our nvidia-smi log"
doc = "lab notebook 2025-01-01"

[[device]]
id = "lab-gpu"
vendor = "Lab"
name = "Lab GPU 8GB"
architecture = "X"
year = 2024
form_factor = "PCIe"
memory = "8 GiB"
memory_type = "GDDR6"
bus_width_bits = 128
data_rate_gbps = 16
bandwidth_gbs = 256
sources = ["my-lab"]
""")
    monkeypatch.setenv(hardware.ENV_VAR, str(user))
    assert get_gpu("lab-gpu").bandwidth_gbs == 256
    assert get_gpu("nvidia-t4")                     # built-ins still there
    monkeypatch.delenv(hardware.ENV_VAR)
    with pytest.raises(UnknownIdError):
        get_gpu("lab-gpu")
    hardware.set_extra_path(tmp_path)               # a directory works too
    try:
        assert get_gpu("Lab GPU 8GB").id == "lab-gpu"
    finally:
        hardware.set_extra_path(None)
    with pytest.raises(HwdbError, match="no such file"):
        load_hwdb(extra_paths=[tmp_path / "missing.toml"])


def test_user_override_needs_flag(tmp_path):
    base = """
[[device]]
id = "nvidia-t4"
vendor = "NVIDIA"
name = "My T4"
aliases = ["my t4"]
architecture = "Turing"
compute_capability = "7.5"
year = 2018
form_factor = "PCIe"
memory = "16 GiB"
memory_type = "GDDR6"
bus_width_bits = 256
data_rate_gbps = 10
bandwidth_gbs = 320
sources = ["nv-t4-ds"]
"""
    f = tmp_path / "t4.toml"
    f.write_text(base)
    with pytest.raises(HwdbError, match="duplicate device id"):
        load_hwdb(extra_paths=[f])
    f.write_text(base + "override = true\n")
    db = load_hwdb(extra_paths=[f])
    assert db.get("nvidia-t4").name == "My T4" and db.get("my t4").name == "My T4"
    assert sum(d.id == "nvidia-t4" for d in db) == 1


def test_reference_csv_agrees_except_recorded(db):
    """Every value in the reference table matches hwdb within 1%, except the recorded diffs
    (hwdb/reference_diffs.toml); a recorded diff that no longer differs fails too."""
    cols = {
        "memory_gb": lambda d: d.memory_bytes / GiB, "memory_bus_bits": lambda d: d.bus_width_bits,
        "memory_data_rate_gbps": lambda d: d.data_rate_gbps, "mem_bw_gbs": lambda d: d.bandwidth_gbs,
        "l2_cache_mb": lambda d: d.hierarchy.get("l2_mib"),
        "llc_or_sram_mb": lambda d: d.hierarchy.get("llc_mib"), "compute_units": lambda d: d.compute_units,
        "l1_smem_per_unit_kb": lambda d: d.hierarchy.get("l1_smem_kib_per_unit"),
        "regfile_per_unit_kb": lambda d: d.hierarchy.get("regfile_kib_per_unit"),
        "fp32_tflops": lambda d: d.throughput.get("fp32"),
        "tf32_tflops_dense": lambda d: d.throughput.get("tf32"),
        "fp16_tflops_dense": lambda d: d.throughput.get("fp16"),
        "fp16_acc16_tflops_dense": lambda d: d.throughput.get("fp16_acc16"),
        "bf16_tflops_dense": lambda d: d.throughput.get("bf16"),
        "fp8_tflops_dense": lambda d: d.throughput.get("fp8"),
        "int8_tops_dense": lambda d: d.throughput.get("int8"),
        "pcie_gen": lambda d: d.interconnect.get("pcie_gen"),
        "pcie_lanes": lambda d: d.interconnect.get("pcie_lanes"), "tdp_w": lambda d: d.tdp_w,
        "release_year": lambda d: d.year,
        "scaleup_bw_gbs_bidir": lambda d: 2 * d.interconnect["scaleup_gbs_per_direction"]
        if "scaleup_gbs_per_direction" in d.interconnect else None,
    }
    recorded = {(r["id"], r["field"]): r for r in db.reference_diffs}
    found = set()
    with open(REF_CSV) as f:
        for row in csv.DictReader(f):
            d = db.get(row["id"])
            assert d.memory_type.lower() == row["memory_type"].split()[0].lower(), row["id"]
            for col, get in cols.items():
                if not row[col].strip():
                    continue
                ref, mine = float(row[col]), get(d)
                if mine is not None and abs(mine - ref) <= 0.01 * abs(ref):
                    continue
                key = (row["id"], col)
                assert key in recorded, f"{key}: reference {ref}, hwdb {mine}, not recorded"
                r = recorded[key]
                assert r["reference"] == pytest.approx(ref) and r.get("hwdb") == mine, key
                found.add(key)
    assert found == set(recorded), f"recorded but no longer different: {set(recorded) - found}"


def test_loads_from_plain_checkout_quickly():
    """PYTHONPATH=app works (importlib.resources), and the core imports no torch/altair/widgets."""
    root = Path(__file__).resolve().parents[1]
    code = ("import sys,time; t=time.perf_counter(); from vramplan.hardware import default_db; "
            "n=len(default_db()); print(n, time.perf_counter()-t); "
            "assert not {'torch','altair','ipywidgets','numpy'} & set(sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env={"PYTHONPATH": str(root / "app")},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    n, secs = out.stdout.split()
    assert int(n) >= 60 and float(secs) < 2.0


def test_parse_is_fast():
    t = time.perf_counter()
    load_hwdb(extra_paths=[])
    assert time.perf_counter() - t < 0.5
