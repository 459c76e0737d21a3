"""Validation on load: break a copy of the hardware database in many ways; each error names the
file, the device and the field (vramplan.errors.HwdbError)."""
import shutil
from pathlib import Path

import pytest

from vramplan.errors import HwdbError
from vramplan.hardware import builtin_path, load_hwdb

DC = "devices/nvidia-datacenter.toml"
T4_USABLE = 'usable_memory = "15360 MiB"\n'


@pytest.fixture
def hwdb(tmp_path) -> Path:
    dst = tmp_path / "hwdb"
    shutil.copytree(Path(str(builtin_path())), dst)
    return dst


def edit(root: Path, rel: str, old: str, new: str, count: int = 1) -> None:
    f = root / rel
    text = f.read_text()
    assert old in text, f"fixture text not found: {old!r}"
    f.write_text(text.replace(old, new, count))


def load_err(root: Path) -> str:
    with pytest.raises(HwdbError) as e:
        load_hwdb(root, extra_paths=[])
    return str(e.value)


def assert_refused(root: Path, *says: str) -> None:
    """The database at `root` is refused on load (HwdbError) with a message saying each of
    `says` (the file, the device, the field, what is wrong)."""
    msg = load_err(root)
    assert [s for s in says if s not in msg] == [], msg


def test_copy_loads_clean(hwdb):
    assert len(load_hwdb(hwdb, extra_paths=[])) >= 60


def test_missing_required_field(hwdb):
    edit(hwdb, DC, 'memory_type = "GDDR6"\nbus_width_bits = 256\ndata_rate_gbps = 10\n',
         'bus_width_bits = 256\ndata_rate_gbps = 10\n')
    assert_refused(hwdb, DC, "device 'nvidia-t4'", "field 'memory_type'",
                   "missing required field")


def test_wrong_type(hwdb):
    edit(hwdb, DC, "tdp_w = 70\n", 'tdp_w = "70 W"\n')
    assert_refused(hwdb, "device 'nvidia-t4'", "field 'tdp_w'", "must be int")


def test_memory_as_number_not_size(hwdb):
    edit(hwdb, DC, 'id = "nvidia-t4"', 'id = "nvidia-t4"\n# x', 1)
    edit(hwdb, DC, 'memory = "16 GiB"\nusable_memory = "15360 MiB"', 'memory = 16\nusable_memory = "15360 MiB"')
    assert_refused(hwdb, "field 'memory'", "size string")


def test_negative_memory(hwdb):
    edit(hwdb, DC, 'memory = "16 GiB"\nusable_memory = "15360 MiB"', 'memory = "-16 GiB"\nusable_memory = "15360 MiB"')
    assert_refused(hwdb, "device 'nvidia-t4'", "field 'memory'", "not a size")


def test_implausible_value(hwdb):
    edit(hwdb, DC, "bandwidth_gbs = 320\n", "bandwidth_gbs = 320000\n")
    assert_refused(hwdb, "field 'bandwidth_gbs'", "out of plausible range")


def test_usable_above_nominal(hwdb):
    edit(hwdb, DC, T4_USABLE, 'usable_memory = "17 GiB"\n')
    assert_refused(hwdb, "field 'usable_memory'", "between 70% and 100%")


def test_duplicate_id_across_files(hwdb):
    edit(hwdb, "devices/nvidia-consumer.toml", 'id = "nvidia-rtx-4090"', 'id = "nvidia-t4"')
    assert_refused(hwdb, "devices/nvidia-datacenter.toml", "duplicate device id",
                   "device 'nvidia-t4'")


def test_duplicate_alias(hwdb):
    edit(hwdb, "devices/nvidia-consumer.toml", '"NVIDIA GeForce RTX 4090", "RTX 4090"',
         '"NVIDIA GeForce RTX 4090", "Tesla T4"')
    # files load in path order, so the later file (datacenter) is the one reported
    assert_refused(hwdb, "device 'nvidia-t4'", "field 'aliases'",
                   "'Tesla T4' already belongs to 'nvidia-rtx-4090'", "nvidia-consumer.toml")


def test_alias_clash_ignores_case_and_punctuation(hwdb):
    edit(hwdb, "devices/nvidia-consumer.toml", '"NVIDIA GeForce RTX 4090", "RTX 4090"',
         '"NVIDIA GeForce RTX 4090", "tesla-t4"')
    assert "already belongs to 'nvidia-rtx-4090'" in load_err(hwdb)


def test_bandwidth_inconsistent_without_note(hwdb):
    edit(hwdb, DC, "data_rate_gbps = 10\nbandwidth_gbs = 320\n", "data_rate_gbps = 10\nbandwidth_gbs = 400\n")
    assert_refused(hwdb, "device 'nvidia-t4'", "field 'bandwidth_gbs'", "320.0 GB/s",
                   "bandwidth_note")


def test_bandwidth_inconsistent_with_note_is_fine(hwdb):
    edit(hwdb, DC, "data_rate_gbps = 10\nbandwidth_gbs = 320\n",
         'data_rate_gbps = 10\nbandwidth_gbs = 400\nbandwidth_note = "test: overclocked board"\n')
    assert load_hwdb(hwdb, extra_paths=[]).get("nvidia-t4").bandwidth_gbs == 400


def test_unknown_source_id(hwdb):
    edit(hwdb, DC, 'sources = ["nv-t4-ds", "nv-turing-wp"]', 'sources = ["nv-t4-ds", "nv-t4-rumour"]')
    assert_refused(hwdb, "device 'nvidia-t4'", "field 'sources'", "'nv-t4-rumour'")


