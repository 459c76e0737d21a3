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



# One way each to break devices/nvidia-datacenter.toml (DC): the text, what replaces it, and
# what the load error says (the device, the field, what is wrong)
BROKEN_DC = {
    "wrong_type": (
        "tdp_w = 70\n",
        'tdp_w = "70 W"\n',
        ["device 'nvidia-t4'", "field 'tdp_w'", "must be int"]),
    "negative_memory": (
        'memory = "16 GiB"\nusable_memory = "15360 MiB"',
        'memory = "-16 GiB"\nusable_memory = "15360 MiB"',
        ["device 'nvidia-t4'", "field 'memory'", "not a size"]),
    "implausible_value": (
        "bandwidth_gbs = 320\n",
        "bandwidth_gbs = 320000\n",
        ["field 'bandwidth_gbs'", "out of plausible range"]),
    "usable_above_nominal": (
        T4_USABLE,
        'usable_memory = "17 GiB"\n',
        ["field 'usable_memory'", "between 70% and 100%"]),
    "bandwidth_inconsistent_without_note": (
        "data_rate_gbps = 10\nbandwidth_gbs = 320\n",
        "data_rate_gbps = 10\nbandwidth_gbs = 400\n",
        ["device 'nvidia-t4'", "field 'bandwidth_gbs'", "320.0 GB/s", "bandwidth_note"]),
    "unknown_source_id": (
        'sources = ["nv-t4-ds", "nv-turing-wp"]',
        'sources = ["nv-t4-ds", "nv-t4-rumour"]',
        ["device 'nvidia-t4'", "field 'sources'", "'nv-t4-rumour'"]),
    "unknown_field_source_id": (
        'usable_memory = ["modal-2797"] }\n\n[[device]]\nid = "nvidia-a10"',
        'usable_memory = ["forum-post"] }\n\n[[device]]\nid = "nvidia-a10"',
        ["field 'field_sources.usable_memory'", "'forum-post'"]),
    "value_without_source": (
        'field_sources = { usable_memory = ["modal-2797"] }\n\n[[device]]\nid = "nvidia-a10"',
        '\n[[device]]\nid = "nvidia-a10"',
        ["device 'nvidia-t4'", "field 'usable_memory'", "value without source"]),
    "field_source_for_absent_value": (
        'field_sources = { usable_memory = ["modal-2797"] }\n\n[[device]]\nid = "nvidia-a10"',
        'field_sources = { usable_memory = ["modal-2797"], tdp = ["nv-t4-ds"] }\n\n[[device]]\nid = "nvidia-a10"',
        ["field 'field_sources.tdp'"]),
    # someone typed the datasheet's sparse BF16 (1979) as the dense H100 value
    "dense_bigger_than_fp8_looks_sparse": (
        "bf16 = 989.4, fp8 = 1978.9, int8 = 1978.9 }\nsparse_throughput = { tf32 = 989.4, fp16 = 1978.9, bf16 = 1978.9",
        "bf16 = 1978.9, fp8 = 1978.9, int8 = 1978.9 }\nsparse_throughput = { tf32 = 989.4, fp16 = 1978.9, bf16 = 1978.9",
        ["device 'nvidia-h100-sxm5-80gb'", "field 'throughput.bf16'", "sparse figure"]),
    "tf32_above_fp16": (
        "fp32 = 31.2, tf32 = 62.5,",
        "fp32 = 31.2, tf32 = 250,",
        ["device 'nvidia-a10'", "field 'throughput.tf32'", "exceeds fp16"]),
    "sparse_not_twice_dense": (
        "sparse_throughput = { tf32 = 125, fp16 = 250, bf16 = 250, int8 = 500 }",
        "sparse_throughput = { tf32 = 125, fp16 = 125, bf16 = 250, int8 = 500 }",
        ["device 'nvidia-a10'", "field 'throughput.fp16'", "2:4"]),
    "unknown_field": (
        "tdp_w = 70\n",
        "tdp_w = 70\ntdp_watts = 70\n",
        ["device 'nvidia-t4'", "field 'tdp_watts'", "unknown field"]),
    "unknown_field_in_subtable": (
        "throughput = { fp32 = 8.1,",
        "throughput = { fp23 = 8.1,",
        ["field 'throughput.fp23'", "unknown field"]),
    "bad_memory_type": (
        'memory_type = "GDDR6"\nbus_width_bits = 256',
        'memory_type = "DDR4"\nbus_width_bits = 256',
        ["field 'memory_type'"]),
    "nvidia_without_compute_capability": (
        'compute_capability = "7.5"\nyear = 2018\nform_factor = "PCIe low-profile',
        'year = 2018\nform_factor = "PCIe low-profile',
        ["device 'nvidia-t4'", "field 'compute_capability'"]),
}


@pytest.mark.parametrize("old, new, says", BROKEN_DC.values(), ids=BROKEN_DC.keys())
def test_a_broken_datacenter_file_is_refused(hwdb, old, new, says):
    edit(hwdb, DC, old, new)
    assert_refused(hwdb, *says)



def test_memory_as_number_not_size(hwdb):
    edit(hwdb, DC, 'id = "nvidia-t4"', 'id = "nvidia-t4"\n# x', 1)
    edit(hwdb, DC, 'memory = "16 GiB"\nusable_memory = "15360 MiB"', 'memory = 16\nusable_memory = "15360 MiB"')
    assert_refused(hwdb, "field 'memory'", "size string")





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



def test_bandwidth_inconsistent_with_note_is_fine(hwdb):
    edit(hwdb, DC, "data_rate_gbps = 10\nbandwidth_gbs = 320\n",
         'data_rate_gbps = 10\nbandwidth_gbs = 400\nbandwidth_note = "test: overclocked board"\n')
    assert load_hwdb(hwdb, extra_paths=[]).get("nvidia-t4").bandwidth_gbs == 400









def test_malformed_toml(hwdb):
    (hwdb / "devices" / "broken.toml").write_text('[[device]]\nid = "x\n')
    assert_refused(hwdb, "broken.toml", "malformed TOML")




def test_unknown_top_level_key(hwdb):
    (hwdb / "devices" / "typo.toml").write_text('[[devices]]\nid = "x"\n')
    assert_refused(hwdb, "typo.toml", "unknown top-level key")




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
