"""Build the golden estimates table, `tests/golden/estimates.jsonl`.

    .venv/bin/python tests/golden/make_golden.py [--check]

One JSON line per scenario (keys sorted), a frozen copy of everything `estimate()` answers, so
that `tests/test_golden_estimates.py` can prove a restructuring changes no number, byte for
byte:

    {"id": ..., "input": <the dict given to Scenario.from_dict>, "scenario": <its to_dict()>,
     "gpu": <GPU id>, "estimate": <estimate(input, gpu).to_dict()>}

`id` (a readable label for failure reports) and `input` (the un-normalised dict, so that the
test also re-runs validation and default filling rather than only their output) are additions
to the minimal form; `scenario` is the normalised form the estimate starts from.

The scenarios:

(a) every case of the fidelity suite, turned into a scenario by the same code the fidelity
    benchmark and `tests/test_fidelity.py` use (`benchmarks/fidelity.py`: `load_cases` on
    `fidelity.CASES`, then `case["scenario"]`); cases of `../shared/fidelity/public_cases.jsonl`
    (when that checkout is there) that differ from the repository's copy are added too;
(b) scenarios generated from `random.Random(SEED)`, spanning every model family and task
    (`vramplan.scenario.valid_tasks`, `vramplan.catalog.list_models`), the model-less tasks
    render (with and without video sessions), volume and array, several GPUs of
    `vramplan.hardware.default_db()`, batch sizes, sequence lengths, precisions (also
    per-component for diffusion pipelines), optimizers, checkpointing, attention, LoRA,
    parallel layouts, offload, options and serving. Drafts that `Scenario.from_dict` rejects,
    or that the estimate refuses (a workload's ScenarioError, e.g. offload 'params' without
    ZeRO-3), are skipped and counted.

Every estimate is made with the default `with_max_batch=True`, so `max_batch_size` (the
bisection over the same estimate) is frozen too. Nothing is dropped from `to_dict()`: it holds
no version string, time, path or other value that changes with code layout (checked when this
table was first made: the same bytes under different PYTHONHASHSEED values); the notes are text
of the estimate and are kept.

`--check` rebuilds in memory and exits 1 if the file would change (nothing written).
`--refresh` re-estimates the stored rows instead of drawing them anew (the draw depends on the
catalog: a new model shifts every later draw), dropping, and naming, a row whose input a new
validation rule refuses.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "app"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import fidelity  # noqa: E402  (benchmarks/fidelity.py: the fidelity suite's case loader)

from vramplan.catalog import list_models  # noqa: E402
from vramplan.errors import ScenarioError  # noqa: E402
from vramplan.estimate import estimate  # noqa: E402
from vramplan.scenario import Scenario, model_defaults, valid_tasks  # noqa: E402

GOLDEN = Path(__file__).with_name("estimates.jsonl")
SHARED_CASES = ROOT.parent / "shared" / "fidelity" / "public_cases.jsonl"
SEED = 1234
N_DRAFTS = 440          # generated drafts; those from_dict rejects are skipped
MIN_ACCEPTED = 300

# several GPUs of default_db(): datacenter / consumer / old (compute capability < 8: the legacy
# stack), other vendors, unified memory
GPUS = ["nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-40gb", "nvidia-a100-sxm4-80gb",
        "nvidia-rtx-4090", "nvidia-rtx-3060-12gb", "nvidia-t4", "nvidia-v100-sxm2-16gb",
        "nvidia-l4", "nvidia-l40s", "nvidia-h200-sxm-141gb", "nvidia-b200-sxm", "amd-mi300x",
        "apple-m3-max", "nvidia-gh200-96gb", "nvidia-rtx-2080-ti"]

TRANSFORMER = ("decoder", "encoder", "encoder-decoder")
VISION = ("cnn", "vit", "detection", "segmentation", "unet")
TRAINING = ("train", "lora", "qlora")
NON_QUANT = ["fp32", "tf32", "fp16", "bf16", "fp16-mixed", "bf16-mixed"]
QUANT = ["fp8", "int8", "int4", "nf4"]
OPTIMIZERS = ["adamw", "adam", "sgd", "sgd-momentum", "adafactor", "adamw-8bit",
              "paged-adamw-8bit", "lion", "none"]
LORA_TARGETS = {
    "decoder": [["q_proj", "v_proj"], ["q_proj", "k_proj", "v_proj", "o_proj"],
                ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                ["c_attn"], ["query_key_value"]],
    "encoder": [["query", "value"], ["query", "key", "value", "dense"]],
    "encoder-decoder": [["q", "v"], ["q", "k", "v", "o"], ["q", "v", "wi", "wo"]],
    "diffusion": [["to_q", "to_v"], ["to_q", "to_k", "to_v", "to_out.0"],
                  ["to_q", "to_v", "query", "value", "q_proj", "v_proj"]],
}
TRANSFORMER_OPTIONS = ["compile", "chunked-loss", "optimizer-in-backward", "fused-qkv",
                       "float8-linears", "sequence-parallel", "loss-parallel", "fused-optimizer",
                       "expandable-segments", "legacy-stack", "modern-stack"]
GENERATE_OPTIONS = ["legacy-cache", "dynamic-cache", "static-cache", "compile",
                    "expandable-segments"]
VISION_OPTIONS = ["compile", "fused-optimizer", "expandable-segments", "legacy-stack",
                  "modern-stack", "optimizer-in-backward"]
DIFFUSION_OPTIONS = ["vae-tiling", "vae-slicing", "attention-slicing", "layerwise-casting",
                     "compile", "expandable-segments", "fused-optimizer"]
PIXEL_FORMATS = ["r8", "rg8", "rgba8", "bgra8", "srgba8", "rgb10a2", "r11g11b10f", "r16f",
                 "rg16f", "rgba16f", "rgba16", "r32f", "rg32f", "rgba32f", "r32ui", "d16",
                 "d24s8", "d32f", "d32fs8"]
DTYPES = ["bool", "uint8", "int8", "uint16", "int16", "float16", "bfloat16", "uint32", "int32",
          "float32", "uint64", "int64", "float64", "complex64", "complex128"]


# ---- (a) the fidelity suite ------------------------------------------------------------------

def fidelity_inputs() -> list[tuple[str, dict]]:
    """(label, scenario dict) of every fidelity case, through the fidelity benchmark's loader."""
    cases = fidelity.load_cases(fidelity.CASES)
    out = [(f"fidelity:{c['case_id']}", c["scenario"]) for c in cases]
    if SHARED_CASES.exists() and SHARED_CASES.resolve() != Path(fidelity.CASES).resolve():
        have = {json.dumps(c, sort_keys=True) for c in cases}
        for c in fidelity.load_cases(SHARED_CASES):
            if json.dumps(c, sort_keys=True) not in have:
                out.append((f"fidelity-shared:{c['case_id']}", c["scenario"]))
    return out


