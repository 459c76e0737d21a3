"""Fidelity: every published measured case vs the estimate, on the quantity that was measured.

    python benchmarks/fidelity.py [--family transformer|vision|diffusion|all] [--json]

Error = (estimate - measured) / measured; beside median and p90 each family reports the share
of cases more than 10% under the measurement (`under`: the planner says it fits, the job runs
out of memory) and more than 10% over (`over`). A case runs on the stack its source names
(`benchmarks/case_stacks.json`, the source text quoted; none named: the default). Cases marked expressible:false are scored where the
gap can be closed by comparing the right figure (the vLLM serve cases: everything but the KV
pool and the allocator slack; see their notes) and otherwise listed as gaps.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "app"))
CASES = ROOT / "tests" / "data" / "public_cases.jsonl"
STACKS = ROOT / "benchmarks" / "case_stacks.json"
MISS = 0.10          # under / over: more than 10% below / above the measurement

FAMILIES = {
    "transformer": ("BERT-class", "LLM training", "LLM inference", "Encoder-decoder"),
    "vision": ("Vision",),
    "diffusion": ("Diffusion",),
}
GiB = 2**30


def family_of(category: str) -> str:
    for fam, prefixes in FAMILIES.items():
        if category.startswith(prefixes):
            return fam
    return "other"


def load_cases(path=CASES) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def case_stacks(path=STACKS) -> dict[str, str]:
    """case id -> the stack its source names (benchmarks/case_stacks.json)."""
    return {k: v["stack"] for k, v in json.loads(Path(path).read_text())["cases"].items()}


def scenario_of(case: dict, stacks: dict[str, str]) -> dict:
    """The case's scenario on the stack its source names (unchanged when it names none)."""
    sc = dict(case["scenario"])
    if case["case_id"] in stacks and "stack" not in sc:
        sc["stack"] = stacks[case["case_id"]]
    return sc


def _value(case: dict, est) -> float | None:
    """The estimate's figure for the case's measured quantity; None if it cannot be compared."""
    q = case["quantity"]
    comps = est.components
    if case["scenario"].get("task") == "serve":
        # vLLM's memory-profiling log: weights + non-torch + activation peak, i.e. everything
        # but the KV pool, the allocator slack and the CUDA graphs captured after profiling
        return est.device_used_bytes - comps.get("kv_cache", 0) - comps.get(
            "allocator_slack", 0) - comps.get("cuda_graphs", 0)
    if case["case_id"].startswith("G") and q == "device_used_bytes" and \
            "WITHOUT the caching allocator" in case.get("note", ""):
        return est.device_used_bytes - comps.get("allocator_slack", 0)
    return getattr(est, q)


def run(family: str = "all", path=CASES) -> dict:
    from vramplan.estimate import estimate
    rows, gaps = [], []
    stacks = case_stacks()
    for case in load_cases(path):
        fam = family_of(case["category"])
        if family != "all" and fam != family:
            continue
        row = {"id": case["case_id"], "category": case["category"], "family": fam,
               "quantity": case["quantity"], "measured": case["value_bytes"],
               "expressible": case.get("expressible", True)}
        try:
            est = estimate(scenario_of(case, stacks), with_max_batch=False)
            val = _value(case, est)
        except Exception as exc:  # noqa: BLE001 - a benchmark reports, never stops
            row["error_msg"] = f"{type(exc).__name__}: {exc}"
            gaps.append(row)
            continue
        row["estimate"] = int(val)
        row["error"] = (val - case["value_bytes"]) / case["value_bytes"]
        row["stack"] = stacks.get(case["case_id"], "pytorch")
        rows.append(row)
    return {"cases": rows, "gaps": gaps, "summary": summarise(rows)}


def _stats(errs: list[float]) -> dict:
    if not errs:
        return {"n": 0}
    a = sorted(abs(e) for e in errs)
    p90 = a[min(len(a) - 1, max(0, int(round(0.9 * len(a) + 0.4999)) - 1))]
    return {"n": len(a), "median": statistics.median(a), "p90": p90, "max": a[-1],
            "under": sum(e < -MISS for e in errs) / len(a),
            "over": sum(e > MISS for e in errs) / len(a)}


def summarise(rows: list[dict]) -> dict:
    out = {"all": _stats([r["error"] for r in rows])}
    for fam in sorted({r["family"] for r in rows}):
        out[fam] = _stats([r["error"] for r in rows if r["family"] == fam])
    out["expressible"] = _stats([r["error"] for r in rows if r["expressible"]])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="all", choices=["all", *FAMILIES])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cases", default=str(CASES))
    a = ap.parse_args(argv)
    res = run(a.family, a.cases)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{'id':5} {'category':38} {'quantity':20} {'est GiB':>8} {'meas GiB':>8} {'error':>7}")
    for r in res["cases"]:
        flag = "" if r["expressible"] else "  (expressible: false)"
        print(f"{r['id']:5} {r['category'][:38]:38} {r['quantity'][:20]:20} "
              f"{r['estimate'] / GiB:8.2f} {r['measured'] / GiB:8.2f} {r['error']:+7.1%}{flag}")
    for g in res["gaps"]:
        print(f"{g['id']:5} {g['category'][:38]:38} GAP: {g.get('error_msg', '')[:90]}")
    print()
    for k, s in res["summary"].items():
        if s["n"]:
            print(f"{k:12} n={s['n']:3}  median |err| {s['median']:6.1%}  p90 {s['p90']:6.1%}  "
                  f"max {s['max']:6.1%}  >10% under {s['under']:5.1%}  >10% over "
                  f"{s['over']:5.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
