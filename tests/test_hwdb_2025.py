"""The 2025-26 hardware (issue 21.6) and the GPU's share of unified memory.

Every figure asserted here is the vendor's (hwdb sources) or a hand computation written next
to it; the unified-memory share follows hardware/unified.py."""
import json
import shutil
from pathlib import Path

import pytest

from cli_helpers import clean_hwdb, run  # noqa: F401 (clean_hwdb: the fixture pytestmark uses)
from vramplan.errors import HwdbError
from vramplan.estimate import estimate
from vramplan.hardware import builtin_path, load_hwdb, traits_of
from vramplan.hardware.unified import macos_wired_default

GiB, MiB = 2**30, 2**20

NEW = {   # id -> (vendor, memory GiB as labelled)
    "nvidia-b300-sxm": ("NVIDIA", 288), "nvidia-gb300": ("NVIDIA", 288),
    "nvidia-dgx-spark": ("NVIDIA", 128), "nvidia-rtx-5060-ti-16gb": ("NVIDIA", 16),
    "nvidia-rtx-5070-ti": ("NVIDIA", 16), "amd-mi350x": ("AMD", 288),
    "amd-ryzen-ai-max-plus-395": ("AMD", 128), "amd-rx-9070-xt": ("AMD", 16),
    "intel-arc-b580": ("Intel", 12), "intel-arc-pro-b60": ("Intel", 24),
    "google-tpu-v6e": ("Google", 32), "google-tpu7x": ("Google", 192),
    "apple-m4-pro": ("Apple", 64),
}


@pytest.fixture(scope="module")
def db():
    return load_hwdb(extra_paths=[])


pytestmark = pytest.mark.usefixtures("clean_hwdb")


@pytest.mark.parametrize("did", sorted(NEW))
def test_every_new_device_loads_with_its_sources(db, did):
    d = db.get(did)
    vendor, gib = NEW[did]
    assert d.vendor == vendor and d.memory_bytes == gib * GiB
    assert d.sources and all(s.url or s.doc for s in d.sources)
    assert d.year >= 2024


@pytest.mark.parametrize("did, bus, gbps, stated", [
    ("nvidia-rtx-5060-ti-16gb", 128, 28, 448),      # 128 x 28 / 8 = 448
    ("nvidia-rtx-5070-ti", 256, 28, 896),           # 256 x 28 / 8 = 896
    ("amd-rx-9070-xt", 256, 20, 640),               # 256 x 20 / 8 = 640
    ("intel-arc-b580", 192, 19, 456),               # 192 x 19 / 8 = 456
    ("intel-arc-pro-b60", 192, 19, 456),            # 192 x 19 / 8 = 456
    ("amd-ryzen-ai-max-plus-395", 256, 8, 256),     # 256 x 8 / 8 = 256 (LPDDR5x-8000)
    ("apple-m4-pro", 256, 8.533, 273),              # 256 x 8.533 / 8 = 273.1
    ("nvidia-dgx-spark", 256, 8.533, 273),          # 256 x 8.533 / 8 = 273.1
])
def test_bandwidth_is_bus_times_rate_over_eight(db, did, bus, gbps, stated):
    d = db.get(did)
    assert (d.bus_width_bits, d.data_rate_gbps, d.bandwidth_gbs) == (bus, gbps, stated)
    assert abs(bus * gbps / 8 / stated - 1) < 0.001


def test_bandwidth_without_bus_and_rate_says_where_it_comes_from(db):
    for did in ("nvidia-b300-sxm", "nvidia-gb300", "amd-mi350x", "google-tpu-v6e",
                "google-tpu7x"):
        d = db.get(did)
        assert d.data_rate_gbps is None and d.bandwidth_note
    assert db.get("google-tpu7x").bandwidth_gbs == 7380       # Google: 7380 GBps per chip
    assert db.get("nvidia-gb300").bandwidth_gbs == 576_000 / 72   # NVL72: 576 TB/s / 72