def test_unknown_field_source_id(hwdb):
    edit(hwdb, DC, 'usable_memory = ["modal-2797"] }\n\n[[device]]\nid = "nvidia-a10"',
         'usable_memory = ["forum-post"] }\n\n[[device]]\nid = "nvidia-a10"')
    assert_refused(hwdb, "field 'field_sources.usable_memory'", "'forum-post'")


def test_value_without_source(hwdb):
    edit(hwdb, DC, 'field_sources = { usable_memory = ["modal-2797"] }\n\n[[device]]\nid = "nvidia-a10"',
         '\n[[device]]\nid = "nvidia-a10"')
    assert_refused(hwdb, "device 'nvidia-t4'", "field 'usable_memory'", "value without source")


def test_field_source_for_absent_value(hwdb):
    edit(hwdb, DC, 'field_sources = { usable_memory = ["modal-2797"] }\n\n[[device]]\nid = "nvidia-a10"',
         'field_sources = { usable_memory = ["modal-2797"], tdp = ["nv-t4-ds"] }\n\n[[device]]\nid = "nvidia-a10"')
    assert "field 'field_sources.tdp'" in load_err(hwdb)


def test_dense_bigger_than_fp8_looks_sparse(hwdb):
    # someone typed the datasheet's sparse BF16 (1979) as the dense H100 value
    edit(hwdb, DC, "bf16 = 989.4, fp8 = 1978.9, int8 = 1978.9 }\nsparse_throughput = { tf32 = 989.4, fp16 = 1978.9, bf16 = 1978.9",
         "bf16 = 1978.9, fp8 = 1978.9, int8 = 1978.9 }\nsparse_throughput = { tf32 = 989.4, fp16 = 1978.9, bf16 = 1978.9")
    assert_refused(hwdb, "device 'nvidia-h100-sxm5-80gb'", "field 'throughput.bf16'",
                   "sparse figure")


def test_tf32_above_fp16(hwdb):
    edit(hwdb, DC, "fp32 = 31.2, tf32 = 62.5,", "fp32 = 31.2, tf32 = 250,")
    assert_refused(hwdb, "device 'nvidia-a10'", "field 'throughput.tf32'", "exceeds fp16")


def test_sparse_not_twice_dense(hwdb):
    edit(hwdb, DC, "sparse_throughput = { tf32 = 125, fp16 = 250, bf16 = 250, int8 = 500 }",
         "sparse_throughput = { tf32 = 125, fp16 = 125, bf16 = 250, int8 = 500 }")
    assert_refused(hwdb, "device 'nvidia-a10'", "field 'throughput.fp16'", "2:4")


def test_malformed_toml(hwdb):
    (hwdb / "devices" / "broken.toml").write_text('[[device]]\nid = "x\n')
    assert_refused(hwdb, "broken.toml", "malformed TOML")


def test_unknown_field(hwdb):
    edit(hwdb, DC, "tdp_w = 70\n", "tdp_w = 70\ntdp_watts = 70\n")
    assert_refused(hwdb, "device 'nvidia-t4'", "field 'tdp_watts'", "unknown field")


def test_unknown_field_in_subtable(hwdb):
    edit(hwdb, DC, "throughput = { fp32 = 8.1,", "throughput = { fp23 = 8.1,")
    assert_refused(hwdb, "field 'throughput.fp23'", "unknown field")


def test_unknown_top_level_key(hwdb):
    (hwdb / "devices" / "typo.toml").write_text('[[devices]]\nid = "x"\n')
    assert_refused(hwdb, "typo.toml", "unknown top-level key")


def test_bad_memory_type(hwdb):
    edit(hwdb, DC, 'memory_type = "GDDR6"\nbus_width_bits = 256', 'memory_type = "DDR4"\nbus_width_bits = 256')
    assert "field 'memory_type'" in load_err(hwdb)


def test_nvidia_without_compute_capability(hwdb):
    edit(hwdb, DC, 'compute_capability = "7.5"\nyear = 2018\nform_factor = "PCIe low-profile',
         'year = 2018\nform_factor = "PCIe low-profile')
    assert_refused(hwdb, "device 'nvidia-t4'", "field 'compute_capability'")


def test_system_with_unknown_gpu(hwdb):
    edit(hwdb, "systems.toml", 'gpu = "nvidia-h100-sxm5-80gb"', 'gpu = "nvidia-h100-sxm6"')
    assert_refused(hwdb, "systems.toml", "device 'nvidia-dgx-h100'", "field 'gpu'")


def test_duplicate_source_id(hwdb):
    with open(hwdb / "sources.toml", "a") as f:
        f.write('\n[[source]]\nid = "nv-t4-ds"\ntitle = "again"\nurl = "https://example.org"\n')
    assert_refused(hwdb, "sources.toml", "duplicate source id")


def test_every_numeric_value_is_covered_by_a_source():
    """Each device's default `sources` covers all its values, and the values no datasheet
    states (usable memory, achievable fraction) carry their own field source."""
    db = load_hwdb(extra_paths=[])
    for d in db:
        assert d.sources
        if d.usable_memory_bytes is not None:   # given, or computed by a sourced rule
            own = "usable_memory_rule" if d.usable_memory_rule else "usable_memory"
            assert own in d.field_sources, d.id
        for ids in d.field_sources.values():
            assert all(i in db.sources for i in ids)
