"""The hardware database: load and validate hwdb/*.toml, look devices up by id, alias or NVML name.

Data lives in `vramplan/hwdb/` (TOML, one `[[device]]` table per accelerator, sources in
`sources.toml`, per-generation facts in `generations.toml`); hwdb/README.md documents the schema,
units and conventions. A user database ($VRAMPLAN_HWDB or `--hwdb PATH`, file or directory) goes
through the same validation and is merged; a device id that clashes with a built-in one is an
error unless it says `override = true`.

- `model.py`: Device, System, Source, DeviceTraits (what the estimator reads of a device);
- `schema.py`: the fields each table takes, their types and ranges;
- `load.py`: parsing and validation (`toml_cache.py`: the parsed files kept as JSON, keyed by
  their bytes); `db.py`: HardwareDB and the lookups.
"""
from __future__ import annotations

from .db import (HardwareDB, builtin_path, default_db, get_gpu, load_hwdb,  # noqa: F401
                 set_extra_path)
from .model import Device, DeviceTraits, Source, System, traits_of  # noqa: F401
from .schema import ENV_VAR, THROUGHPUT_KEYS  # noqa: F401

__all__ = ["HardwareDB", "Device", "DeviceTraits", "System", "Source", "builtin_path",
           "default_db", "get_gpu", "load_hwdb", "set_extra_path", "traits_of", "ENV_VAR",
           "THROUGHPUT_KEYS"]
