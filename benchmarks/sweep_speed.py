"""Speed of `vramplan.sweep` against the scalar loop over `estimate`, in one run.

    python benchmarks/sweep_speed.py [--quick]

For each case: a grid over every GPU of the database (x batch x checkpointing x precision ...),
timed as one `sweep()` call, against the scalar loop over `estimate` (one call per point, the
scenario given as a dict, as a script would), timed on a sample of the points; ratios are per
point. Two comparisons: memory only (`sweep()` vs `estimate(..., with_max_batch=False)`) and
with each point's max batch (`sweep(with_max_batch=True)` vs `estimate()`, the default). Then
the max batch per GPU (`sweep.max_batch`) against `estimate(...).max_batch_size` on every
GPU. The sampled points are checked against the sweep to the byte (device used, fit, max
batch). Targets: >= 100x the scalar loop; goal 1e6 points/s.

The ceiling table bounds any sweep that stays exact by calling the workload's footprint once per
grid point and distinct device answer (training: two, the pre-Ampere software stack and the
rest): GPUs x scalar time / (footprints per point x footprint time). Past it, the footprint
itself has to evaluate many batch values per call (numpy over the batch axis inside each
workload's footprint), which no module of sweep/ can do without a second memory model.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

from vramplan.estimate import estimate  # noqa: E402
from vramplan.hardware import default_db  # noqa: E402
from vramplan.hardware import get_gpu, traits_of  # noqa: E402
from vramplan.scenario import Scenario  # noqa: E402
from vramplan.sweep import max_batch, sweep  # noqa: E402
from vramplan.sweep.engine import spec_of  # noqa: E402
from vramplan.workloads.dispatch import footprint as workload_footprint  # noqa: E402

CASES = {
    "decoder train (Llama-3.1-8B)": (
        {"model": "meta-llama/Llama-3.1-8B", "task": "train", "seq_len": 2048},
        {"batch_size": "1..64", "checkpointing": "all", "precision": "bf16-mixed,bf16"}),
    "decoder lora (Qwen2.5-7B)": (
        {"model": "Qwen/Qwen2.5-7B", "task": "lora"},
        {"batch_size": "1..32", "seq_len": "512,1024,2048,4096"}),
    "encoder train (bert-large)": (
        {"model": "bert-large-uncased", "task": "train", "seq_len": 512},
        {"batch_size": "1..64", "precision": "fp32,fp16-mixed"}),
    "diffusion denoise (SDXL)": (
        {"model": "stabilityai/stable-diffusion-xl-base-1.0", "task": "denoise"},
        {"batch_size": "1..16", "resolution": "512x512,768x768,1024x1024"}),
    "cnn train (resnet50)": (
        {"model": "torchvision/resnet50", "task": "train"},
        {"batch_size": "1..64:x2", "precision": "fp32,bf16-mixed"}),
    "volume": ({"task": "volume"}, {"batch_size": "1..8", "resolution": "128..1024:x2"}),
}


def footprint_per_call(base, rows, k=60, seed=1):
    """Mean seconds of the workload's footprint function alone (the scenario built and the
    GPU's traits looked up beforehand) over k sampled rows: what one sweep point costs at
    least per distinct footprint."""
    rng = random.Random(seed)
    calls = []
    for row in rng.sample(rows, min(k, len(rows))):
        d = {**base, **{kk: v for kk, v in row.items() if kk in AXES}, "gpu": row["gpu"]}
        try:
            sc = Scenario.from_dict(d)
        except Exception:
            continue
        calls.append((sc, spec_of(sc), traits_of(get_gpu(row["gpu"]))))
    t = time.perf_counter()
    for sc, spec, tr in calls:
        try:
            workload_footprint(sc, spec, tr)
        except Exception:
            pass
    return (time.perf_counter() - t) / max(1, len(calls))


def scalar_per_point(base, rows, k, with_max_batch=False, seed=0):
    """Mean seconds of one scalar estimate over k sampled rows, and the mismatches."""
    rng = random.Random(seed)
    sample = rng.sample(rows, min(k, len(rows)))
    bad = 0
    t = time.perf_counter()
    for row in sample:
        d = {**base, **{kk: v for kk, v in row.items() if kk in AXES}, "gpu": row["gpu"]}
        try:
            e = estimate(d, with_max_batch=with_max_batch)
        except Exception:
            bad += "error" not in row
            continue
        bad += ("error" in row or e.device_used_bytes != row["device_used_bytes"]
                or e.fits != row["fits"]
                or (with_max_batch and e.max_batch_size != row["max_batch_size"]))
    return (time.perf_counter() - t) / len(sample), bad, len(sample)


AXES: set = set()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sampled scalar points")
    a = ap.parse_args()
    k = 150 if a.quick else 600
    ids = [d.id for d in default_db().devices]
    print(f"{len(ids)} GPUs in the database\n")
    print(f"{'case':30s} {'points':>7s} | {'memory only: points/s':>21s} {'scalar us':>9s} "
          f"{'ratio':>6s} | {'with max batch: points/s':>24s} {'scalar us':>9s} "
          f"{'ratio':>6s} | {'checked':>7s}")
    bounds = []
    for name, (base, vary) in CASES.items():
        AXES.clear()
        AXES.update(vary)
        sweep(base, {**vary, "gpu": ids[:2]})   # warm the caches (catalog, layer graphs) that
        # the scalar loop below shares; the engine learns the other GPUs in the timed run
        out = []
        checked = 0
        for mb in (False, True):
            t = time.perf_counter()
            r = sweep(base, {**vary, "gpu": "all"}, with_max_batch=mb)
            dt = time.perf_counter() - t
            if not mb:
                r0 = r
            per, bad, n = scalar_per_point(base, list(r.rows()), k // (4 if mb else 1), mb)
            out.append((r.size / dt, per * 1e6, per / (dt / r.size)))
            checked += n - bad
            total = checked if mb else None
        (a, b, c), (d, e, f) = out
        print(f"{name:30s} {r.size:7d} | {a:21.0f} {b:9.1f} {c:6.0f} | {d:24.0f} {e:9.1f} "
              f"{f:6.0f} | {total:3d}/{k + k // 4}")
        rows = list(r0.rows())
        groups = r0.footprint_calls / len(r0.points)
        fp_us = footprint_per_call(base, rows) * 1e6
        bounds.append((name, groups, fp_us, out[0][1], len(ids) * out[0][1] / (groups * fp_us)))
    print("\nceiling of an exact sweep that calls the footprint once per (point, distinct "
          "device answer):\n  GPUs x scalar us / (footprints per point x footprint us)")
    print(f"  {'case':30s} {'footprints/point':>16s} {'footprint us':>12s} {'scalar us':>9s} "
          f"{'ceiling':>8s}")
    for name, groups, fp_us, sc_us, ceil in bounds:
        print(f"  {name:30s} {groups:16.2f} {fp_us:12.1f} {sc_us:9.1f} {ceil:7.0f}x")
    print("\nmax batch on every GPU (sweep.max_batch vs estimate(...).max_batch_size):")
    for name, (base, _) in list(CASES.items())[:3] + [list(CASES.items())[4]]:
        d = {**base, "gpu": ids[0]}
        max_batch(d, gpus=ids[:2])
        t = time.perf_counter()
        mb = max_batch(d, gpus=ids)
        dt = time.perf_counter() - t
        t = time.perf_counter()
        ref = [estimate({**base, "gpu": g}).max_batch_size for g in ids]
        dt_ref = time.perf_counter() - t
        same = sum(int(x) == y for x, y in zip(mb, ref))
        print(f"  {name:30s} {dt * 1e3:8.1f} ms vs {dt_ref * 1e3:8.1f} ms  "
              f"({dt_ref / dt:5.1f}x), equal on {same}/{len(ids)} GPUs")


if __name__ == "__main__":
    main()
