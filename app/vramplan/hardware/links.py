"""The link between a GPU and its host, from the hardware database's `interconnect`
(`pcie_gen`, `pcie_lanes`, `host_link`): GB/s per direction and its name.

PCI-SIG: 8 / 16 / 32 / 64 GT/s per lane for Gen 3 / 4 / 5 / 6 with 128b/130b encoding (Gen 6
FLIT ~242/256): 0.985 / 1.969 / 3.938 / 7.563 GB/s per lane and direction. NVLink-C2C (GH200 /
GB200 datasheets): 900 GB/s bidirectional, 450 GB/s per direction. The advisor's cost table
(advisor/data/costs.toml `[links]`) states the same figures with the same sources.
"""
from __future__ import annotations

PCIE_GBS_PER_LANE = {3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
C2C_GBS_PER_DIRECTION = 450.0


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