# ---- (b) generated scenarios -----------------------------------------------------------------

def _subset(rng: random.Random, items: list, k_max: int) -> list:
    return sorted(rng.sample(items, rng.randint(0, min(k_max, len(items)))))


def _parallel(rng: random.Random, training: bool) -> dict | None:
    r = rng.random()
    if r < 0.5:
        return None
    if not training or r < 0.65:
        t = rng.choice([1, 2, 4, 8])
        return {"tensor": t, "gpus": t * rng.choice([1, 1, 2])}
    t, p, c = rng.choice([1, 1, 2, 4]), rng.choice([1, 1, 2, 4]), rng.choice([1, 1, 1, 2])
    d = rng.choice([1, 2, 4, 8])
    out = {"data": d, "tensor": t, "pipeline": p, "context": c, "zero": rng.choice([0, 1, 2, 3])}
    if rng.random() < 0.5:
        out["gpus"] = d * t * p * c
    return out


def _training_keys(rng: random.Random, d: dict, task: str) -> None:
    d["optimizer"] = rng.choice(OPTIMIZERS[:-1] if task != "train" else OPTIMIZERS)
    d["gradient_accumulation"] = rng.choice([1, 1, 2, 4, 8])
    d["checkpointing"] = rng.choice(["none", "selective", "full"])


