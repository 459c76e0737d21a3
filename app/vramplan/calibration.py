"""Calibration: measured / estimated ratios per GPU and software version, applied on request.

Stored in a small JSON file: $VRAMPLAN_CALIBRATION, else ~/.config/vramplan/calibration.json:

    {"version": 1, "entries": {"<gpu id>|torch=2.5.1|cuda=12.4|driver=550.54": {
        "gpu": ..., "software": {...}, "samples": [{"scenario": {...}, "estimate": {...},
        "measured": {...}, "ratios": {"peak_allocated_bytes": 1.04, "activations": 1.1, ...}}]}}}

A factor is the median of its samples' ratios. `apply` scales an estimate's peaks by their
factors and re-splits the components so that they still sum to the calibrated peak; the core
estimator reads this file as data (DESIGN: measurement feeds back as data, never as an import).
"""
from __future__ import annotations

import copy
import json
import os
import statistics
from pathlib import Path

from .errors import VramplanError

PEAKS = ("peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes")
COMPONENTS = ("weights", "gradients", "optimizer_states", "activations", "kv_cache", "temporary")
GiB = 2 ** 30


def path() -> Path:
    p = os.environ.get("VRAMPLAN_CALIBRATION")
    return Path(p) if p else Path.home() / ".config" / "vramplan" / "calibration.json"


def load(file: str | Path | None = None) -> dict:
    f = Path(file) if file else path()
    if not f.exists():
        return {"version": 1, "entries": {}}
    try:
        d = json.loads(f.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise VramplanError(f"calibration file {f} is unreadable: {exc}") from None
    if not isinstance(d, dict) or not isinstance(d.get("entries"), dict):
        raise VramplanError(f"calibration file {f} is not a vramplan calibration")
    return d


def save(data: dict, file: str | Path | None = None) -> Path:
    f = Path(file) if file else path()
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(f)
    return f


def key(gpu_id: str, software: dict | None) -> str:
    s = software or {}
    return f"{gpu_id}|torch={s.get('torch')}|cuda={s.get('cuda')}|driver={s.get('driver')}"


def ratios(estimate: dict, measured: dict) -> dict[str, float]:
    """measured / estimated for every peak and component both sides report (> 0)."""
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


def record(estimate: dict, measured: dict, gpu_id: str | None = None, software: dict | None = None,
           file: str | Path | None = None) -> dict:
    """Add one (estimate, measurement) pair; returns the stored sample."""
    gpu_id = gpu_id or (measured.get("gpu") or {}).get("id") or (estimate.get("gpu") or {}).get("id")
    if not gpu_id:
        raise VramplanError("calibration needs the GPU id (the GPU is not in the hardware database)")
    if software is None:
        ms = measured.get("measure", {})
        software = {k: ms.get(k) for k in ("torch", "cuda", "driver")}
    data = load(file)
    k = key(gpu_id, software)
    entry = data["entries"].setdefault(k, {"gpu": gpu_id, "software": software, "samples": []})
    sample = {"scenario": estimate.get("scenario"),
              "estimate": {p: estimate.get("per_gpu", {}).get(p) for p in PEAKS},
              "measured": {p: measured.get("per_gpu", {}).get(p) for p in PEAKS},
              "ratios": ratios(estimate, measured)}
    entry["samples"].append(sample)
    save(data, file)
    return sample


def factors(gpu_id: str, software: dict | None = None, file: str | Path | None = None) -> dict | None:
    """Median ratios for this GPU and software; other software versions of the same GPU when
    this exact one has no samples; None when the GPU was never measured."""
    entries = load(file)["entries"]
    e = entries.get(key(gpu_id, software)) if software else None
    if e is None:
        same = [v for v in entries.values() if v.get("gpu") == gpu_id]
        if not same:
            return None
        e = {"samples": [s for v in same for s in v["samples"]]}
    out: dict[str, list] = {}
    for s in e["samples"]:
        for k, v in s["ratios"].items():
            out.setdefault(k, []).append(v)
    return {k: statistics.median(v) for k, v in out.items()}


def apply(estimate: dict, gpu_id: str | None = None, software: dict | None = None,
          file: str | Path | None = None) -> dict:
    """A copy of `estimate` (the estimate JSON) with calibrated figures and a "calibration"
    section; unchanged (calibration: null) when this GPU has no measurements."""
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


def describe(estimate: dict, gpu_id: str | None = None, software: dict | None = None,
             file: str | Path | None = None, quantity: str = "device_used_bytes") -> str:
    """'estimate 41.2 GiB, measured 43.0 GiB on this GPU, calibrated 43.1 GiB'."""
    gpu_id = gpu_id or (estimate.get("gpu") or {}).get("id")
    est = estimate["per_gpu"][quantity]
    parts = [f"estimate {est / GiB:.1f} GiB"]
    measured = None
    if gpu_id:
        for e in load(file)["entries"].values():
            if e.get("gpu") != gpu_id:
                continue
            for s in e["samples"]:
                if s.get("scenario") == estimate.get("scenario") and s["measured"].get(quantity):
                    measured = s["measured"][quantity]
    if measured is not None:
        parts.append(f"measured {measured / GiB:.1f} GiB on this GPU")
    cal = apply(estimate, gpu_id, software, file)
    if cal["calibration"]:
        parts.append(f"calibrated {cal['per_gpu'][quantity] / GiB:.1f} GiB")
    else:
        parts.append("not calibrated (no measurement on this GPU)")
    return ", ".join(parts)
