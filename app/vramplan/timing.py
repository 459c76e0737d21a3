"""How long a step must take at least: the roofline of one step from the bytes it moves and
the FLOPs it computes, against the GPU's bandwidth and dense tensor throughput.

A workload's footprint states, per GPU and per step, `bytes_per_step` (HBM traffic) and, where
it can count them, `flops_per_step` with the `compute_dtype` of its matmuls (a key of the
hardware database's dense `throughput`). `roofline()` adds:

| key | meaning |
| --- | --- |
| `memory_floor_s` | bytes_per_step / achievable bandwidth |
| `peak_tflops` | dense datasheet TFLOPS of `compute_dtype` (after the fallbacks below) |
| `compute_floor_s` | flops_per_step / peak_tflops |
| `min_step_time_s` | max(memory_floor_s, compute_floor_s): no step is faster |
| `min_step_time_datasheet_s` | the same with the datasheet bandwidth |
| `bound` | "memory" or "compute": which floor is higher |
| `arithmetic_intensity` | flops_per_step / bytes_per_step, FLOP per byte |
| `ridge_intensity` | peak FLOP/s / achievable bytes/s: above it a step is compute-bound |
| `attainable_tflops` | min(peak, intensity x achievable bandwidth): the roofline's height |
| `needed_bandwidth_gbs` | bytes_per_step / compute_floor_s: the bandwidth at which memory stops limiting |
| `max_tokens_per_s` | tokens_per_step / min_step_time_s (both floors) |
| `memory_bound_tokens_per_s`, `compute_bound_tokens_per_s` | tokens_per_step over each floor alone |
| `min_time_per_image_s`, `max_images_per_s` | with `flops_per_image` (vision, diffusion): the step floor x flops_per_image / flops_per_step (one image's share of the step, its steps for a diffusion image), and its inverse |
| `workload_kind` | given by the footprint ("cnn", "vit", "detection", "segmentation", "diffusion", "llm-inference" (a transformer's forward / generate / serve), "inference" (a vision forward); absent: "llm"): which measured efficiency the note quotes |
| `host_link_floor_s`, `host_link_tokens_per_s` | with weights in host memory (`host_read_bytes_per_step`): those bytes over the host link (`host_link_gbs`, `host_link`), a third floor |

Both floors are bounds, not predictions: real steps add kernel launch gaps, communication and
less-than-peak matmul efficiency, so a measured step is slower. The roofline note quotes a
measured efficiency for the workload's kind (`workload_kind` in the bandwidth dict, default
"llm"; `MEASURED_EFFICIENCY` below, each with its source), or says that none is known: an
LLM's MFU is never quoted for a U-Net or a CNN. Without `flops_per_step` (a workload whose
FLOPs are not modelled) the step floor is the memory floor alone and a note says so.
"""
from __future__ import annotations

from .hardware.capabilities import compute_dtype  # noqa: F401 (the footprints' compute_dtype)
from .hardware.capabilities import dense_rate
from .hardware.links import host_link
from .units import format_flop


# what a measured step of each kind of workload reaches against the dense datasheet peak
MEASURED_EFFICIENCY = {
    "llm": "measured LLM training reaches about 40% of it (Llama 3 on H100: 38-43% BF16 MFU, "
           "Llama 3 paper, Dubey et al. 2024, Table 4)",
    "cnn": "measured CNN training reaches about 20% of it (ResNet-50 v1.5 with AMP on one "
           "A100 80GB: 2,470 images/s, NVIDIA DeepLearningExamples PyTorch RN50v1.5 README, "
           "pytorch-21.03; x 24.3 GFLOP per image = 60 TFLOPS of the 312 dense fp16)",
    "vit": "measured ViT training: ViT-22B reached 54.9% model FLOPs utilisation on TPU v4 "
           "(Dehghani et al. 2023, arXiv:2302.05442); no measured GPU figure for ViT-B / L "
           "sized models is known to vramplan, and smaller models reach less",
    "detection": "no measured FLOPs utilisation for detection training is known to vramplan",
    "segmentation": "no measured FLOPs utilisation for segmentation training is known to "
                    "vramplan",
    "diffusion": "no measured FLOPs utilisation for diffusion denoisers (U-Net, DiT) is known "
                 "to vramplan; LLM MFU figures do not transfer",
    # inference (an LLM's forward / generate / serve, a vision model's forward): the training
    # MFU above does not transfer, and vramplan holds no measured inference utilisation
    "llm-inference": "no measured FLOPs utilisation for LLM inference is known to vramplan "
                     "(the 40% MFU is a training figure)",
    "inference": "no measured FLOPs utilisation for inference is known to vramplan (the "
                 "training figures do not transfer)",
}
# an inference step below the ridge (an LLM decode step: every weight and the KV read for one
# token per sequence) is limited by the bytes it reads: the memory floor is its floor
MEMORY_BOUND_INFERENCE = ("this step is memory-bound, so its floor is the memory floor (the "
                          "bytes it reads over the achievable bandwidth), not the FLOPs")


