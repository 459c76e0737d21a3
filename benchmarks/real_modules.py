"""The analytic estimate against the trace of the real third-party module, model by model.

    .venv/bin/python benchmarks/real_modules.py [--only ID,ID] [--out FILE]

For every entry of `benchmarks/configs/real_modules.json` (>= 40 models: decoder, MoE, MLA,
hybrid, their generate runs, encoder, encoder-decoder (T5, Whisper), CNN, ViT, a VLM's vision
tower, whole VLMs with their images (Qwen2.5-VL, Qwen3-VL, Gemma 3: measure/tracing/vlm.py,
the data-dependent integer inputs as constants), segmentation, U-Net, DiT, VAE; each config with its
source) it computes `vramplan.estimate.estimate(scenario)` and traces the module people run
(transformers / torchvision / timm / diffusers, built from the config with no weights, under
fake tensors with the CUDA kernels emulated: `vramplan.measure.trace.trace_real`), and writes a
Markdown table: per model the peak allocated bytes of each and the error (estimate / trace - 1),
then the median and worst |error| per family. Offline (HF_HUB_OFFLINE=1); nothing downloaded.

Diffusion modules (U-Net, DiT, VAE) are one phase of a pipeline estimate: the estimate's
figure for the module is that phase's live bytes with the other components' resident weights
taken out (params x bytes of each, from the catalog entry the estimate reads); the trace runs
the one module call of that phase (the denoiser at the CFG batch, the VAE decode).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "app"))

from vramplan.catalog import get_model  # noqa: E402
from vramplan.estimate import estimate  # noqa: E402
from vramplan.measure import trace  # noqa: E402

GPU = "nvidia-h100-sxm5-80gb"
FAMILIES = ("decoder", "moe", "mla", "hybrid", "decoder-generate", "moe-generate",
            "hybrid-generate", "vlm", "vlm-generate", "encoder", "encoder-decoder", "cnn", "vit",
            "vision-tower", "detection",
            "segmentation", "unet", "dit", "vae")
BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}


def _scenario(entry) -> dict:
    return {**entry["estimate"], "gpu": GPU}


def estimated(entry) -> tuple[int, int]:
    """(peak allocated bytes, activations at the peak) of the analytic estimate."""
    e = estimate(_scenario(entry), with_max_batch=False)
    phase = entry.get("phase")
    if phase is None:
        return e.peak_allocated_bytes, e.components.get("activations", 0)
    # one module of a pipeline: that phase's bytes less the other components' weights
    ph = e.footprint.phases[phase]
    spec = get_model(entry["estimate"]["model"])
    nbytes = BYTES[entry["estimate"]["precision"]]
    comps = spec.config["components"]
    others = sum(int(c["params"]) * nbytes for n, c in comps.items() if n != entry["component"])
    return sum(ph.values()) - others, ph.get("activations", 0)


def traced(entry):
    src = dict(entry["trace"])
    scn = _scenario(entry)
    if src.get("hf") == "catalog":
        src["hf"] = dict(get_model(scn["model"]).config)
        scn = {**scn, "architecture": src["hf"]}
        scn.pop("model")
    if entry.get("phase") == "denoise":
        spec = get_model(scn["model"])
        if spec.config.get("guidance") == "cfg":
            scn["batch_size"] = 2 * scn["batch_size"]     # the CFG batch the denoiser sees
    return trace.trace_real(scn, src, mode=entry.get("mode", "fake"), timeline=False)


def run(entries) -> list[dict]:
    rows = []
    for entry in entries:
        t0 = time.perf_counter()
        row = {"id": entry["id"], "family": entry["family"], "note": entry.get("note", "")}
        try:
            row["estimate"], row["est_act"] = estimated(entry)
            r = traced(entry)
            row["trace"], row["trace_act"] = r.peak_allocated_bytes, r.components.get("activations", 0)
            row["error"] = row["estimate"] / row["trace"] - 1
            row["phase"] = r.peak_phase
        except Exception as exc:   # a model that does not build is a row, not a stop
            row["failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        print(f"{row['id']:<42} {row.get('error', float('nan')):+8.1%}  {row['seconds']:5.1f} s"
              f"  {row.get('failed', '')}", flush=True)
    return rows


def gib(n: int) -> str:
    return f"{n / 2**30:.3f}"


def markdown(rows, seconds: float, label: str = "2026-12-02c") -> str:
    import torch
    from vramplan.measure.tracing.thirdparty import ensure_torchvision
    ensure_torchvision()
    versions = []
    for name in ("transformers", "timm", "torchvision", "diffusers"):
        try:
            versions.append(f"{name} {__import__(name).__version__}")
        except Exception as exc:   # noqa: BLE001
            versions.append(f"{name} unavailable ({type(exc).__name__})")
    out = [f"# Analytic estimate vs the trace of the real module ({label})", "",
           f"`benchmarks/real_modules.py`, {len(rows)} models, {seconds:.0f} s of tracing in all "
           f"on 2 CPU cores shared with other work; torch {torch.__version__}, {', '.join(versions)}. GPU for the estimate: "
           f"{GPU}. Peak allocated bytes (GiB); error = estimate / trace - 1. The trace runs "
           "the module people run (built from its config, no weights) under fake tensors "
           "with the CUDA kernels emulated (docs/tracing.md); it is not a GPU measurement.", "",
           "| model | family | estimate GiB | trace GiB | error | est. activations GiB | "
           "trace activations GiB | trace peak phase |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "failed" in r:
            out.append(f"| {r['id']} | {r['family']} | | | not traced: {r['failed']} | | | |")
            continue
        note = f" ({r['note']})" if r["note"] else ""
        out.append(f"| {r['id']}{note} | {r['family']} | {gib(r['estimate'])} | "
                   f"{gib(r['trace'])} | {r['error']:+.1%} | {gib(r['est_act'])} | "
                   f"{gib(r['trace_act'])} | {r['phase']} |")
    out += ["", "## Per family", "", summary(rows)]
    return "\n".join(out) + "\n"


def summary(rows) -> str:
    out = ["| family | models | median abs error | worst error |", "|---|---|---|---|"]
    for fam in FAMILIES:
        ok = [r for r in rows if r["family"] == fam and "error" in r]
        failed = [r for r in rows if r["family"] == fam and "failed" in r]
        if not ok:
            if failed or fam == "detection":
                out.append(f"| {fam} | 0 | not traced | {len(failed)} failed |" if failed else
                           f"| {fam} | 0 | not traced | see docs/accuracy.md |")
            continue
        errs = [r["error"] for r in ok]
        worst = max(ok, key=lambda r: abs(r["error"]))
        out.append(f"| {fam} | {len(ok)} | {statistics.median(abs(e) for e in errs):.1%} | "
                   f"{worst['error']:+.1%} ({worst['id']}) |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated ids")
    ap.add_argument("--out", default=str(ROOT / "results" / "real-modules-2026-12-02e.md"))
    ap.add_argument("--reuse", metavar="JSON", help="rows of an earlier run (its .json): "
                    "models traced there are not traced again")
    args = ap.parse_args(argv)
    entries = json.loads((ROOT / "configs" / "real_modules.json").read_text())["models"]
    if args.only:
        want = set(args.only.split(","))
        entries = [e for e in entries if e["id"] in want]
    old = {}
    if args.reuse and Path(args.reuse).exists():
        old = {r["id"]: r for r in json.loads(Path(args.reuse).read_text()) if "error" in r}
    t0 = time.perf_counter()
    new = {r["id"]: r for r in run([e for e in entries if e["id"] not in old])}
    rows = [old.get(e["id"]) or new[e["id"]] for e in entries]
    print(f"{time.perf_counter() - t0:.0f} s for {len(new)} traced here")
    text = markdown(rows, sum(r["seconds"] for r in rows),
                    Path(args.out).stem.removeprefix("real-modules-"))
    Path(args.out).write_text(text)
    (Path(args.out).with_suffix(".json")).write_text(json.dumps(rows, indent=1) + "\n")
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