def test_datasheet_rates_divided_as_the_vendor_states(db):
    b300, gb300 = db.get("nvidia-b300-sxm").throughput, db.get("nvidia-gb300").throughput
    assert b300["fp4"] == 108_000 / 8 and b300["bf16"] == 36_000 / 8 / 2   # HGX B300 / 8 GPUs
    assert gb300["fp4"] == 1_080_000 / 72 and gb300["fp8"] == 720_000 / 72 / 2  # NVL72 / 72
    mi350, mi355 = db.get("amd-mi350x").throughput, db.get("amd-mi355x").throughput
    assert mi350["bf16"] == pytest.approx(mi355["bf16"] * 2.2 / 2.4, abs=0.1)  # clock ratio
    assert db.get("nvidia-rtx-5070-ti").throughput["fp4"] == 1406 / 2      # AI TOPS sparse / 2
    assert db.get("intel-arc-b580").throughput == {"int8": 233}            # nothing invented


# ---------------------------------------------------------------- unified memory: the GPU's share
def test_macos_rule_matches_the_recorded_metal_logs():
    assert macos_wired_default(16 * GiB) / MiB == pytest.approx(10922.67, abs=0.01)  # 2/3
    assert macos_wired_default(32 * GiB) / MiB == pytest.approx(21845.33, abs=0.01)  # 2/3
    assert macos_wired_default(36 * GiB) == 24 * GiB                                  # 2/3
    assert macos_wired_default(96 * GiB) / MiB == 73728                               # 3/4


@pytest.mark.parametrize("did, usable_gib", [
    ("apple-m3-ultra", 384),   # 512 x 3/4; all 512 GiB before
    ("apple-m4-max", 96),      # 128 x 3/4; all 128 GiB before
    ("apple-m4-pro", 48),      # 64 x 3/4
    ("apple-m3-max", 96),      # 128 x 3/4, as before (golden rows unchanged)
    ("apple-m2-ultra", 144),   # 192 x 3/4, as before
    ("amd-ryzen-ai-max-plus-395", 96),   # AMD's 96 GB Variable Graphics Memory on 128 GB
])
def test_unified_devices_plan_with_the_gpu_share(db, did, usable_gib):
    d = db.get(did)
    assert d.unified_memory and d.usable_bytes == usable_gib * GiB
    assert traits_of(d).usable_bytes == usable_gib * GiB
    assert d.usable_memory_note


def test_m3_ultra_is_not_512_gib_of_gpu_memory(db):
    d = db.get("apple-m3-ultra")
    assert d.usable_bytes == 512 * GiB * 3 // 4 == 412_316_860_416 < d.memory_bytes
    assert d.usable_memory_rule == "macos-wired-default"
    assert "iogpu.wired_limit_mb" in d.usable_memory_note


def test_dgx_spark_usable_is_what_cuda_reports(db):
    d = db.get("nvidia-dgx-spark")
    assert d.usable_bytes == round(121.69 * GiB) and d.compute_capability == "12.1"
    assert "drop_caches" in d.usable_memory_note and "unsloth-10283" in d.field_sources["usable_memory"]


def test_estimate_headroom_is_against_the_share():
    est = estimate({"model": "gpt2", "task": "train", "gpu": "apple-m3-ultra"})
    assert est.headroom_bytes + est.device_used_bytes == 384 * GiB


def test_every_unified_device_states_its_share(db):
    for d in db:
        if d.unified_memory:
            assert d.usable_memory_note, d.id


# ---------------------------------------------------------------- validation of the new fields
@pytest.fixture
def hwdb(tmp_path) -> Path:
    dst = tmp_path / "hwdb"
    shutil.copytree(Path(str(builtin_path())), dst)
    return dst


APPLE = "devices/apple.toml"
RULE = 'usable_memory_rule = "macos-wired-default"\n'


