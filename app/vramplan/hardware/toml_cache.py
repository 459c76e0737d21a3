"""A parse cache for the hwdb TOML files: each file's parsed tables kept as JSON, so a new
kernel skips the pure-Python `tomllib` (issue 19.6: ~0.43 s of the planner kernel's start,
measured with cProfile at load 10; benchmarks/hwdb_load.py prints cold vs warm).

- The key is sha256(format number, package version, the file's bytes): any edit of the file,
  or a new vramplan, misses. The cached file is JSON, never pickle; it holds only what the
  parse gave (dict / list / str / int / float / bool); a file whose tables hold anything
  else (a TOML date) is not cached.
- Where: `VRAMPLAN_HWDB_CACHE` (a folder, or `off` / `0` to parse every time), else
  `hwdb/` under `VRAMPLAN_CACHE_DIR`, `$XDG_CACHE_HOME/vramplan` or `~/.cache/vramplan`.
  The folder must be this user's and not writable by others; else no cache.
- Any problem with the cache (no home, a read-only folder, a corrupt or foreign file) falls
  back to parsing silently; a corrupt entry is rewritten. The validation in hardware/load.py
  runs on the tables whichever way they came.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import tomllib
from pathlib import Path

from .. import __version__, safejson
from ..errors import VramplanError
from ..user_cache import private_dir as _private_dir

FORMAT = 1                     # bump when what a cache entry holds changes
ENV = "VRAMPLAN_HWDB_CACHE"
OFF = ("off", "0", "no", "false")


def cache_dir() -> Path | None:
    """The cache folder (created if needed), or None: disabled, or none usable."""
    env = os.environ.get(ENV)
    if env is not None and env.strip().lower() in OFF:
        return None
    if env:
        return _private_dir(Path(env))
    base = os.environ.get("VRAMPLAN_CACHE_DIR")
    if base:
        return _private_dir(Path(base) / "hwdb")
    xdg = os.environ.get("XDG_CACHE_HOME")
    try:
        root = Path(xdg) / "vramplan" if xdg else Path.home() / ".cache" / "vramplan"
    except RuntimeError:           # no home directory to be found
        return None
    return _private_dir(root / "hwdb")


def key(data: bytes) -> str:
    """The cache key of a file's bytes (format number and package version included)."""
    h = hashlib.sha256(f"vramplan-hwdb-{FORMAT}-{__version__}\n".encode())
    h.update(data)
    return h.hexdigest()


def loads(data: bytes, text: str) -> dict:
    """`tomllib.loads(text)` (text: `data` decoded), read from the cache when there;
    tomllib.TOMLDecodeError and RecursionError pass through as from tomllib."""
    folder = cache_dir()
    if folder is None:
        return tomllib.loads(text)
    k = key(data)
    path = folder / f"{k}.json"
    hit = _read(path, k)
    if hit is not None:
        return hit
    parsed = tomllib.loads(text)
    if _plain(parsed, 0):
        _write(path, {"format": FORMAT, "key": k, "data": parsed})
    return parsed


def _read(path: Path, k: str) -> dict | None:
    """The tables cached at `path` under key `k`, or None (absent, unreadable, corrupt)."""
    try:
        entry = safejson.loads(path.read_bytes(), f"hwdb cache {path.name}")
    except (OSError, ValueError, RecursionError, VramplanError):
        return None
    if (isinstance(entry, dict) and entry.get("format") == FORMAT and entry.get("key") == k
            and isinstance(entry.get("data"), dict)):
        return entry["data"]
    return None


def _write(path: Path, entry: dict) -> None:
    """Write `entry` as JSON to `path` atomically (a temporary file, then os.replace);
    silently nothing when the folder refuses."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
        os.replace(tmp, path)
        tmp = None
    except (OSError, ValueError, TypeError, RecursionError):
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _plain(v, depth: int) -> bool:
    """Whether `v` survives a JSON round trip unchanged (no dates, str keys only)."""
    if depth > 64:
        return False
    if isinstance(v, dict):
        return all(isinstance(k, str) and _plain(x, depth + 1) for k, x in v.items())
    if isinstance(v, list):
        return all(_plain(x, depth + 1) for x in v)
    return isinstance(v, (str, int, float, bool))
