"""Calibration: measured / estimated ratios per GPU and software version, applied on request.

Every measurement (`vramplan measure --calibrate`) is one row of an SQLite database
(store.py: WAL journal, busy timeout, so concurrent writers lose nothing; files.py: the JSON
export and the old file format, atomic writes). Where:

    --calibration PATH (measure, calibration)  >  $VRAMPLAN_CALIBRATION  >
    ~/.config/vramplan/calibration.db

Point several machines or users at one file to pool their measurements (a local disk or a
filesystem with working locks; over NFS merge exports instead: `vramplan calibration export` /
`import`, each sample is added once). The old JSON file (~/.config/vramplan/calibration.json) is
imported once when the database is first written, and a JSON file (an export or the old format)
named by $VRAMPLAN_CALIBRATION is read as it is (read only). An unwritable or missing home
directory leaves calibration working read only / in memory, and `status()["notice"]` says so.

A factor is the median of its samples' ratios: the samples of this GPU and exact software
(torch, CUDA, driver), else of every software version of the GPU. `apply` scales an estimate's
peaks by their factors and re-splits the components so that they still sum to the calibrated
peak; the core estimator reads this as data (DESIGN: measurement feeds back as data, never as an
import).
"""
from __future__ import annotations

import copy
import datetime
import json
import os
import socket
import statistics
import uuid
from contextlib import contextmanager
from pathlib import Path

from ...errors import VramplanError
from ...result import MemoryReport
from ...units import format_size
from ...vocab import COMPONENTS
from . import files, store

PEAKS = files.PEAKS
SOFTWARE = files.SOFTWARE
GiB = 2 ** 30
ENV = "VRAMPLAN_CALIBRATION"


def _resolve(file=None) -> tuple[Path, Path | None, str | None]:
    """(database path, old JSON file to migrate, why no file can be used)."""
    if file:
        return Path(file), None, None
    env = os.environ.get(ENV)
    if env:
        return Path(env), None, None
    try:
        home = Path.home()
    except (RuntimeError, KeyError):
        home = None
    if home is None or not home.is_dir():
        what = f"home directory {home} does not exist" if home else "no home directory"
        return (Path("~/.config/vramplan/calibration.db"), None,
                f"{what}: calibration is kept in memory for this run only "
                f"(set {ENV} to a writable file)")
    d = home / ".config" / "vramplan"
    return d / "calibration.db", d / "calibration.json", None


def path() -> Path:
    """The calibration database: $VRAMPLAN_CALIBRATION, else ~/.config/vramplan/calibration.db."""
    return _resolve()[0]


@contextmanager
def _store(file=None, write: bool = False):
    p, legacy, unavailable = _resolve(file)
    st = store.open_store(p, write=write, legacy=legacy, unavailable=unavailable)
    try:
        yield st
    finally:
        st.close()


def status(file=None) -> dict:
    """{"path", "mode": "read-write" | "read-only" | "memory", "samples", "notice"}."""
    with _store(file) as st:
        return {"path": str(_resolve(file)[0]), "mode": st.mode, "samples": st.count(),
                "notice": st.notice}


def samples(gpu_id: str | None = None, file=None) -> list[dict]:
    """Every stored sample (export shape), oldest first."""
    with _store(file) as st:
        return st.samples(gpu_id)


def load(file: str | Path | None = None) -> dict:
    """The stored samples in the old file layout: {"version": 1, "entries": {key: {"gpu",
    "software", "samples": [...]}}}."""
    entries: dict = {}
    for s in samples(file=file):
        e = entries.setdefault(key(s["gpu"], s["software"]),
                               {"gpu": s["gpu"], "software": s["software"], "samples": []})
        e["samples"].append({k: s[k] for k in ("scenario", "estimate", "measured", "ratios")})
    return {"version": 1, "entries": entries}


def save(data: dict, file: str | Path) -> Path:
    """Write `data` as a JSON file atomically (files.write_atomic)."""
    return files.write_atomic(file, data)


def export(dest: str | Path, gpu_id: str | None = None, file=None) -> int:
    """Write the stored samples (of one GPU, or all) to `dest` as a version-2 JSON export;
    returns how many."""
    got = samples(gpu_id, file)
    files.write_atomic(dest, files.export_doc(got, _now()))
    return len(got)


def import_file(src: str | Path, file=None) -> tuple[int, int]:
    """Add the samples of an export or an old calibration file; (added, already there)."""
    got = files.read(src)
    with _store(file, write=True) as st:
        added = st.add(got)
    return added, len(got) - added


def key(gpu_id: str, software: dict | None) -> str:
    s = software or {}
    return f"{gpu_id}|torch={s.get('torch')}|cuda={s.get('cuda')}|driver={s.get('driver')}"


def _json(report) -> dict:
    """A MemoryReport (estimate, trace, measure) as its JSON; a dict as it is."""
    return report.to_dict() if isinstance(report, MemoryReport) else report


