"""Vision models (CNNs, ViTs, detection, segmentation, U-Nets) as a workload family: the tasks
they take and the scenario key their catalog config decides (the native resolution)."""
from __future__ import annotations

from ...vocab import VISION_FAMILIES
from ..family import Family

TASKS = ("train", "forward", "load")


def native_resolution(cfg: dict) -> tuple:
    """The model's native input size: its catalog config's `resolution` (224 x 224 where a
    config has none)."""
    return tuple(int(r) for r in cfg.get("resolution", (224, 224)))


def resolution_rule(cfg: dict) -> dict | None:
    """What each side of `resolution` must be a multiple of for this model (data a form can
    show), or None: a ViT's patch size (the patchify convolution would drop a partial patch;
    torchvision asserts the size, Hugging Face interpolates the position embedding but still
    takes whole patches), a U-Net's 2^(levels - 1) (every max-pool halves the map and the
    up-path concatenates each level's skip, which must match exactly). CNNs, Swin (Hugging Face
    pads to its windows) and the mmdet / mmseg models (they pad) take any size, as does a ViT
    whose config says `drops_partial_patch` (transformers' SigLIP runs its stride-p patch conv
    on any size and drops the remainder: So400m/14 at 384 px sees 27 x 27 patches)."""
    if cfg.get("arch") == "vit" and cfg.get("drops_partial_patch"):
        return None     # SigLIP So400m/14 at 384 px: the stride-14 conv keeps 27 x 27 patches
    if cfg.get("arch") == "vit":
        p = int(cfg.get("patch", 16))
        return {"multiple": p, "why": f"it cuts the image into {p}x{p} patches"}
    if cfg.get("arch") == "sam2":   # a 4-stride patch conv and three 2x2 query pools
        return {"multiple": 32, "why": "its patch conv strides 4 and three stages pool 2x2"}
    if cfg.get("arch") == "unet":
        m = 2 ** (len(cfg.get("channels", ())) - 1)
        return {"multiple": m, "why": f"{len(cfg['channels']) - 1} max-pool levels whose skips "
                                      "the up-path concatenates"}
    return None


def scenario_defaults(task: str, spec) -> dict:
    """What a scenario leaves out and the model decides: the native resolution, every task."""
    return {"resolution": list(native_resolution(spec.config))}


FAMILY = Family(name="vision", families=VISION_FAMILIES,
                tasks={f: TASKS for f in VISION_FAMILIES}, defaults=scenario_defaults)
