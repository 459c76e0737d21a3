"""The links a GPU talks over, one table for the estimate and the advisor: its host link from
the hardware database's `interconnect` (`pcie_gen`, `pcie_lanes`, `host_link`) in GB/s per
direction, and the stated defaults the advisor's cluster and communication costs fall back on
where the database names no system (advisor/comm.py). Each figure has its source beside it.

PCI-SIG: 8 / 16 / 32 / 64 GT/s per lane for Gen 3 / 4 / 5 / 6 with 128b/130b encoding (Gen 6
FLIT ~242/256): 0.985 / 1.969 / 3.938 / 7.563 GB/s per lane and direction. NVLink-C2C (GH200 /
GB200 datasheets): 900 GB/s bidirectional, 450 GB/s per direction.
"""
from __future__ import annotations

PCIE_GBS_PER_LANE = {3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
PCIE_SOURCE = ("PCI-SIG: 8 / 16 / 32 / 64 GT/s per lane (Gen 3 / 4 / 5 / 6), 128b/130b "
               "encoding (Gen 6: FLIT, ~242/256): GB/s per lane and direction")
C2C_GBS_PER_DIRECTION = 450.0
C2C_SOURCE = "NVIDIA GH200 / GB200 datasheets: NVLink-C2C 900 GB/s bidirectional CPU-GPU"

SCALEOUT_GBS_PER_GPU = 50.0
SCALEOUT_SOURCE = ("NVIDIA DGX H100 user guide: eight 400 Gb/s ConnectX-7 ports, one per GPU "
                   "(50 GB/s per direction), for rings that leave a node of 8")
GPUS_PER_NODE = 8
GPUS_PER_NODE_SOURCE = ("DGX / HGX A100, H100, H200, B200 nodes hold 8 GPUs on NVLink (hwdb "
                        "systems.toml)")
NO_P2P_NAMES = ("GeForce",)
NO_P2P_SOURCE = ("NVIDIA's driver does not enable PCIe peer-to-peer between GeForce cards "
                 "(RTX 4090: NCCL falls back to its SHM transport through host memory; "
                 "tinygrad/open-gpu-kernel-modules README: P2P on the 4090 needs a patched "
                 "kernel module)")
HOST_STAGED_SHARE = 0.5
HOST_STAGED_SOURCE = ("assumption: through host memory every byte crosses PCIe twice (GPU -> "
                      "host, host -> GPU) with a copy in between (NCCL SHM transport), so half "
                      "the PCIe rate per direction is taken; measure it (nccl-tests "
                      "all_reduce_perf)")


def host_link(dev) -> tuple[float | None, str | None]:
    """(GB/s per direction, name) of the device's host link; (None, None) when unknown."""
    ic = getattr(dev, "interconnect", None) or {}
    if "c2c" in str(ic.get("host_link", "")).lower():
        return C2C_GBS_PER_DIRECTION, "NVLink-C2C"
    gen, lanes = ic.get("pcie_gen"), ic.get("pcie_lanes")
    per = PCIE_GBS_PER_LANE.get(int(gen)) if gen else None
    if per is None or not lanes:
        return None, None
    return per * int(lanes), f"PCIe Gen{gen} x{lanes}"
