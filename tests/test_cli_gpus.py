"""`vramplan gpus` and `vramplan gpu ID`, in-process through vramplan.cli.main and once as a
subprocess."""
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import clean_hwdb, run  # noqa: F401 (clean_hwdb: the fixture pytestmark uses)
from vramplan import hardware


pytestmark = pytest.mark.usefixtures("clean_hwdb")


def test_list_table(capsys):
    rc, out, _ = run(capsys, "gpus")
    assert rc == 0
    assert "nvidia-a100-sxm4-80gb" in out and "apple-m2-ultra" in out
    assert out.strip().splitlines()[-1].startswith(f"{len(hardware.default_db())} of ")


def test_list_json_contract(capsys):
    rc, out, _ = run(capsys, "gpus", "--format", "json")
    data = json.loads(out)
    assert rc == 0 and isinstance(data, list) and len(data) >= 60
    a100 = next(d for d in data if d["id"] == "nvidia-a100-sxm4-80gb")
    assert a100["memory_bytes"] == 85899345920 and a100["name"] == "NVIDIA A100 SXM4 80GB"
    assert a100["bandwidth_gbs"] == 2039 and a100["memory_type"] == "HBM2e"
    assert "NVIDIA A100-SXM4-80GB" in a100["aliases"]
    for d in data:
        for key in ("id", "vendor", "name", "memory_bytes", "memory_type", "bus_width_bits",
                    "data_rate_gbps", "bandwidth_gbs", "sources", "aliases", "bandwidth_note"):
            assert key in d
        assert all("title" in s for s in d["sources"])


def test_filters(capsys):
    rc, out, _ = run(capsys, "gpus", "--vendor", "nvidia", "--min-memory", "80GiB",
                     "--min-bandwidth", "3 TB/s", "--format", "json")
    ids = {d["id"] for d in json.loads(out)}
    assert rc == 0 and "nvidia-h100-sxm5-80gb" in ids and "nvidia-h200-sxm-141gb" in ids
    assert "nvidia-a100-sxm4-80gb" not in ids and not any(i.startswith("amd") for i in ids)


def test_csv(capsys):
    rc, out, _ = run(capsys, "gpus", "--vendor", "google", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rc == 0 and {r["id"] for r in rows} == {"google-tpu-v4", "google-tpu-v5e", "google-tpu-v5p",
                                                      "google-tpu-v6e", "google-tpu7x"}
    assert next(r for r in rows if r["id"] == "google-tpu-v4")["memory_gib"] == "32.0"


def test_systems(capsys):
    rc, out, _ = run(capsys, "gpus", "--systems", "--format", "json")
    assert rc == 0 and any(s["id"] == "nvidia-gb200-nvl72" for s in json.loads(out))


@pytest.mark.parametrize("bad", ["40G", "lots", "-3GB"])
def test_bad_min_memory(capsys, bad):
    rc, out, err = run(capsys, "gpus", f"--min-memory={bad}")
    assert rc == 2 and out == "" and err.startswith("vramplan: error:") and "Traceback" not in err


def test_bad_min_bandwidth(capsys):
    rc, _, err = run(capsys, "gpus", "--min-bandwidth", "2 TB")
    assert rc == 2 and "not a rate" in err


def test_one_gpu_table_lists_sources(capsys):
    rc, out, _ = run(capsys, "gpu", "NVIDIA H100 80GB HBM3")
    assert rc == 0
    assert "nvidia-h100-sxm5-80gb" in out and "81559 MiB" in out and "Sources:" in out
    assert "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet" in out
    assert "9.0" in out


def test_one_gpu_json(capsys):
    rc, out, _ = run(capsys, "gpu", "nvidia-rtx-4090", "--format", "json")
    d = json.loads(out)
    assert rc == 0 and d["usable_memory_bytes"] == 24564 * 2**20 and d["compute_capability"] == "8.9"


def test_unknown_gpu_exit_2_with_closest(capsys):
    rc, out, err = run(capsys, "gpu", "nvidia-a100-sxm4-81gb")
    assert rc == 2 and out == ""
    assert "unknown GPU 'nvidia-a100-sxm4-81gb'" in err and "nvidia-a100-sxm4-80gb" in err


def test_hwdb_flag(capsys, tmp_path):
    f = tmp_path / "extra.toml"
    f.write_text('[[source]]\nid = "s"\ntitle = "t"\ndoc = "d"\n\n[[device]]\nid = "my-card"\n'
                 'vendor = "Lab"\nname = "My Card"\narchitecture = "X"\nyear = 2024\n'
                 'form_factor = "PCIe"\nmemory = "8 GiB"\nmemory_type = "GDDR6"\n'
                 'bus_width_bits = 128\ndata_rate_gbps = 16\nbandwidth_gbs = 256\nsources = ["s"]\n')
    rc, out, _ = run(capsys, "--hwdb", str(f), "gpu", "my-card", "--format", "json")
    assert rc == 0 and json.loads(out)["bandwidth_gbs"] == 256
    f.write_text("[[device]]\nid = 3\n")
    rc, _, err = run(capsys, "--hwdb", str(f), "gpus")
    assert rc == 2 and "extra.toml" in err


def test_subprocess_console_script():
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root / "app"))
    env.pop(hardware.ENV_VAR, None)
    ok = subprocess.run([sys.executable, "-m", "vramplan.cli", "gpus", "--vendor", "apple",
                         "--format", "json"], capture_output=True, text=True, env=env, timeout=60)
    assert ok.returncode == 0 and {d["vendor"] for d in json.loads(ok.stdout)} == {"Apple"}
    bad = subprocess.run([sys.executable, "-m", "vramplan.cli", "gpu", "h100-sxm9"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "vramplan: error: unknown GPU" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_list_fills_usable_memory_and_every_dtype(capsys):
    """Before: usable_gib was blank for the 67 devices without a driver total, and only bf16 /
    fp8 throughput were listed. Now usable is what the estimate uses (driver total, else
    nominal) and there is one column per dense throughput key of the database."""
    rc, out, _ = run(capsys, "gpus", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rc == 0 and all(r["usable_gib"] for r in rows)
    keys = {k for d in hardware.default_db().devices for k, v in d.throughput.items() if v}
    cols = {c.rsplit("_", 1)[0] for c in rows[0] if c.endswith(("_tflops", "_tops"))}
    assert cols == keys and {"fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8"} <= cols
    h100 = next(r for r in rows if r["id"] == "nvidia-h100-sxm5-80gb")
    assert h100["int8_tops"] == "1978.9" and h100["fp16_tflops"] == "989.4"    # hwdb
    a100 = next(r for r in rows if r["id"] == "nvidia-a100-sxm4-80gb")
    db = hardware.default_db().get("nvidia-a100-sxm4-80gb")
    assert a100["usable_gib"] == str(round(db.usable_bytes / 2**30, 1))
