"""Diffusion pipelines as a workload family: the tasks they take and the keys their catalog
config decides (resolution, frames, text_len, steps, guidance)."""
from __future__ import annotations

from ...errors import ScenarioError
from ...vocab import DIFFUSION_FAMILIES
from ..family import Family

TASKS = ("train", "lora", "forward", "denoise", "load")
# "llm-encoder": a decoder LLM's hidden states as the prompt embedding (Qwen-Image's
# Qwen2.5-VL-7B, read at its last layer over the prompt template)
TEXT_ENCODERS = ("clip-text", "t5-encoder", "llm-encoder")
# guidance modes: "cfg" doubles the batch of one denoiser call; "cfg-sequential" runs the
# conditional and the unconditional call one after the other at the prompt's batch (WanPipeline,
# QwenImagePipeline's true CFG: twice the compute, not twice the activations); "distilled" runs
# one call (the scale is an input of the transformer)
CFG_GUIDANCE = ("cfg", "cfg-sequential")
SAMPLING_TASKS = ("forward", "denoise", "load")   # tasks that read `steps` and `guidance`
# LoRA target names the denoiser's attention projections go by (diffusers' to_q / to_k / to_v /
# to_out.0; the query / key / value and q_proj / k_proj / v_proj spellings of other ports):
# footprint.py counts adapters on up to four of them per attention layer
LORA_TARGETS = ("to_q", "to_k", "to_v", "to_out.0", "query", "key", "value", "q_proj",
                "k_proj", "v_proj")


def lora_target_check(spec, targets) -> tuple[list, tuple]:
    """(the targets the denoiser has no module for, the valid names): exact names."""
    bad = [t for t in targets if t not in LORA_TARGETS]
    return bad, LORA_TARGETS if bad else ()

def scenario_defaults(task: str, spec) -> dict:
    """What a scenario leaves out and the pipeline decides (the family's defaults hook), from
    the catalog config: `resolution` (`default_resolution`, the pipeline's native size),
    `frames` (`default_frames`, video pipelines), `text_len` (the tokenizer max length of the
    encoder `text_len` sizes: the T5 encoder's `max_tokens`, else CLIP's 77; none for
    class-conditional pipelines), and for the tasks that sample, `steps` (`default_steps`) and
    `guidance` (true where the pipeline uses classifier-free guidance, `guidance: "cfg"` or
    `"cfg-sequential"`, unless `guidance_default` says otherwise: QwenImagePipeline runs true
    CFG only when given a negative prompt; false for guidance-distilled ones such as
    FLUX.1-dev/schnell). Training reads neither.
    A config without them gets 1024 x 1024, 1 frame, 50 steps."""
    cfg = spec.config
    out: dict = {"resolution": [int(r) for r in cfg.get("default_resolution", (1024, 1024))]}
    if cfg.get("video"):
        out["frames"] = int(cfg.get("default_frames", 1))
    enc = [c for c in cfg["components"].values() if c["kind"] in TEXT_ENCODERS]
    if enc:
        t5 = [c for c in enc if c["kind"] == "t5-encoder"]
        out["text_len"] = int(max(c["max_tokens"] for c in (t5 or enc)))
    if task in SAMPLING_TASKS:
        out["steps"] = int(cfg.get("default_steps", 50))
        out["guidance"] = bool(cfg.get("guidance_default", cfg.get("guidance") in CFG_GUIDANCE))
    return out


# denoiser kinds whose diffusers pipeline rounds a size that is not a multiple down (with a
# warning) instead of refusing it: FluxPipeline.prepare_latents, 2 * (h // (vae_scale * 2))
# (QwenImagePipeline.check_inputs warns and prepare_latents rounds the same way)
RESIZES = ("flux", "qwen-image")


def geometry_rule(spec) -> dict:
    """What sizes a pipeline takes, from its catalog config (data a form can show):
    `multiple` (each side of `resolution`: the VAE's downsampling, times the 2x2 patches of a
    transformer denoiser; diffusers' check_inputs refuses other sizes), `why`, `resizes`
    (rounds down instead) and, for video, `frames_step` (frames = 1 + a multiple of the VAE's
    temporal compression: the causal 3-D VAE encodes the first frame alone)."""
    comps = spec.config["components"]
    vae = comps["vae"]
    den = next(c for n, c in comps.items() if n in ("unet", "transformer"))
    ds = int(vae.get("downsample", 8))
    if den["kind"] == "unet":
        mult, why = ds, f"the VAE downsamples by {ds}"
    else:
        p = int(den.get("patch", 2))
        mult, why = ds * p, f"the VAE downsamples by {ds} and the transformer takes {p}x{p} patches"
    rule = {"multiple": mult, "why": why, "resizes": den["kind"] in RESIZES}
    if spec.config.get("video"):
        rule["frames_step"] = int(vae.get("temporal_compression", 1))
    return rule


def _nearest(v: int, m: int) -> str:
    lo, hi = v // m * m, -(-v // m) * m
    return f"{hi}" if lo < m else f"{lo} or {hi}"


def check_geometry(spec, resolution, frames) -> tuple[int, int, list[str]]:
    """(height, width the pipeline runs at, notes) for the scenario's `resolution` and
    `frames`; ScenarioError naming the key and the nearest valid values for sizes the pipeline
    refuses (diffusers check_inputs), a note for sizes it rounds down."""
    rule = geometry_rule(spec)
    m = rule["multiple"]
    h, w = int(resolution[-2]), int(resolution[-1])
    notes: list[str] = []
    bad = [v for v in (h, w) if v % m]
    if bad:
        if rule["resizes"] and min(h, w) >= m:
            h2, w2 = h // m * m, w // m * m
            notes.append(f"resolution {h}x{w} is not a multiple of {m} ({rule['why']}): the "
                         f"pipeline rounds it down and runs at {h2}x{w2}")
            h, w = h2, w2
        else:
            near = "; ".join(f"{v} -> {_nearest(v, m)}" for v in dict.fromkeys(bad))
            raise ScenarioError("resolution", f"must be a multiple of {m} for {spec.id} "
                                              f"({rule['why']}): nearest valid {near}")
    step = rule.get("frames_step")
    if step and frames is not None and (int(frames) - 1) % step:
        f = int(frames)
        lo, hi = (f - 1) // step * step + 1, -(-(f - 1) // step) * step + 1
        raise ScenarioError("frames", f"must be 1 + a multiple of {step} for {spec.id} (its "
                                      f"causal VAE compresses time by {step} after the first "
                                      f"frame): nearest valid {lo} or {hi}")
    return h, w, notes


FAMILY = Family(name="diffusion", families=DIFFUSION_FAMILIES,
                tasks={f: TASKS for f in DIFFUSION_FAMILIES}, defaults=scenario_defaults,
                lora_targets=lora_target_check)