def _lora(rng: random.Random, family: str) -> dict:
    out = {"rank": rng.choice([4, 8, 16, 64, 128]), "targets": rng.choice(LORA_TARGETS[family])}
    if rng.random() < 0.5:
        out["alpha"] = rng.choice([8, 16, 32, 0.5])
    if rng.random() < 0.3:
        out["dropout"] = rng.choice([0.05, 0.1])
    return out


def _transformer(rng: random.Random, d: dict, spec, task: str) -> None:
    fam = spec.family
    maxpos = spec.arch.max_positions or 4096
    d["batch_size"] = rng.choice([1, 2, 4, 8, 16, 32, 64])
    if task == "serve":
        if rng.random() < 0.7:
            d["serving"] = {k: v for k, v in {
                "gpu_memory_utilization": rng.choice([0.5, 0.8, 0.9, 0.95]),
                "max_num_seqs": rng.choice([16, 64, 256]),
                "max_model_len": rng.choice([1024, 2048, 4096, 8192]),
                "max_num_batched_tokens": rng.choice([None, 2048, 8192]),
                "kv_cache_dtype": rng.choice(["auto", "auto", "fp8", "fp8_e4m3", "fp8_e5m2"]),
                "cuda_graphs": rng.random() < 0.7}.items() if v is not None}
            d["seq_len"] = min(d["serving"]["max_model_len"], rng.choice([512, 1024, 4096]))
        else:
            del d["batch_size"]                  # batch_size / seq_len from the serving defaults
    elif task != "load":
        d["seq_len"] = rng.choice([32, 128, 256, 512, 1024, 2048, 4096, 8192, maxpos])
    if task == "generate":
        d["new_tokens"] = rng.choice([0, 1, 64, 256, 1024])
    if spec.arch.learned_positions and "seq_len" in d and rng.random() < 0.9:
        # mostly within the learned positions (the rest are rejected by from_dict, and counted)
        room = max(1, maxpos - d.get("new_tokens", 0))
        d["seq_len"] = min(d["seq_len"], room)
        d["options"] = _subset(rng, GENERATE_OPTIONS, 2)
    elif task in TRAINING or task == "forward":
        d["options"] = _subset(rng, TRANSFORMER_OPTIONS, 3)
    if fam == "encoder-decoder" and task not in ("generate", "load") and rng.random() < 0.5:
        d["target_len"] = rng.choice([16, 64, 128, 512])
    if task == "train":
        d["precision"] = rng.choice(NON_QUANT)
    elif task == "qlora":
        d["precision"] = rng.choice(QUANT)
    else:
        d["precision"] = rng.choice(NON_QUANT + QUANT)
    d["attention"] = rng.choice(["eager", "sdpa", "flash"])
    if task in TRAINING:
        _training_keys(rng, d, task)
        d["offload"] = _subset(rng, ["optimizer", "params", "gradients", "activations"], 2)
    if task in ("lora", "qlora") or (task in ("load", "forward", "generate", "serve")
                                     and rng.random() < 0.15):
        d["lora"] = _lora(rng, fam)
    par = _parallel(rng, task in TRAINING)
    if par:
        d["parallel"] = par


