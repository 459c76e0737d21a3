"""Qwen2-VL / Qwen2.5-VL / Qwen3-VL: the size their image processor resizes an image to, and so
the image's tokens (issue 21 Build 4). No import from the rest of the catalog: nested.py's
image_tokens and images.py's image_cost both read it.

transformers 5.23 models/qwen2_vl/image_processing_qwen2_vl.py: `smart_resize` and
`Qwen2VLImageProcessor.get_number_of_image_patches` (grid = resized side // patch_size, factor =
patch_size x merge_size); models/auto/image_processing_auto.py maps qwen2_5_vl and qwen3_vl to
the same Qwen2VLImageProcessor. The decoder sees grid / merge^2 tokens (the PatchMerger).
"""
from __future__ import annotations

import math

from ..errors import ScenarioError

# (min_pixels, max_pixels) of the processor a checkpoint ships (its preprocessor_config.json,
# which `AutoProcessor.from_pretrained` reads over the class defaults): Qwen/Qwen2-VL-7B-Instruct
# and Qwen/Qwen2.5-VL-7B-Instruct give "min_pixels": 3136, "max_pixels": 12845056 (4 to 16384
# tokens of 28 x 28); Qwen/Qwen3-VL-8B-Instruct gives "size": {"shortest_edge": 65536,
# "longest_edge": 16777216} (64 to 16384 tokens of 32 x 32). Qwen2VLImageProcessor's own
# default, size {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280}, applies only to a
# processor built without that file, and is not what a loaded checkpoint runs.
QWEN_PIXELS = {"qwen2_vl": (3136, 12_845_056), "qwen2_5_vl": (3136, 12_845_056),
               "qwen3_vl": (65_536, 16_777_216)}
MAX_ASPECT = 200   # smart_resize raises past an aspect ratio of 200


def smart_resize(height: int, width: int, factor: int, min_pixels: int,
                 max_pixels: int) -> tuple[int, int]:
    """The size Qwen2VLImageProcessor resizes an image to (transformers 5.23
    image_processing_qwen2_vl.smart_resize, the same steps): each side rounded (Python's round)
    to a multiple of `factor`; above max_pixels both sides scaled by sqrt(h w / max_pixels) and
    floored to the multiple (at least `factor`); below min_pixels scaled up by
    sqrt(min_pixels / (h w)) and ceiled. Raises ScenarioError('image_size') past the
    processor's aspect ratio of 200."""
    if max(height, width) / min(height, width) > MAX_ASPECT:
        raise ScenarioError("image_size", f"{height} x {width}: the Qwen-VL processor refuses "
                            f"an aspect ratio above {MAX_ASPECT} (smart_resize)")
    h, w = round(height / factor) * factor, round(width / factor) * factor
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def grid(kind: str, patch: int, merge: int, height: int, width: int) -> tuple[int, int]:
    """(decoder tokens, tower patches) of one height x width image for the tower `kind`
    (a QWEN_PIXELS key): smart_resize with its checkpoint's pixel limits, patches of `patch`,
    merge x merge of them per decoder token."""
    lo, hi = QWEN_PIXELS[kind]
    h, w = smart_resize(height, width, patch * merge, lo, hi)
    patches = (h // patch) * (w // patch)
    return patches // (merge * merge), patches
