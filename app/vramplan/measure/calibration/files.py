"""Calibration JSON: the export format, the old (version 1) file format, and atomic writes.

Export (version 2), what `vramplan calibration export` writes and `import` reads:

    {"format": "vramplan-calibration", "version": 2, "exported_at": "2025-01-31T12:00:00.000+00:00",
     "samples": [{"uid": "9f0c...", "gpu": "nvidia-h100-sxm5-80gb",
                  "software": {"torch": "2.5.1", "cuda": "12.4", "driver": "550.54"},
                  "host": "node7", "recorded_at": "2025-01-30T08:15:02.114+00:00",
                  "scenario": {...}, "estimate": {"device_used_bytes": ..., ...},
                  "measured": {...}, "ratios": {"device_used_bytes": 1.04, ...}}]}

The old calibration file (version 1, ~/.config/vramplan/calibration.json before the database):

    {"version": 1, "entries": {"<gpu>|torch=..|cuda=..|driver=..": {"gpu": ..., "software": {...},
     "samples": [{"scenario": ..., "estimate": ..., "measured": ..., "ratios": {...}}]}}}

Both are read through `safejson` and checked field by field: anything unusable is one
VramplanError naming the file and the problem. Old samples get a uid derived from their content,
so importing the same file twice adds nothing.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path

from ... import safejson
from ...errors import VramplanError

FORMAT = "vramplan-calibration"
PEAKS = ("peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes")
SOFTWARE = ("torch", "cuda", "driver")


def read(file: str | Path) -> list[dict]:
    """The samples of an export or an old calibration file, validated (export shape)."""
    f = Path(file)
    what = f"calibration file {f}"
    try:
        data = f.read_bytes()
    except OSError as exc:
        raise VramplanError(f"{what}: cannot read it: {exc.strerror or exc}") from None
    if not data.strip():
        raise VramplanError(f"{what}: empty (not JSON)")
    return parse(safejson.loads(data, what), what)


def parse(d, what: str) -> list[dict]:
    if not isinstance(d, dict):
        raise VramplanError(f"{what}: not a vramplan calibration (expected a JSON object)")
    if "entries" in d:
        return _parse_v1(d, what)
    if "samples" in d:
        if d.get("format", FORMAT) != FORMAT or d.get("version", 2) != 2:
            raise VramplanError(f"{what}: format {d.get('format')!r} version {d.get('version')!r} "
                                f"is not a vramplan calibration export (version 2)")
        samples = d["samples"]
        if not isinstance(samples, list):
            raise VramplanError(f"{what}: 'samples' is not a list")
        return [sample(s, f"{what}: sample {i}", None, None) for i, s in enumerate(samples)]
    raise VramplanError(f"{what}: not a vramplan calibration (no 'samples' or 'entries')")


def _parse_v1(d: dict, what: str) -> list[dict]:
    entries = d["entries"]
    if not isinstance(entries, dict):
        raise VramplanError(f"{what}: 'entries' is not an object")
    out = []
    for k, e in entries.items():
        where = f"{what}: entry '{k}'"
        if not isinstance(e, dict):
            raise VramplanError(f"{where}: not an object")
        if "samples" not in e:
            raise VramplanError(f"{where}: 'samples' is missing")
        if not isinstance(e["samples"], list):
            raise VramplanError(f"{where}: 'samples' is not a list")
        gpu = e.get("gpu") or str(k).split("|")[0]
        for i, s in enumerate(e["samples"]):
            uid = hashlib.sha256(json.dumps([k, i, s], sort_keys=True).encode()).hexdigest()[:32]
            out.append(sample(s, f"{where}: sample {i}", gpu, e.get("software"), uid))
    return out


def sample(s, where: str, gpu=None, software=None, uid: str | None = None) -> dict:
    """One sample checked and normalised (export shape); VramplanError naming `where`."""
    if not isinstance(s, dict):
        raise VramplanError(f"{where}: not an object")
    gpu = s.get("gpu", gpu)
    if not isinstance(gpu, str) or not gpu:
        raise VramplanError(f"{where}: 'gpu' is missing or not a string")
    software = s.get("software", software)
    if software is None:
        software = {}
    if not isinstance(software, dict):
        raise VramplanError(f"{where}: 'software' is not an object")
    soft = {}
    for k in SOFTWARE:
        v = software.get(k)
        if v is not None and not isinstance(v, (str, int, float)):
            raise VramplanError(f"{where}: software '{k}' is not a version string")
        soft[k] = None if v is None else str(v)
    if "ratios" not in s:
        raise VramplanError(f"{where}: 'ratios' is missing")
    ratios = s["ratios"]
    if not isinstance(ratios, dict):
        raise VramplanError(f"{where}: 'ratios' is not an object")
    for k, v in ratios.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise VramplanError(f"{where}: ratio '{k}' is {json.dumps(v)}, not a positive number")
    peaks = {}
    for side in ("estimate", "measured"):
        v = s.get(side) or {}
        if not isinstance(v, dict):
            raise VramplanError(f"{where}: '{side}' is not an object")
        for k in PEAKS:
            b = v.get(k)
            if b is not None and (isinstance(b, bool) or not isinstance(b, (int, float)) or b < 0):
                raise VramplanError(f"{where}: {side} '{k}' is {json.dumps(b)}, not a byte count")
        peaks[side] = {k: None if v.get(k) is None else int(v[k]) for k in PEAKS}
    scenario = s.get("scenario")
    if scenario is not None and not isinstance(scenario, dict):
        raise VramplanError(f"{where}: 'scenario' is not an object")
    uid = s.get("uid", uid)
    if not isinstance(uid, str) or not uid:
        raise VramplanError(f"{where}: 'uid' is missing or not a string")
    for k in ("host", "recorded_at"):
        if s.get(k) is not None and not isinstance(s[k], str):
            raise VramplanError(f"{where}: '{k}' is not a string")
    return {"uid": uid, "gpu": gpu, "software": soft, "host": s.get("host"),
            "recorded_at": s.get("recorded_at"), "scenario": scenario,
            "estimate": peaks["estimate"], "measured": peaks["measured"],
            "ratios": {str(k): float(v) for k, v in ratios.items()}}


def export_doc(samples: list[dict], exported_at: str) -> dict:
    return {"format": FORMAT, "version": 2, "exported_at": exported_at, "samples": samples}


def write_atomic(file: str | Path, data) -> Path:
    """Write `data` as JSON to `file` all at once: a fresh temp file in the same directory
    (mkstemp: O_EXCL, never through a link planted there), fsync, os.replace, fsync the folder.
    A reader sees the old file or the new one, never half of one."""
    f = Path(file)
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    try:
        f.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{f.name}.", suffix=".tmp", dir=f.parent)
    except OSError as exc:
        raise VramplanError(f"cannot write {f}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, _mode(f))
        os.replace(tmp, f)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise VramplanError(f"cannot write {f}: {exc.strerror or exc}") from None
    try:
        dfd = os.open(f.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # some filesystems cannot fsync a folder; the data is already safe
        pass
    return f


def _mode(f: Path) -> int:
    """The replaced file's permissions, else 0o666 less the umask (what open() would give)."""
    try:
        if not f.is_symlink():
            return f.stat().st_mode & 0o777
    except OSError:
        pass
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask
