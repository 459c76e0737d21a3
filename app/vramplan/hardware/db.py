"""HardwareDB and the lookups (default database, get_gpu, user paths)."""
from __future__ import annotations

import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Iterable

from ..errors import HwdbError, UnknownIdError
from ..units import GB, parse_bytes, parse_rate
from .load import build, read_tree
from .model import Device, Source, System, squash
from .schema import ENV_VAR


class HardwareDB:
    """Devices, systems and sources, with lookup by id / alias / NVML name."""

    def __init__(self, devices, systems, sources, reference_diffs=(), files=()):
        self.devices: list[Device] = list(devices)
        self.systems: list[System] = list(systems)
        self.sources: dict[str, Source] = dict(sources)
        self.reference_diffs: list[dict] = list(reference_diffs)
        self.files: list[str] = list(files)
        self._index: dict[str, Device] = {}
        for d in self.devices:
            for key in (d.id, d.name, *d.aliases):
                self._index.setdefault(key.lower().strip(), d)
                self._index.setdefault(squash(key), d)

    def __len__(self) -> int:
        return len(self.devices)

    def __iter__(self):
        return iter(self.devices)

    @property
    def ids(self) -> list[str]:
        return [d.id for d in self.devices]

    def get(self, name: str) -> Device:
        """By id, name, alias or NVML name; case-insensitive, 'NVIDIA ' prefix optional."""
        if isinstance(name, Device):
            return name
        key = str(name).strip()
        dev = self._index.get(key.lower()) or self._index.get(squash(key))
        if dev is None:
            raise UnknownIdError("GPU", key, self.ids)
        return dev

    def match(self, name: str | None, memory_bytes: int | None = None) -> Device | None:
        """The device a driver reports (NVML / torch name and total memory), or None.

        `get(name)` when the name is known; otherwise the devices one of whose id, name or
        aliases is contained in the reported name ('NVIDIA H100 80GB HBM3e' holds 'H100 80GB
        HBM3'), the longest such key first, then the one whose usable memory (the driver's
        total, hwdb/README.md) is closest to `memory_bytes`."""
        if not name or not str(name).strip():
            return None
        try:
            return self.get(str(name))
        except UnknownIdError:
            pass
        want = squash(str(name))
        best = None
        for d in self.devices:
            keys = [k for k in (squash(x) for x in (d.id, d.name, *d.aliases))
                    if len(k) >= 3 and k in want]
            if not keys:
                continue
            gap = abs(d.usable_bytes - memory_bytes) if memory_bytes else 0
            rank = (-max(len(k) for k in keys), gap, d.id)
            if best is None or rank < best[0]:
                best = (rank, d)
        return best[1] if best else None

    def get_system(self, name: str) -> System:
        for s in self.systems:
            if s.id.lower() == str(name).strip().lower():
                return s
        raise UnknownIdError("system", str(name), [s.id for s in self.systems])

    def filter(self, vendor: str | None = None, min_memory: int | str | None = None,
               min_bandwidth: float | str | None = None) -> list[Device]:
        """Devices of `vendor` (case-insensitive, prefix ok) with at least `min_memory` nominal
        bytes (int or text like '40GiB') and `min_bandwidth` (bytes/s or text like '2 TB/s')."""
        mem = parse_bytes(min_memory) if min_memory is not None else None
        bw = parse_rate(min_bandwidth) if min_bandwidth is not None else None
        out = []
        for d in self.devices:
            if vendor and not d.vendor.lower().startswith(vendor.strip().lower()):
                continue
            if mem is not None and d.memory_bytes < mem:
                continue
            if bw is not None and d.bandwidth_gbs * GB < bw * (1 - 1e-9):
                continue
            out.append(d)
        return out

    @property
    def vendors(self) -> list[str]:
        return sorted({d.vendor for d in self.devices})


# ---------------------------------------------------------------- loading
_extra_path: str | None = None


def builtin_path():
    """The shipped hwdb directory (a Traversable: works from wheel, editable install, checkout)."""
    return resources.files("vramplan") / "hwdb"


def set_extra_path(path: str | os.PathLike | None) -> None:
    """Add a user database (file or directory) on top of the built-in one (`--hwdb PATH`)."""
    global _extra_path
    _extra_path = os.fspath(path) if path is not None else None
    _cached_db.cache_clear()


def default_db() -> HardwareDB:
    """The built-in database plus $VRAMPLAN_HWDB and set_extra_path(), parsed once."""
    return _cached_db(os.environ.get(ENV_VAR) or None, _extra_path)


@lru_cache(maxsize=4)
def _cached_db(env: str | None, extra: str | None) -> HardwareDB:
    return load_hwdb(None, [p for p in (env, extra) if p])


def get_gpu(name: str) -> Device:
    """A device from the default database by id / alias / NVML name; UnknownIdError if none."""
    return default_db().get(name)


def load_hwdb(path=None, extra_paths: Iterable | None = None) -> HardwareDB:
    """Load and validate `path` (default: the built-in hwdb) plus extra user paths
    (default: $VRAMPLAN_HWDB and set_extra_path()). Raises HwdbError on any defect."""
    if extra_paths is None:
        extra_paths = [p for p in (os.environ.get(ENV_VAR), _extra_path) if p]
    files: list[tuple[str, dict, bool]] = []   # (label, parsed, user)
    base = builtin_path() if path is None else Path(path)
    label = "hwdb" if path is None else str(base)
    files += [(lbl, data, False) for lbl, data in read_tree(base, label)]
    for p in extra_paths:
        p = Path(p)
        if not p.exists():
            raise HwdbError(str(p), None, None, "no such file or directory")
        files += [(label, data, True) for label, data in read_tree(p, str(p))]
    return HardwareDB(*build(files))
