"""Diffusion pipelines as a workload family: the tasks they take and the keys their catalog
config decides (resolution, frames, text_len, steps, guidance)."""
from __future__ import annotations

from ...vocab import DIFFUSION_FAMILIES
from ..family import Family

TASKS = ("train", "lora", "forward", "denoise", "load")
TEXT_ENCODERS = ("clip-text", "t5-encoder")
SAMPLING_TASKS = ("forward", "denoise", "load")   # tasks that read `steps` and `guidance`

def scenario_defaults(task: str, spec) -> dict:
    """What a scenario leaves out and the pipeline decides (the family's defaults hook), from
    the catalog config: `resolution` (`default_resolution`, the pipeline's native size),
    `frames` (`default_frames`, video pipelines), `text_len` (the tokenizer max length of the
    encoder `text_len` sizes: the T5 encoder's `max_tokens`, else CLIP's 77; none for
    class-conditional pipelines), and for the tasks that sample, `steps` (`default_steps`) and
    `guidance` (true where the pipeline uses classifier-free guidance, `guidance: "cfg"`;
    false for guidance-distilled ones such as FLUX.1-dev/schnell). Training reads neither.
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
        out["guidance"] = cfg.get("guidance") == "cfg"
    return out


FAMILY = Family(name="diffusion", families=DIFFUSION_FAMILIES,
                tasks={f: TASKS for f in DIFFUSION_FAMILIES}, defaults=scenario_defaults)
