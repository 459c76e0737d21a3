"""The images a vision-language model's sample carries: `images` and `image_size` (rows of the
key table, registered in `keys.py`'s EXTRA; issue 21 Build 4).

`images` (per sample) adds each image's tokens to the text decoder's sequence (Qwen2-VL /
Qwen2.5-VL / Qwen3-VL, Gemma 3, Mistral 3, LLaVA) or, for Llama 3.2 Vision, its tiles to the
cross-attention memory, and runs the vision tower over each image (catalog/images.py gives the
rules, workloads/transformer/vision_inputs.py the memory). `image_size` [h, w] applies to the
models whose processor keeps the image's own resolution (Qwen-VL's smart_resize, Pixtral); the
others resize every image to their tower's fixed size and refuse it. Both apply to VLMs only
(a config.json with a `vision_config`): the workload refuses them by name for any other
model, and the page's form shows them for VLMs only (`shown_for`).
"""
from __future__ import annotations

from typing import Any

from ..errors import ScenarioError
from ..readers import read_int
from ..vocab import TRAINING_TASKS
from .schema import Key

MAX_IMAGES = 64          # per sample
MAX_SIDE = 16384         # pixels
IMAGE_TASKS = TRAINING_TASKS + ("forward", "generate")


def is_vlm(spec) -> bool:
    """Does the model carry a vision tower (a nested config.json with `vision_config`)?"""
    config = getattr(spec, "config", None) if spec is not None else None
    return isinstance(config, dict) and isinstance(config.get("vision_config"), dict)


def read_image_size(v: Any) -> tuple[int, int]:
    """[height, width] in pixels ('448,448' and '448x448' too: a link or a flag's text)."""
    if isinstance(v, str) and v.count(",") + v.lower().count("x") == 1:
        parts = v.lower().replace("x", ",").split(",")
        if not all(x.strip().isdigit() for x in parts):
            raise ScenarioError("image_size", f"must be [height, width] in pixels, got {v!r}")
        v = [int(x) for x in parts]
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        raise ScenarioError("image_size", f"must be [height, width] in pixels, got {v!r}")
    return tuple(read_int("image_size", x, 1, MAX_SIDE, whole_floats=True) for x in v)


_WHERE = "vision-language models (a vision_config), tasks train / lora / qlora / forward / generate"
_COMMON = dict(tasks=IMAGE_TASKS, families=("decoder",), where=_WHERE, extra=True,
               whole_floats=True, shown_for=is_vlm)

MULTIMODAL_KEYS = (
    Key("images", "int", "Images per sample", "images in each sample: each adds its tokens "
        "to the decoder's sequence (Qwen-VL: one per 28 x 28 pixels; Gemma 3: 256; Mistral 3: "
        "one per 28 x 28 plus one a row) or, for Llama 3.2 Vision, 4 tiles x 1601 tokens of "
        "cross-attention memory; the vision tower runs over each image", lo=0, hi=MAX_IMAGES,
        unit="images", default_doc="0", **_COMMON),
    Key("image_size", "resolution", "Image size", "[height, width] of each image in pixels, "
        "for the models whose processor keeps the image's resolution (Qwen2-VL / Qwen2.5-VL / "
        "Qwen3-VL smart_resize, Pixtral); the others resize to their tower's size",
        unit="pixels", parse=read_image_size, default_doc="none (required with images for "
        "those models)", **_COMMON),
)


def check_images(spec, extra: dict, seq_len: int | None = None, new_tokens: int = 0) -> None:
    """The rules between the image keys and the model, in the scenario pass (build.fields_of)
    and again in the workload: a model without a vision tower takes neither key; `image_size`
    is required with `images` for the processors that keep the image's resolution and refused
    for the others; `image_size` alone has no images to size. With `seq_len`, the sequence with
    its new tokens and image tokens must fit the model's positions (`check_context`)."""
    from ..catalog.images import is_dynamic, vision_config
    n, size = int(extra.get("images") or 0), extra.get("image_size")
    if spec is None or (not n and size is None):
        return
    config = spec.config if isinstance(spec.config, dict) else {}
    if vision_config(config) is None:
        raise ScenarioError("images" if n else "image_size", f"'{spec.id}' takes no images: "
                            "its config.json has no vision_config (no vision tower)")
    if size is not None and not is_dynamic(config):
        raise ScenarioError("image_size", f"'{spec.id}' resizes every image to its vision "
                            "tower's size; image_size applies to Qwen-VL and Pixtral "
                            "(processors that keep the image's resolution)")
    if size is None and is_dynamic(config):
        raise ScenarioError("image_size", f"'{spec.id}' keeps each image's resolution (its "
                            "tokens follow it): give image_size [height, width] with images")
    if not n:
        raise ScenarioError("image_size", "give images (per sample) with image_size")
    if seq_len:
        check_context(spec, n, size, seq_len, new_tokens or 0)


def check_context(spec, images: int, size, seq_len: int, new_tokens: int = 0) -> None:
    """seq_len + new_tokens + images x each image's decoder tokens must fit the positions the
    model has (rules.position_limit, the check seq_len alone gets in build.fields_of: the
    image tokens take text positions in Qwen-VL, Gemma 3, Mistral 3 and LLaVA; Llama 3.2
    Vision's cross-attention memory takes none). The error names `seq_len` with the longest
    one that fits (so Scenario.replace, which drops a refused key not asked for, keeps the
    images), or `images` when no seq_len fits them."""
    from ..catalog.images import image_cost
    from .rules import position_limit
    h, w = size if size is not None else (None, None)
    per = image_cost(spec.config, h, w).decoder_tokens
    lim = position_limit(spec)
    total = seq_len + new_tokens + images * per
    if not per or lim is None or total <= lim[0]:
        return
    room = lim[0] - new_tokens - images * per
    sum_ = (f"seq_len {seq_len:,} + new_tokens {new_tokens:,} + {images} image(s) x {per:,} "
            f"tokens = {total:,} exceeds the {lim[0]:,} positions '{spec.id}' has ({lim[1]})")
    if room < 1:
        raise ScenarioError("images", f"{sum_}; fewer or smaller images fit")
    raise ScenarioError("seq_len", f"{sum_}; with these images seq_len fits up to {room:,}")
