"""Speed of `vramplan.sweep` against the scalar loop over `estimate`, in one run.

    python benchmarks/sweep_speed.py [--quick] [--out FILE]

For each case: a grid over every GPU of the database (x batch x checkpointing x precision ...),
timed as one `sweep()` call, against the scalar loop over `estimate` (one call per point, the
scenario given as a dict, as a script would), timed on a sample of the points; ratios are per
point. Two comparisons: memory only (`sweep()` vs `estimate(..., with_max_batch=False)`) and
with each point's max batch (`sweep(with_max_batch=True)` vs `estimate()`, the default). Then
the max batch per GPU (`sweep.max_batch`) against `estimate(...).max_batch_size` on every
GPU. The sampled points are checked against the sweep to the byte (device used, fit, max
batch). Targets: >= 100x the scalar loop and >= 1e6 points/s.

The sweep calls each workload's footprint once per (grid point without the batch, GPU group)
with the whole batch axis as one int64 array (`vramplan.vec`: the estimator's own functions,
array-transparent), so a point costs a fraction of one footprint call. The cases named "big"
are grids of the size a planner sweeps (every GPU x hundreds of batch values x sequence
lengths or precisions); the small cases are the first benchmark's, kept for comparison. The
second table says, per case, how many footprint calls the grid took, how many (grid point,
GPU group) pairs went as one array and which fell back to one call per batch value, and why.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

from vramplan.estimate import MAX_BATCH_CAP, estimate  # noqa: E402
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
    "big: decoder train (Llama-3.1-8B)": (
        {"model": "meta-llama/Llama-3.1-8B", "task": "train"},
        {"batch_size": "1..256", "seq_len": "512..8192:+512", "checkpointing": "all"}),
    "big: decoder lora (Qwen2.5-7B)": (
        {"model": "Qwen/Qwen2.5-7B", "task": "lora"},
        {"batch_size": "1..256", "seq_len": "512..8192:+512"}),
    "big: cnn train (resnet50)": (
        {"model": "torchvision/resnet50", "task": "train"},
        {"batch_size": "1..512", "precision": "fp32,bf16-mixed"}),
    "big: vit train (vit_b_16)": (
        {"model": "torchvision/vit_b_16", "task": "train"},
        {"batch_size": "1..256", "precision": "fp32,bf16-mixed", "checkpointing": "none,full"}),
    "big: diffusion denoise (SDXL)": (
        {"model": "stabilityai/stable-diffusion-xl-base-1.0", "task": "denoise"},
        {"batch_size": "1..64", "resolution": "512x512,768x768,1024x1024"}),
    "big: volume": ({"task": "volume"}, {"batch_size": "1..64", "resolution": "64..1024:x2"}),
}


def timed(fn, *args, **kwargs):
    """(fn(*args, **kwargs), the seconds it took): the one timing of this benchmark."""
    t = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - t


def each(fn, items) -> list:
    """fn(item) for every item; where a call raises, its exception stands in its place."""
    out = []
    for x in items:
        try:
            out.append(fn(x))
        except Exception as exc:
            out.append(exc)
    return out


def point(base, row) -> dict:
    """The scenario of a sampled row, as a script would give it to `estimate`."""
    return {**base, **{kk: v for kk, v in row.items() if kk in AXES}, "gpu": row["gpu"]}


def footprint_per_call(base, rows, k=60):
    """Mean seconds of the workload's footprint function alone, one batch value per call (the
    scenario built and the GPU's traits looked up beforehand), over k sampled rows."""
    calls = []
    for row in rows[:k]:
        try:
            sc = Scenario.from_dict(point(base, row))
        except Exception:
            continue
        calls.append((sc, spec_of(sc), traits_of(get_gpu(row["gpu"]))))
    _, dt = timed(each, lambda call: workload_footprint(*call), calls)
    return dt / max(1, len(calls))


def sampled_rows(r, k, seed=0) -> list[dict]:
    """k rows of a sweep result drawn at random (the rows built for those points only: a big
    grid has too many to list)."""
    rng = random.Random(seed)
    n = len(r.gpus)
    out = []
    for i in sorted(rng.sample(range(r.size), min(k, r.size))):
        p, c = divmod(i, n)
        row = {**r.points[p], "gpu": r.gpus[c]}
        if (p, c) in r.errors:
            row["error"] = r.errors[(p, c)]
        else:
            row.update(device_used_bytes=int(r.used[p, c]), fits=bool(r.fits[p, c]))
            if r.max_batch is not None:
                mb = int(r.max_batch[p, c])
                row["max_batch_size"] = None if mb >= MAX_BATCH_CAP else mb
        out.append(row)
    return out


def scalar_per_point(base, sample, with_max_batch=False):
    """Mean seconds of one scalar estimate over the sampled rows, and the mismatches."""
    got, dt = timed(each, lambda row: estimate(point(base, row), with_max_batch=with_max_batch),
                    sample)
    bad = 0
    for row, e in zip(sample, got):
        if isinstance(e, Exception):
            bad += "error" not in row
            continue
        bad += ("error" in row or e.device_used_bytes != row["device_used_bytes"]
                or e.fits != row["fits"]
                or (with_max_batch and e.max_batch_size != row["max_batch_size"]))
    return dt / len(sample), bad, len(sample)


