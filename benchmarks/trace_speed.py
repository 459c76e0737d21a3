"""Time fake-mode traces of large models on this CPU machine; report peak RSS.

    python benchmarks/trace_speed.py            # Llama-3.1-8B (target < 60 s) and Llama-3.1-70B
    python benchmarks/trace_speed.py --json

Each configuration runs in a child process so its peak RSS is its own.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

CASES = {
    "llama-3.1-8b": {"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": 1,
                     "seq_len": 2048, "precision": "bf16-mixed", "optimizer": "adamw",
                     "attention": "sdpa"},
    "llama-3.1-70b": {"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 1,
                      "seq_len": 2048, "precision": "bf16-mixed", "optimizer": "adamw",
                      "attention": "sdpa", "checkpointing": "full"},
}


def one(name: str) -> dict:
    from vramplan.measure import trace
    t0 = time.perf_counter()
    r = trace.trace(CASES[name], timeline=False)
    return {"case": name, "seconds": round(time.perf_counter() - t0, 2),
            "peak_allocated_gib": round(r.peak_allocated_bytes / 2**30, 2),
            "peak_phase": r.peak_phase, "ops": r.ops,
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--case", choices=list(CASES))
    a = ap.parse_args()
    if a.case:
        print(json.dumps(one(a.case)))
        return 0
    rows = []
    for name in CASES:
        p = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True)
        if p.returncode:
            rows.append({"case": name, "error": p.stderr.strip().splitlines()[-1:]})
        else:
            rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