def ratios(estimate, measured) -> dict[str, float]:
    """measured / estimated for every peak and component both sides report (> 0); either side a
    MemoryReport or its JSON."""
    estimate, measured = _json(estimate), _json(measured)
    e, m = estimate.get("per_gpu", estimate), measured.get("per_gpu", measured)
    out = {}
    for k in PEAKS:
        if e.get(k) and m.get(k):
            out[k] = m[k] / e[k]
    ec, mc = e.get("components", {}), m.get("components", {})
    for k in COMPONENTS:
        if ec.get(k) and mc.get(k):
            out[k] = mc[k] / ec[k]
    return out


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def record(estimate, measured, gpu_id: str | None = None, software: dict | None = None,
           file: str | Path | None = None) -> dict:
    """Add one (estimate, measurement) pair (MemoryReports or their JSON) as one row; returns
    the stored sample."""
    estimate, measured = _json(estimate), _json(measured)
    gpu_id = gpu_id or (measured.get("gpu") or {}).get("id") or (estimate.get("gpu") or {}).get("id")
    if not gpu_id:
        raise VramplanError("calibration needs the GPU id (the GPU is not in the hardware database)")
    if software is None:
        ms = measured.get("measure", {})
        software = {k: ms.get(k) for k in SOFTWARE}
    raw = {"uid": uuid.uuid4().hex, "gpu": gpu_id, "software": software,
           "host": socket.gethostname(), "recorded_at": _now(),
           "scenario": estimate.get("scenario"),
           "estimate": {p: estimate.get("per_gpu", {}).get(p) for p in PEAKS},
           "measured": {p: measured.get("per_gpu", {}).get(p) for p in PEAKS},
           "ratios": ratios(estimate, measured)}
    sample = files.sample(json.loads(json.dumps(raw, default=str)), "calibration sample")
    with _store(file, write=True) as st:
        st.add([sample])
    return sample


def _same_software(s: dict, software: dict) -> bool:
    return all(s["software"].get(k) == (None if software.get(k) is None else str(software.get(k)))
               for k in SOFTWARE)


def factors(gpu_id: str, software: dict | None = None, file: str | Path | None = None) -> dict | None:
    """Median ratios for this GPU and software; other software versions of the same GPU when
    this exact one has no samples; None when the GPU was never measured."""
    same = samples(gpu_id, file)
    if not same:
        return None
    exact = [s for s in same if _same_software(s, software)] if software else []
    out: dict[str, list] = {}
    for s in exact or same:
        for k, v in s["ratios"].items():
            out.setdefault(k, []).append(v)
    return {k: statistics.median(v) for k, v in out.items()}


def apply(estimate, gpu_id: str | None = None, software: dict | None = None,
          file: str | Path | None = None) -> dict:
    """A copy of `estimate`'s JSON (an Estimate or its dict) with calibrated figures and a
    "calibration" section; unchanged (calibration: null) when this GPU has no measurements."""
    estimate = _json(estimate)
    out = copy.deepcopy(estimate)
    gpu_id = gpu_id or (estimate.get("gpu") or {}).get("id")
    f = factors(gpu_id, software, file) if gpu_id else None
    out["calibration"] = None
    if not f:
        return out
    pg = out["per_gpu"]
    comps = pg["components"]
    for k in COMPONENTS:
        if k in f and comps.get(k):
            comps[k] = int(round(comps[k] * f[k]))
    alloc = int(round(pg["peak_allocated_bytes"] * f.get("peak_allocated_bytes", 1.0)))
    live = [k for k in comps if k not in ("cuda_context", "allocator_slack")]
    total = sum(comps[k] for k in live)
    if total:
        for k in live:
            comps[k] = int(comps[k] * alloc / total)
        comps[live[0]] += alloc - sum(comps[k] for k in live)
    res = max(alloc, int(round(pg["peak_reserved_bytes"] * f.get("peak_reserved_bytes", 1.0))))
    used = max(res, int(round(pg["device_used_bytes"] * f.get("device_used_bytes", 1.0))))
    comps["allocator_slack"] = res - alloc
    comps["cuda_context"] = used - res
    pg.update(peak_allocated_bytes=alloc, peak_reserved_bytes=res, device_used_bytes=used)
    out["calibration"] = {"gpu": gpu_id, "software": software, "factors": f,
                          "estimate_device_used_bytes": estimate["per_gpu"]["device_used_bytes"]}
    if estimate.get("headroom_bytes") is not None:
        usable = estimate["per_gpu"]["device_used_bytes"] + estimate["headroom_bytes"]
        out["headroom_bytes"] = usable - used
        out["fits"] = out["headroom_bytes"] >= 0
    return out


def _plain(v):
    return json.loads(json.dumps(v, sort_keys=True))


def describe(estimate, gpu_id: str | None = None, software: dict | None = None,
             file: str | Path | None = None, quantity: str = "device_used_bytes") -> str:
    """'estimate 41.20 GiB, measured 43.00 GiB on this GPU, calibrated 43.10 GiB' (sizes as
    every text writes them, `units.format_size`; then the store's notice, when it is read only
    or in memory)."""
    estimate = _json(estimate)
    gpu_id = gpu_id or (estimate.get("gpu") or {}).get("id")
    est = estimate["per_gpu"][quantity]
    parts = [f"estimate {format_size(est)}"]
    measured = None
    if gpu_id:
        scn = _plain(estimate.get("scenario"))
        for s in samples(gpu_id, file):
            if s["scenario"] == scn and s["measured"].get(quantity):
                measured = s["measured"][quantity]
    if measured is not None:
        parts.append(f"measured {format_size(measured)} on this GPU")
    cal = apply(estimate, gpu_id, software, file)
    if cal["calibration"]:
        parts.append(f"calibrated {format_size(cal['per_gpu'][quantity])}")
    else:
        parts.append("not calibrated (no measurement on this GPU)")
    text = ", ".join(parts)
    notice = status(file)["notice"]
    return f"{text} ({notice})" if notice else text
