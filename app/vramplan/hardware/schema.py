"""The fields each hwdb table takes: (python types, required, (min, max) or None)."""
from __future__ import annotations

from ..units import GB  # noqa: F401

ENV_VAR = "VRAMPLAN_HWDB"
BANDWIDTH_TOLERANCE = 0.05   # |stated / (bus * rate / 8) - 1| above this needs a bandwidth_note

# ---------------------------------------------------------------- schema
# field -> (python types, required, (min, max) or None). "size" is a string such as "80 GiB".
_NUM = (int, float)
DEVICE_FIELDS: dict[str, tuple] = {
    "id": (str, True, None), "vendor": (str, True, None), "name": (str, True, None),
    "aliases": (list, False, None), "architecture": (str, True, None), "chip": (str, False, None),
    "compute_capability": (str, False, None), "year": (int, True, (2010, 2030)),
    "form_factor": (str, True, None),
    "memory": ("size", True, (1 * 2**30, 2**40)), "usable_memory": ("size", False, (2**30, 2**40)),
    "usable_memory_rule": (str, False, None), "usable_memory_note": (str, False, None),
    "memory_type": (str, True, None), "unified_memory": (bool, False, None),
    "bus_width_bits": (int, False, (64, 16384)), "data_rate_gbps": (_NUM, False, (0.5, 40.0)),
    "bandwidth_gbs": (_NUM, True, (50.0, 20000.0)), "bandwidth_note": (str, False, None),
    "achievable_bandwidth_fraction": (_NUM, False, (0.3, 1.0)),
    "achievable_bandwidth_note": (str, False, None),
    "tdp_w": (int, False, (5, 2000)), "note": (str, False, None),
    "sources": (list, True, None), "field_sources": (dict, False, None),
    "override": (bool, False, None),
    "hierarchy": (dict, False, None), "throughput": (dict, False, None),
    "sparse_throughput": (dict, False, None), "interconnect": (dict, False, None),
}
HIERARCHY_FIELDS = {
    "compute_units": (int, True, (1, 100000)), "compute_unit_kind": (str, True, None),
    "regfile_kib_per_unit": (_NUM, False, (1, 4096)),
    "l1_smem_kib_per_unit": (_NUM, False, (1, 4096)),
    "l2_mib": (_NUM, False, (0.25, 1024)), "llc_mib": (_NUM, False, (1, 4096)),
    "llc_kind": (str, False, None),
}
# dense TFLOPS / TOPS; fp16/bf16/fp8 accumulate in FP32, *_acc16 in FP16 (see hwdb/README.md)
THROUGHPUT_KEYS = ("fp64", "fp32", "fp32_matrix", "tf32", "fp16", "fp16_acc16", "bf16",
                   "fp8", "fp8_acc16", "int8", "fp4")
THROUGHPUT_FIELDS = {k: (_NUM, False, (0.01, 40000.0)) for k in THROUGHPUT_KEYS}
INTERCONNECT_FIELDS = {
    "scaleup": (str, False, None), "scaleup_links": (int, False, (1, 64)),
    "scaleup_gbs_per_direction": (_NUM, False, (1.0, 10000.0)),
    "pcie_gen": (int, False, (1, 7)), "pcie_lanes": (int, False, (1, 32)),
    "host_link": (str, False, None),
}
SUBTABLES = {"hierarchy": HIERARCHY_FIELDS, "throughput": THROUGHPUT_FIELDS,
             "sparse_throughput": THROUGHPUT_FIELDS, "interconnect": INTERCONNECT_FIELDS}
# values that no general datasheet states: each needs its own entry in field_sources
OWN_SOURCE_FIELDS = ("usable_memory", "usable_memory_rule", "achievable_bandwidth_fraction")
SYSTEM_FIELDS: dict[str, tuple] = {
    "id": (str, True, None), "vendor": (str, True, None), "name": (str, True, None),
    "gpu": (str, True, None), "gpu_count": (int, True, (1, 1024)),
    "gpus_per_node": (int, True, (1, 64)), "topology": (str, True, None),
    "link": (str, True, None), "link_gbs_per_direction": (_NUM, True, (1.0, 10000.0)),
    "switch_chips": (int, False, (0, 1024)), "host_memory": ("size", False, (2**30, 2**50)),
    "scaleout": (str, False, None), "note": (str, False, None), "sources": (list, True, None),
    "field_sources": (dict, False, None), "override": (bool, False, None),
}
SOURCE_FIELDS = {"id": (str, True, None), "title": (str, True, None), "url": (str, False, None),
                 "doc": (str, False, None), "publisher": (str, False, None),
                 "note": (str, False, None)}
FRACTION_FIELDS = {"memory_type": (str, True, None), "fraction": (_NUM, True, (0.3, 1.0)),
                   "note": (str, True, None), "sources": (list, True, None)}
DIFF_FIELDS = {"id": (str, True, None), "field": (str, True, None),
               "reference": (_NUM, True, None), "hwdb": (_NUM, False, None),
               "reason": (str, True, None)}
MEMORY_TYPES = ("HBM2", "HBM2e", "HBM3", "HBM3e", "GDDR6", "GDDR6X", "GDDR7", "GDDR5",
                "GDDR5X", "LPDDR5", "LPDDR5X")
TOP_KEYS = {"device", "system", "source", "achievable_bandwidth", "reference_diff", "generation"}
# capabilities of a generation the estimator checks a plan against (hwdb/generations.toml)
CAPABILITIES = ("bf16", "fp8", "flash_attention_2")
GENERATION_FIELDS = {"compute_capability": (str, True, None),
                     "max_threads_per_sm": (int, True, (32, 8192)), "sources": (list, True, None),
                     **{c: (bool, False, None) for c in CAPABILITIES}}