def _vision(rng: random.Random, d: dict, spec, task: str) -> None:
    native = model_defaults(spec, task).get("resolution") or [224, 224]
    d["batch_size"] = rng.choice([1, 2, 4, 8, 16, 32, 64, 128])
    if rng.random() < 0.5:
        f = rng.choice([0.5, 0.75, 1.25, 1.5, 2])
        d["resolution"] = [max(32, int(x * f) // 32 * 32) for x in native]
    if task == "train":
        d["precision"] = rng.choice(NON_QUANT)
        _training_keys(rng, d, task)
    else:
        d["precision"] = rng.choice(NON_QUANT + QUANT[:2])
    if spec.family in ("vit", "segmentation", "detection") or rng.random() < 0.5:
        d["attention"] = rng.choice(["eager", "sdpa", "flash"])
    d["options"] = _subset(rng, VISION_OPTIONS, 2)
    if task == "train" and rng.random() < 0.4:
        d["parallel"] = {"data": rng.choice([2, 4, 8]), "zero": rng.choice([0, 0, 1, 2, 3])}


def _diffusion(rng: random.Random, d: dict, spec, task: str) -> None:
    defaults = model_defaults(spec, task)
    native = defaults.get("resolution") or [1024, 1024]
    d["batch_size"] = rng.choice([1, 1, 2, 4, 8])
    if rng.random() < 0.6:
        f = rng.choice([0.5, 0.75, 1, 1.5, 2])
        d["resolution"] = [max(64, int(x * f) // 64 * 64) for x in native]
    if "frames" in defaults and rng.random() < 0.5:
        d["frames"] = rng.choice([9, 17, 49])
    if "text_len" in defaults and rng.random() < 0.3:
        d["text_len"] = rng.choice([77, 128, 256, 512])
    if task in ("denoise", "forward", "load"):
        if rng.random() < 0.5:
            d["steps"] = rng.choice([1, 4, 20, 50])
        if rng.random() < 0.3:
            d["guidance"] = rng.random() < 0.5
    comps = sorted(spec.config.get("components", {}))
    if task in TRAINING:
        d["precision"] = rng.choice(NON_QUANT)
        _training_keys(rng, d, task)
    elif rng.random() < 0.35 and comps:
        prec = {c: rng.choice(["fp32", "bf16", "fp16", "fp8", "int8", "nf4"])
                for c in rng.sample(comps, rng.randint(1, min(3, len(comps))))}
        if rng.random() < 0.5:
            prec["default"] = rng.choice(["bf16", "fp16", "fp32"])
        d["precision"] = prec
    else:
        d["precision"] = rng.choice(NON_QUANT + QUANT)
    d["attention"] = rng.choice(["eager", "sdpa", "flash"])
    d["options"] = _subset(rng, DIFFUSION_OPTIONS, 3)
    if task not in TRAINING and rng.random() < 0.3:
        d["offload"] = ["model"]
    if task == "lora" or (task in ("denoise", "forward", "load") and rng.random() < 0.15):
        d["lora"] = _lora(rng, "diffusion")


def _render(rng: random.Random, d: dict) -> None:
    d["resolution"] = rng.choice([[720, 1280], [1080, 1920], [1440, 2560], [2160, 3840]])
    if rng.random() < 0.4:
        d["render_targets"] = [
            {k: v for k, v in {"format": rng.choice(PIXEL_FORMATS),
                               "count": rng.choice([None, 1, 2, 4]),
                               "scale": rng.choice([None, 0.5, 1.0, 2.0]),
                               "msaa": rng.choice([None, True, False])}.items() if v is not None}
            for _ in range(rng.randint(0 if rng.random() < 0.2 else 1, 4))]
    for key, choices in (("msaa", [1, 2, 4, 8]), ("swapchain_images", [2, 3, 4]),
                         ("frames_in_flight", [1, 2, 3]),
                         ("texture_budget", ["512 MiB", "2 GiB", 8 * 2**30]),
                         ("geometry_budget", ["256 MiB", "1 GiB"]), ("fps", [30, 60, 144.0]),
                         ("overdraw", [1.0, 2.5, 6]), ("texture_bytes_per_pixel", [4, 16.0, 64])):
        if rng.random() < 0.4:
            d[key] = rng.choice(choices)
    if rng.random() < 0.5:
        d["video"] = {k: v for k, v in {
            "mode": rng.choice(["encode", "decode", "transcode"]),
            "codec": rng.choice(["h264", "hevc", "av1"]), "streams": rng.choice([1, 3, 8]),
            "format": rng.choice(["nv12", "p010", "yuv444", "yuv444-16"]),
            "surfaces": rng.choice([None, 0, 4, 16]), "lookahead": rng.choice([None, 0, 8]),
            "bframes": rng.choice([None, 0, 2])}.items() if v is not None}
        if rng.random() < 0.5:
            d["render_targets"] = []


def _work_buffers(rng: random.Random) -> dict:
    return {k: v for k, v in {
        "fft": rng.choice(["none", "in-place", "out-of-place", True, False]),
        "fft_dtype": rng.choice([None, "complex64", "complex128"]),
        "solver": rng.choice(["none", "cg", "bicgstab", "gmres"]),
        "restart": rng.choice([None, 10, 30]),
        "solver_dtype": rng.choice([None, "float32", "float64", "complex64"])}.items()
        if v is not None}


def _volume(rng: random.Random, d: dict) -> None:
    n = rng.choice([64, 128, 256, 512])
    d["resolution"] = [n, rng.choice([n, n * 2]), n]
    d["batch_size"] = rng.choice([1, 2, 4])
    for key, choices in (("channels", [1, 3, 16]), ("dtype", DTYPES), ("copies", [1, 3, 8]),
                         ("patch", [[64, 64, 64], [96, 96, 96]])):
        if rng.random() < 0.5:
            d[key] = rng.choice(choices)
    if rng.random() < 0.4:
        d["work_buffers"] = _work_buffers(rng)


def _array(rng: random.Random, d: dict) -> None:
    d["arrays"] = [
        {k: v for k, v in {"name": f"x{i}",
                           "shape": [rng.choice([16, 100, 1024, 4096])
                                     for _ in range(rng.randint(1, 4))],
                           "dtype": rng.choice([None] + DTYPES),
                           "count": rng.choice([None, 1, 2, 5])}.items() if v is not None}
        for i in range(rng.randint(0, 4))]
    if rng.random() < 0.5:
        d["work_buffers"] = _work_buffers(rng)
    if rng.random() < 0.3:
        d["copies"] = rng.choice([1, 2, 4])
    if rng.random() < 0.2:
        d["dtype"] = rng.choice(DTYPES)


def _combos() -> list[tuple[str | None, str]]:
    """(family, task) of every task every family supports; family None: model-less tasks."""
    fams = sorted({m.family for m in list_models()})
    out = [(f, t) for f in fams for t in valid_tasks(list_models(f)[0])]
    return out + [(None, t) for t in valid_tasks(None)]


def generated_inputs(n: int = N_DRAFTS, seed: int = SEED) -> tuple[list[tuple[str, dict]], int]:
    """(label, scenario dict) of the accepted drafts, and how many from_dict rejected."""
    rng = random.Random(seed)
    combos = _combos()
    # round-robin, so every family/task appears; the model-less tasks (many keys, cheap) twice
    schedule = combos + [(None, t) for t in valid_tasks(None)]
    models = {f: list_models(f) for f, _ in combos if f is not None}
    accepted, rejected = [], 0
    for i in range(n):
        fam, task = schedule[i % len(schedule)]
        d: dict = {"task": task, "gpu": rng.choice(GPUS)}
        if fam is None:
            {"render": _render, "volume": _volume, "array": _array}[task](rng, d)
        else:
            spec = rng.choice(models[fam])
            if fam in TRANSFORMER and rng.random() < 0.08:
                d["architecture"] = {"params": rng.choice([1.5e8, 1e9, 7e9, 3e10])}
                spec = Scenario.from_dict({"architecture": d["architecture"], "task": "load"}).spec
            else:
                d["model"] = spec.id
            if fam in TRANSFORMER:
                _transformer(rng, d, spec, task)
            elif fam in VISION:
                _vision(rng, d, spec, task)
            else:
                _diffusion(rng, d, spec, task)
        d = {k: v for k, v in d.items() if v not in ((), [])
             or k in ("render_targets", "arrays")}
        try:
            Scenario.from_dict(d)
        except ScenarioError:
            rejected += 1
            continue
        accepted.append((f"gen:{i:04d}:{fam or '-'}:{task}", d))
    return accepted, rejected


# ---- the table -------------------------------------------------------------------------------

def estimate_line(label: str, raw: dict, gpu: str) -> dict:
    """One table row: the scenario, the GPU and the estimate's JSON (through json so that tuples
    read as lists, exactly as the stored line does)."""
    sc = Scenario.from_dict(raw)
    est = estimate(sc, gpu).to_dict()
    # Nothing to drop: to_dict() carries no version, time or path (see the module docstring).
    row = {"id": label, "input": raw, "scenario": sc.to_dict(), "gpu": gpu, "estimate": est}
    return json.loads(dumps(row))


def dumps(row: dict) -> str:
    return json.dumps(row, sort_keys=True, allow_nan=False)


def build() -> tuple[list[str], dict]:
    rows, info = [], {}
    fid = fidelity_inputs()
    gen, rejected = generated_inputs()
    refused = []
    for label, raw in fid + gen:
        gpu = Scenario.from_dict(raw).gpu
        try:
            rows.append(dumps(estimate_line(label, raw, gpu)))
        except ScenarioError:   # valid keys the workload refuses (offload 'params' unsharded)
            if not label.startswith("gen:"):
                raise
            refused.append(label)
    gen = [(label, raw) for label, raw in gen if label not in refused]
    counts = Counter()
    for label, raw in gen:
        _, _, fam, task = label.split(":")
        counts[(fam, task)] += 1
    missing = [c for c in _combos() if (c[0] or "-", c[1]) not in counts]
    if missing:
        raise SystemExit(f"no generated scenario for family/task {missing}")
    if len(gen) < MIN_ACCEPTED:
        raise SystemExit(f"only {len(gen)} generated scenarios accepted (< {MIN_ACCEPTED})")
    info = {"fidelity": len(fid), "generated": len(gen), "rejected": rejected,
            "refused_by_estimate": len(refused),
            "by_family_task": {f"{f}/{t}": n for (f, t), n in sorted(counts.items())}}
    return rows, info


def refresh() -> tuple[list[str], dict]:
    """Re-estimate the stored inputs, row by row (the table's scenarios stay the same ones even
    when the catalog grows and the generator would draw others); a row whose input is now
    refused by `Scenario.from_dict` (a rule added on purpose) is dropped and named."""
    rows, dropped = [], []
    for line in GOLDEN.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        old = json.loads(line)
        try:
            rows.append(dumps(estimate_line(old["id"], old["input"], old["gpu"])))
        except ScenarioError as exc:
            if not old["id"].startswith("gen:"):
                raise
            dropped.append(f"{old['id']}: {exc}")
    return rows, {"rows": len(rows), "dropped": dropped}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the table would change")
    ap.add_argument("--refresh", action="store_true",
                    help="re-estimate the stored rows instead of drawing the scenarios anew")
    a = ap.parse_args(argv)
    rows, info = refresh() if a.refresh else build()
    text = "\n".join(rows) + "\n"
    print(json.dumps(info, indent=1))
    if a.check:
        same = GOLDEN.exists() and GOLDEN.read_text() == text
        print("unchanged" if same else f"{GOLDEN} would change")
        return 0 if same else 1
    GOLDEN.write_text(text)
    print(f"wrote {len(rows)} rows to {GOLDEN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
