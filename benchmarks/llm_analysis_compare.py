"""Points per second of `vramplan.sweep` against `llm-analysis` (pip) on a transformer
training grid both can express, in one run; memory of a few points side by side.

    python benchmarks/llm_analysis_compare.py [--venv DIR] [--setup]

llm-analysis runs in its own environment (never a dependency of vramplan): `--setup` creates
it at DIR (default /tmp/llm-venv) with

    python -m venv DIR && DIR/bin/pip install llm-analysis==0.2.2 transformers==4.28.1 \\
        huggingface-hub==0.14.1

(llm-analysis 0.2.2 pins huggingface-hub < 0.15, which transformers >= 4.29 no longer
accepts; 4.28.1 is the last release pip can pair with it). If it cannot be installed or
imported, the script says so and why, and still times vramplan on the grid.

The grid: 2 models in both catalogs (gpt2-xl, facebook/opt-1.3b) x the GPUs llm-analysis
ships configs for (mapped to hardware-database ids) x batch 1..16 x 3 sequence lengths x
recomputation none / full, training with 16-bit compute, fp32 master weights and Adam
(llm-analysis `w16a16e16` with its default fp32 master weights and optimizer states; vramplan
bf16-mixed AdamW). llm-analysis: one `LLMAnalysis(...).training(...)` call per point (a point
that does not fit raises its AssertionError after the memory is computed: counted as
evaluated, as vramplan's `fits: false` is). vramplan: one `sweep()` per model (memory only,
the same points) and the scalar `estimate` loop on a sample. What each tool counts differs
(llm-analysis: weights + gradients + optimizer states + activations per GPU, no allocator or
CUDA context; vramplan: device-used bytes); the side-by-side rows show it, the speed ratio is
per point.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

from vramplan.estimate import estimate  # noqa: E402
from vramplan.sweep import sweep  # noqa: E402

PINS = ("llm-analysis==0.2.2", "transformers==4.28.1", "huggingface-hub==0.14.1")
# llm-analysis gpu_configs/<name>.json -> hardware-database id
GPUS = {
    "a10-pcie-28gb": None,        # no such card: the A10 has 24 GB (kept out of the grid)
    "a10g-pcie-24gb": "nvidia-a10g", "a100-pcie-40gb": "nvidia-a100-pcie-40gb",
    "a100-pcie-80gb": "nvidia-a100-pcie-80gb", "a100-sxm-40gb": "nvidia-a100-sxm4-40gb",
    "a100-sxm-80gb": "nvidia-a100-sxm4-80gb", "a6000-48gb": "nvidia-rtx-a6000",
    "h100-pcie-80gb": "nvidia-h100-pcie-80gb", "h100-sxm-80gb": "nvidia-h100-sxm5-80gb",
    "mi100-32gb": "amd-mi100", "mi210-64gb": "amd-mi210", "mi250x-128gb": "amd-mi250x",
    "v100-pcie-16gb": "nvidia-v100-pcie-16gb", "v100-pcie-32gb": "nvidia-v100-pcie-32gb",
    "v100-sxm-16gb": "nvidia-v100-sxm2-16gb", "v100-sxm-32gb": "nvidia-v100-sxm2-32gb",
}
# vramplan catalog id -> (llm-analysis model_configs name, sequence lengths)
MODELS = {"gpt2-xl": ("gpt2-xl", (256, 512, 1024)),
          "facebook/opt-1.3b": ("facebook_opt-1.3b", (512, 1024, 2048))}
BATCHES = tuple(range(1, 17))
RECOMPUTE = {"none": "NONE", "full": "FULL"}

CHILD = textwrap.dedent('''
    import json, logging, sys, time
    logging.disable(logging.CRITICAL)
    from llm_analysis.analysis import LLMAnalysis, ActivationRecomputation
    from llm_analysis.config import (get_model_config_by_name, get_gpu_config_by_name,
                                     get_dtype_config_by_name, ParallelismConfig)
    job = json.loads(sys.argv[1])
    dtype = get_dtype_config_by_name("w16a16e16")
    out, n, refused = {}, 0, 0
    t = time.perf_counter()
    for model, seqs in job["models"].items():
        mc = get_model_config_by_name(model)
        for gname in job["gpus"]:
            a = LLMAnalysis(mc, get_gpu_config_by_name(gname), dtype, ParallelismConfig())
            for seq in seqs:
                for b in job["batches"]:
                    for rc in job["recompute"]:
                        n += 1
                        try:
                            r = a.training(batch_size_per_gpu=b, seq_len=seq,
                                           gradient_accumulation_steps=1,
                                           activation_recomputation=getattr(
                                               ActivationRecomputation, rc))
                            m = r["(weight+op_state+grad+act)_memory_per_gpu"]
                        except AssertionError:
                            refused += 1
                            m = None
                        out[f"{model}|{gname}|{seq}|{b}|{rc}"] = m
    dt = time.perf_counter() - t
    print(json.dumps({"points": n, "seconds": dt, "refused": refused, "memory": out}))
''')


def setup(venv: Path) -> str | None:
    """Create the environment; None when it works, else why not."""
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                       capture_output=True, text=True, timeout=300)
        r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *PINS],
                           capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"could not create {venv}: {exc}"
    if r.returncode:
        return "pip install failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    return None


def run_llm_analysis(venv: Path) -> dict | str:
    py = venv / "bin" / "python"
    if not py.exists():
        return f"no environment at {venv} (run with --setup, or see the module doc)"
    job = {"models": {v[0]: list(v[1]) for v in MODELS.values()},
           "gpus": [g for g, v in GPUS.items() if v], "batches": list(BATCHES),
           "recompute": list(RECOMPUTE.values())}
    r = subprocess.run([str(py), "-c", CHILD, json.dumps(job)], capture_output=True,
                       text=True, timeout=1800)
    if r.returncode:
        return "llm-analysis failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_vramplan(k_scalar: int = 200) -> dict:
    ids = [v for v in GPUS.values() if v]
    n, dt, rows = 0, 0.0, {}
    scalar_t, scalar_n = 0.0, 0
    rng = random.Random(0)
    for model, (_, seqs) in MODELS.items():
        base = {"model": model, "task": "train", "precision": "bf16-mixed",
                "optimizer": "adamw"}
        vary = {"batch_size": f"1..{BATCHES[-1]}", "seq_len": ",".join(map(str, seqs)),
                "checkpointing": ",".join(RECOMPUTE), "gpu": ids}
        sweep(base, {"gpu": ids[:2]})                   # warm the catalog and caches
        t = time.perf_counter()
        r = sweep(base, vary)
        dt += time.perf_counter() - t
        n += r.size
        pts = list(r.rows())
        for row in pts:
            rows[(model, row["gpu"], row["seq_len"], row["batch_size"],
                  row["checkpointing"])] = row.get("device_used_bytes")
        for row in rng.sample(pts, k_scalar // len(MODELS)):
            d = {**base, **{kk: row[kk] for kk in ("batch_size", "seq_len", "checkpointing",
                                                   "gpu")}}
            t = time.perf_counter()
            estimate(d, with_max_batch=False)
            scalar_t += time.perf_counter() - t
            scalar_n += 1
    return {"points": n, "seconds": dt, "rows": rows, "scalar_s": scalar_t / scalar_n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", default="/tmp/llm-venv", type=Path)
    ap.add_argument("--setup", action="store_true", help="create the llm-analysis venv first")
    a = ap.parse_args()
    why = setup(a.venv) if a.setup and not (a.venv / "bin" / "python").exists() else None
    la = run_llm_analysis(a.venv) if why is None else why
    vp = run_vramplan()
    print(f"grid: {len(MODELS)} models x {sum(1 for v in GPUS.values() if v)} GPUs x "
          f"{len(BATCHES)} batches x 3 sequence lengths x {len(RECOMPUTE)} recomputation "
          "modes, training\n")
    vr = vp["points"] / vp["seconds"]
    print(f"{'tool':34s} {'points':>7s} {'seconds':>8s} {'points/s':>10s} {'us/point':>9s}")
    print(f"{'vramplan sweep (memory only)':34s} {vp['points']:7d} {vp['seconds']:8.3f} "
          f"{vr:10.0f} {1e6 / vr:9.2f}")
    print(f"{'vramplan scalar estimate (sample)':34s} {'':7s} {'':8s} "
          f"{1 / vp['scalar_s']:10.0f} {vp['scalar_s'] * 1e6:9.2f}")
    if isinstance(la, str):
        print(f"\nllm-analysis not run: {la}")
        return
    lr = la["points"] / la["seconds"]
    print(f"{'llm-analysis 0.2.2 (training())':34s} {la['points']:7d} {la['seconds']:8.3f} "
          f"{lr:10.0f} {1e6 / lr:9.2f}")
    print(f"\nsweep / llm-analysis: {vr / lr:.1f}x per point; scalar estimate / llm-analysis: "
          f"{(1 / vp['scalar_s']) / lr:.2f}x; llm-analysis refused {la['refused']} of "
          f"{la['points']} points (do not fit)")
    print("\nsome points (GiB; llm-analysis: weights + grads + states + activations; vramplan: "
          "device used):")
    back = {v[0]: k for k, v in MODELS.items()}
    keys = sorted(la["memory"])
    for key in keys[:: max(1, len(keys) // 8)][:8]:
        model, g, seq, b, rc = key.split("|")
        mine = vp["rows"].get((back[model], GPUS[g], int(seq), int(b), rc.lower()))
        theirs = la["memory"][key]
        print(f"  {back[model]:18s} {GPUS[g]:24s} seq {seq:>4s} batch {b:>2s} recompute "
              f"{rc.lower():4s}: llm-analysis "
              f"{'refused' if theirs is None else f'{theirs / 2**30:6.2f}'}  vramplan "
              f"{'error' if mine is None else f'{mine / 2**30:6.2f}'}")


if __name__ == "__main__":
    main()