def efficiency_note(kind: str | None, bound: str | None = None) -> str:
    """The measured-efficiency clause of the roofline note for a workload kind; for an
    inference kind below the ridge (`bound` 'memory') it says the memory floor is the floor."""
    text = MEASURED_EFFICIENCY.get(kind or "llm",
                                   "no measured FLOPs utilisation for this workload is known "
                                   "to vramplan")
    if bound == "memory" and (kind or "").endswith("inference"):
        text += "; " + MEMORY_BOUND_INFERENCE
    return text


def _rate(device, dtype: str) -> tuple[float | None, str]:
    """(dense TFLOPS, dtype it is for): the one precision -> rate table of
    `hardware.capabilities` (the roofline chart reads the same)."""
    return dense_rate(device, dtype)


def roofline(bw: dict, device) -> tuple[dict, list[str]]:
    """`bw` (a footprint's bandwidth dict with datasheet/achievable bandwidth already added)
    with the keys of the module table; and the notes it implies."""
    out = dict(bw)
    notes: list[str] = []
    step = out.get("bytes_per_step")
    ach = float(out.get("achievable_bandwidth_gbs") or 0) * 1e9
    peak_bw = float(out.get("datasheet_bandwidth_gbs") or 0) * 1e9
    if not step or ach <= 0:
        return out, notes
    mem = step / ach
    out["memory_floor_s"] = mem
    floor, floor_ds = mem, step / peak_bw if peak_bw else mem
    flops = out.get("flops_per_step")
    tokens = out.get("tokens_per_step")
    if flops:
        want = out.get("compute_dtype") or "bf16"
        tflops, used = _rate(device, want)
        if tflops:
            comp = flops / (tflops * 1e12)
            out["peak_tflops"] = tflops
            if used != want:
                out["compute_rate_dtype"] = used
                notes.append(f"compute floor at the {used} rate: the GPU has no {want} "
                             f"throughput in the hardware database")
            out["compute_floor_s"] = comp
            out["arithmetic_intensity"] = flops / step
            out["ridge_intensity"] = tflops * 1e12 / ach
            out["attainable_tflops"] = min(tflops, flops / step * ach / 1e12)
            out["bound"] = "compute" if comp > mem else "memory"
            out["needed_bandwidth_gbs"] = step / comp / 1e9
            if tokens:
                out["compute_bound_tokens_per_s"] = tokens / comp
            floor, floor_ds = max(mem, comp), max(floor_ds, comp)
            notes.append(f"roofline: {format_flop(flops)} and {step / 1e9:,.2f} GB per step "
                         f"-> {flops / step:,.0f} FLOP/B against the GPU's ridge "
                         f"{tflops * 1e12 / ach:,.0f}: {out['bound']}-bound. The compute floor "
                         f"is at the dense datasheet {used} peak ({tflops:,.1f} TFLOPS); "
                         f"{efficiency_note(out.get('workload_kind'), out['bound'])}, so real steps are "
                         "slower than either floor")
        else:
            notes.append("compute floor not given: the hardware database has no dense "
                         f"throughput for this GPU in {want}; step time is the memory floor")
    else:
        notes.append("compute floor not modelled for this workload (FLOPs not counted): the "
                     "step time and rates are the memory-bandwidth floor only")
    host = _host_floor(out, device, notes)   # weights read from host memory (inference offload)
    floor, floor_ds = max(floor, host), max(floor_ds, host)
    out["min_step_time_s"] = floor
    out["min_step_time_datasheet_s"] = floor_ds
    _per_image(out, floor)
    if tokens:
        out["memory_bound_tokens_per_s"] = tokens / mem
        out["max_tokens_per_s"] = tokens / floor
        if host:
            out["host_link_tokens_per_s"] = tokens / host
    return out, notes


def _per_image(out: dict, floor: float) -> None:
    """min_time_per_image_s / max_images_per_s where the footprint counts FLOPs per image:
    an image's share of the step (1 / batch; x steps for a diffusion image) is
    flops_per_image / flops_per_step, and its bytes scale alike."""
    per, step = out.get("flops_per_image"), out.get("flops_per_step")
    if not per or not step or not floor:
        return
    out["min_time_per_image_s"] = floor * per / step
    out["max_images_per_s"] = step / (floor * per)


def _host_floor(out: dict, device, notes: list[str]) -> float:
    """host_read_bytes_per_step (a footprint with weights in host memory) over the GPU's host
    link (hardware/links.py): host_link_gbs, host_link and host_link_floor_s; 0 without."""
    nbytes = out.get("host_read_bytes_per_step")
    if not nbytes:
        return 0.0
    gbs, name = host_link(device)
    if not gbs:
        notes.append("host-link floor not given: the hardware database has no PCIe / C2C link "
                     "for this GPU")
        return 0.0
    out["host_link_gbs"], out["host_link"] = gbs, name
    out["host_link_floor_s"] = nbytes / (gbs * 1e9)
    notes.append(f"host link: {nbytes / 1e9:,.2f} GB of host-resident weights per step over "
                 f"{name} ({gbs:,.1f} GB/s per direction) take at least "
                 f"{out['host_link_floor_s'] * 1e3:,.1f} ms; the step is no faster")
    return out["host_link_floor_s"]
