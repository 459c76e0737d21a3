"""On a machine with an NVIDIA GPU: estimate vs trace vs measured for a set of scenarios, plus
bandwidth and an empirical max batch. Prints a table (or JSON); --out writes
benchmarks/results/<date>-<gpu>.json. Budget: < 8 minutes on an H200.

    python benchmarks/gpu_check.py --out benchmarks/results/
    python benchmarks/gpu_check.py --dry-run      # no GPU: estimate + trace only

Error is (estimate - measured) / measured on peak allocated (torch.cuda.max_memory_allocated).
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

SCENARIOS = [
    ("gpt2-small train fp32", {"model": "gpt2", "task": "train", "batch_size": 8, "seq_len": 512,
                               "precision": "fp32", "optimizer": "adamw", "attention": "eager"}),
    ("gpt2-small train bf16-mixed sdpa", {"model": "gpt2", "task": "train", "batch_size": 8, "seq_len": 1024,
                                          "precision": "bf16-mixed", "optimizer": "adamw", "attention": "sdpa"}),
    ("llama-1b train bf16-mixed", {"model": "meta-llama/Llama-3.2-1B", "task": "train", "batch_size": 4,
                                   "seq_len": 2048, "precision": "bf16-mixed", "optimizer": "adamw",
                                   "attention": "sdpa"}),
    ("llama-1b train full-ckpt", {"model": "meta-llama/Llama-3.2-1B", "task": "train", "batch_size": 8,
                                  "seq_len": 2048, "precision": "bf16-mixed", "optimizer": "adamw",
                                  "attention": "sdpa", "checkpointing": "full"}),
    ("bert-large train fp32", {"model": "bert-large-uncased", "task": "train", "batch_size": 16,
                               "seq_len": 512, "precision": "fp32", "optimizer": "adamw", "attention": "eager"}),
    ("resnet50 train fp32", {"model": "torchvision/resnet50", "task": "train", "batch_size": 64,
                             "precision": "fp32", "optimizer": "sgd-momentum"}),
    ("llama-1b generate bf16", {"model": "meta-llama/Llama-3.2-1B", "task": "generate", "batch_size": 8,
                                "seq_len": 1024, "new_tokens": 256, "precision": "bf16"}),
]
MAX_BATCH = ("gpt2-small train fp32", 256)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dry-run", action="store_true", help="skip every GPU part (no GPU needed)")
    ap.add_argument("--out", metavar="DIR", help="write <date>-<gpu>.json there")
    ap.add_argument("--format", choices=["table", "json"], default="table")
    ap.add_argument("--max-share", type=float, default=0.9)
    a = ap.parse_args()
    from vramplan.measure import trace
    from vramplan.estimate import estimate
    from vramplan.errors import VramplanError
    gpu_id, rows, t_start = None, [], time.perf_counter()
    if not a.dry_run:
        from vramplan.measure.live import cuda
        try:
            cuda._torch_cuda()
        except VramplanError as exc:
            print(f"gpu_check: {exc} (use --dry-run)", file=sys.stderr)
            return 2
        import torch
        gpu_id = cuda._gpu_entry(torch, 0)["id"]
    for name, sc in SCENARIOS:
        sc = dict(sc, gpu=gpu_id or "nvidia-h200-sxm-141gb")
        row = {"name": name, "scenario": sc}
        try:
            e = estimate(sc).to_dict()["per_gpu"]
            row["estimate"] = {k: e[k] for k in ("peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes")}
        except Exception as exc:  # keep going: one broken estimate must not hide the others
            row["estimate_error"] = str(exc)
        t0 = time.perf_counter()
        try:
            tr = trace.trace(sc, timeline=False)
            row["trace"] = {"peak_allocated_bytes": tr.peak_allocated_bytes,
                            "peak_reserved_bytes": tr.peak_reserved_bytes, "peak_phase": tr.peak_phase,
                            "seconds": round(time.perf_counter() - t0, 1)}
        except Exception as exc:
            row["trace_error"] = str(exc)
        if not a.dry_run:
            try:
                m = cuda.measure(sc).to_dict()
                row["measured"] = dict(m["per_gpu"], components=None)
                row["software"] = {k: m["measure"][k] for k in ("torch", "cuda", "driver")}
            except VramplanError as exc:
                row["measure_error"] = str(exc)
        rows.append(row)
    extra = {}
    if not a.dry_run:
        extra["bandwidth"] = cuda.bandwidth()
        sc = dict(dict(SCENARIOS)[MAX_BATCH[0]], gpu=gpu_id)
        extra["max_batch"] = cuda.max_batch(sc, max_share=a.max_share, limit=MAX_BATCH[1])
        extra["max_batch"]["scenario"] = MAX_BATCH[0]
        try:
            extra["max_batch"]["estimate"] = estimate(sc).to_dict()["max_batch_size"]
        except Exception:  # the estimate's max batch is optional
            pass
    result = {"date": datetime.date.today().isoformat(), "gpu": gpu_id, "dry_run": a.dry_run,
              "seconds": round(time.perf_counter() - t_start, 1), "rows": rows, **extra}
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        f = out / f"{result['date']}-{gpu_id or 'dry-run'}.json"
        f.write_text(json.dumps(result, indent=1))
        print(f"wrote {f}", file=sys.stderr)
    if a.format == "json":
        print(json.dumps(result, indent=1))
        return 0
    G = 2 ** 30
    print(f"{'scenario':36s} {'estimate':>9s} {'trace':>9s} {'measured':>9s} {'est err':>8s} {'trace err':>9s}")
    for r in rows:
        e = r.get("estimate", {}).get("peak_allocated_bytes")
        t = r.get("trace", {}).get("peak_allocated_bytes")
        m = r.get("measured", {}).get("peak_allocated_bytes")
        f = lambda v: f"{v / G:8.2f}G" if v else "       -"  # noqa: E731
        err = lambda v: f"{(v - m) / m:+8.1%}" if v and m else "       -"  # noqa: E731
        print(f"{r['name']:36s} {f(e)} {f(t)} {f(m)} {err(e)} {err(t):>9s}")
    if "bandwidth" in result:
        b = result["bandwidth"]
        print(f"bandwidth {b['measured_gbs']} GB/s of {b['datasheet_gbs']} ({b['fraction']})")
        mb = result["max_batch"]
        print(f"max batch ({mb['scenario']}): measured {mb['max_batch_size']}, estimate {mb.get('estimate')}")
    print(f"total {result['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