def _err(root: Path, old: str, new: str, rel: str = APPLE) -> str:
    f = root / rel
    text = f.read_text()
    assert old in text
    f.write_text(text.replace(old, new, 1))
    with pytest.raises(HwdbError) as e:
        load_hwdb(root, extra_paths=[])
    return str(e.value)


def test_unknown_rule_names_file_and_key(hwdb):
    msg = _err(hwdb, RULE, 'usable_memory_rule = "macos-default"\n')
    assert APPLE in msg and "field 'usable_memory_rule'" in msg
    assert "unknown rule 'macos-default'" in msg and "macos-wired-default" in msg


def test_rule_and_value_together_are_refused(hwdb):
    f = hwdb / APPLE
    f.write_text(f.read_text().replace("{ usable_memory_rule = [",
                                       '{ usable_memory = ["ollama-434"], usable_memory_rule = [', 1))
    msg = _err(hwdb, RULE, RULE + 'usable_memory = "144 GiB"\n')
    assert "field 'usable_memory_rule'" in msg and "not both" in msg


def test_rule_needs_unified_memory(hwdb):
    msg = _err(hwdb, "unified_memory = true\n", "unified_memory = false\n")
    assert "field 'usable_memory_rule'" in msg and "unified_memory = true" in msg


def test_unified_device_without_note_is_refused(hwdb):
    f = hwdb / APPLE
    lines = f.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith("usable_memory_note"))
    f.write_text("".join(lines[:first] + lines[first + 1:]))
    with pytest.raises(HwdbError) as e:
        load_hwdb(hwdb, extra_paths=[])
    msg = str(e.value)
    assert APPLE in msg and "field 'usable_memory_note'" in msg and "share of RAM" in msg


def test_rule_without_its_own_source_is_refused(hwdb):
    msg = _err(hwdb, 'field_sources = { usable_memory_rule = ["llamacpp-3213", "ollama-434", '
                     '"llamacpp-python-687", "rapidmlx-183", "ds4-893"] }\n', "")
    assert "field 'usable_memory_rule'" in msg and "field_sources" in msg


# ---------------------------------------------------------------- the CLI
def test_gpus_vendor_amd_lists_the_new_ones(capsys):
    rc, out, _ = run(capsys, "gpus", "--vendor", "amd", "--format", "json")
    ids = {d["id"] for d in json.loads(out)}
    assert rc == 0 and {"amd-mi350x", "amd-rx-9070-xt", "amd-ryzen-ai-max-plus-395"} <= ids
    halo = next(d for d in json.loads(out) if d["id"] == "amd-ryzen-ai-max-plus-395")
    assert halo["usable_memory_bytes"] == 96 * GiB and "GTT" in halo["usable_memory_note"]


def test_gpu_card_states_the_share(capsys):
    rc, out, _ = run(capsys, "gpu", "apple-m3-ultra")
    assert rc == 0 and "usable (GPU share)" in out and "393216 MiB" in out   # 384 GiB
    assert "75.0% of RAM" in out and "sudo sysctl iogpu.wired_limit_mb" in out
    rc, out, _ = run(capsys, "gpu", "apple-m3-ultra", "--format", "json")
    assert json.loads(out)["usable_memory_rule"] == "macos-wired-default"


def test_device_card_shows_the_share(db):
    from vramplan.ui.widgets.device_card import device_card_html
    html = device_card_html(db.get("apple-m3-ultra").to_dict(), db.sources)
    assert "384 GiB" in html and "75.0%" in html and "iogpu.wired_limit_mb" in html


def test_blackwell_ultra_systems(db):
    nvl = db.get_system("nvidia-gb300-nvl72")
    assert nvl.gpu == "nvidia-gb300" and nvl.gpu_count == 72 and nvl.gpus_per_node == 4
    assert nvl.gpu_count * db.get(nvl.gpu).bandwidth_gbs == 576_000   # NVL72: 576 TB/s
    assert db.get_system("nvidia-hgx-b300").link_gbs_per_direction == 1800 / 2   # 1.8 TB/s both ways