AXES: set = set()
WARM = ["nvidia-v100-sxm2-32gb", "nvidia-h100-sxm5-80gb"]   # one GPU of each software era


def _load() -> str:
    import os
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _header() -> str:
    import os
    import platform
    import subprocess
    root = Path(__file__).resolve().parents[1]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=root).stdout.strip() or "?"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "app",
                            "benchmarks/sweep_speed.py"],
                           capture_output=True, text=True, cwd=root).stdout
    load = os.getloadavg()[0]
    return (f"# benchmarks/sweep_speed.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"commit {commit}"
            + (" + uncommitted changes to " + ", ".join(ln[3:] for ln in dirty.splitlines())
               if dirty.strip() else "")
            + f", Python {platform.python_version()}, {os.cpu_count()} CPUs shared with other "
            f"jobs: load average at start {_load()}"
            + ("\n# NOTE: load average above 3 at the start: the machine was busy, times are "
               "pessimistic" if load > 3 else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sampled scalar points")
    ap.add_argument("--out", help="also write the report to this file")
    ap.add_argument("--only", help="run the cases whose name contains this text")
    a = ap.parse_args()
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    k = 150 if a.quick else 600
    ids = [d.id for d in default_db().devices]
    cases = {n: c for n, c in CASES.items() if not a.only or a.only in n}
    warm = list(dict.fromkeys(ids[:2] + [g for g in WARM if g in ids]))
    say(_header() + "\n")
    say(f"{len(ids)} GPUs in the database\n")
    say(f"{'case':34s} {'points':>7s} | {'memory only: points/s':>21s} {'scalar us':>9s} "
        f"{'ratio':>6s} | {'with max batch: points/s':>24s} {'scalar us':>9s} "
        f"{'ratio':>6s} | {'checked':>7s}")
    calls = []
    for name, (base, vary) in cases.items():
        AXES.clear()
        AXES.update(vary)
        # warm the caches the scalar loop below shares (catalog, layer graphs of both software
        # eras: a pre-Ampere and a later GPU); the engine learns the other GPUs in the timed run
        sweep(base, {**vary, "gpu": warm})
        out = []
        checked = total = 0
        for mb in (False, True):
            r, dt = timed(sweep, base, {**vary, "gpu": "all"}, with_max_batch=mb)
            if not mb:
                r0 = r
            n_s = k // (4 if mb else 1)
            per, bad, n = scalar_per_point(base, sampled_rows(r, n_s), mb)
            out.append((r.size / dt, per * 1e6, per / (dt / r.size)))
            checked += n - bad
            total += n
        (pa, pb, pc), (pd, pe, pf) = out
        say(f"{name:34s} {r.size:7d} | {pa:21.0f} {pb:9.1f} {pc:6.0f} | {pd:24.0f} {pe:9.1f} "
            f"{pf:6.0f} | {checked:3d}/{total}")
        fp_us = footprint_per_call(base, sampled_rows(r0, 60, seed=1)) * 1e6
        calls.append((name, r0, fp_us))
    say("\nfootprint calls of the memory-only sweep: the batch axis as one array per (grid point, "
        "GPU group)\n  where the workload takes it; 'one by one' is what fell back to a call "
        "per batch value, and why")
    say(f"  {'case':34s} {'calls':>6s} {'points/call':>11s} {'as arrays':>9s} "
        f"{'scalar footprint us':>19s}  one by one")
    for name, r0, fp_us in calls:
        fb = "; ".join(f"{v} x {k}" for k, v in r0.fallbacks.items()) or "-"
        say(f"  {name:34s} {r0.footprint_calls:6d} {r0.size / max(1, r0.footprint_calls):11.0f} "
            f"{r0.vector_groups:9d} {fp_us:19.1f}  {fb}")
    say("\nmax batch on every GPU (sweep.max_batch vs estimate(...).max_batch_size):")
    picks = [n for n in list(CASES)[:3] + [list(CASES)[4]] if n in cases]
    for name in picks:
        base = CASES[name][0]
        d = {**base, "gpu": ids[0]}
        max_batch(d, gpus=warm)
        mb, dt = timed(max_batch, d, gpus=ids)
        ref, dt_ref = timed(lambda: [estimate({**base, "gpu": g}).max_batch_size for g in ids])
        same = sum((None if int(x) >= MAX_BATCH_CAP else int(x)) == y for x, y in zip(mb, ref))
        say(f"  {name:34s} {dt * 1e3:8.1f} ms vs {dt_ref * 1e3:8.1f} ms  "
            f"({dt_ref / dt:5.1f}x), equal on {same}/{len(ids)} GPUs")
    say(f"\n# load average at end {_load()}")
    if a.out:
        Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
