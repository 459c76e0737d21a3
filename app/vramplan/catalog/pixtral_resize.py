"""The size Pixtral's image processor gives an image, and its tokens (Mistral 3 / Pixtral).

transformers 5.23 models/pixtral/image_processing_pixtral.py `get_resize_output_image_size`:
with `longest_edge` L, ratio = max(h / L, w / L); above 1 both sides are divided by it and
floored (`int(math.floor(height / ratio))`: never past L); then each side is rounded *up* to a
multiple of the processor's patch (`_num_image_tokens`: (side - 1) // patch + 1 patches), and
that patch is patch_size x spatial_merge_size (processing_pixtral.py `_process_images`:
`images_kwargs["patch_size"] = self.patch_size * self.spatial_merge_size`). The text holds one
token per merged patch and one [IMG_BREAK] per row (the last one is [IMG_END]:
`replace_image_token`, processing_pixtral.py), so rows x cols + rows tokens; the tower's
Conv2d cuts (rows x merge) x (cols x merge) patches of patch_size.

L is the checkpoint's preprocessor_config.json `size.longest_edge`, the same number as its
vision_config `image_size` ("max dimension of the input images", PixtralVisionConfig; default
1024): mistralai/Mistral-Small-3.1-24B-Instruct-2503 1540 in both, mistral-community/pixtral-12b
1024 in both.
"""
from __future__ import annotations

import math


def resized(height: int, width: int, longest_edge: int) -> tuple[int, int]:
    """(h, w) after the longest-edge clamp (floored; unchanged when both fit)."""
    ratio = max(height / longest_edge, width / longest_edge)
    if ratio > 1:
        height, width = int(math.floor(height / ratio)), int(math.floor(width / ratio))
    return height, width


def grid(height: int, width: int, patch: int, merge: int,
         longest_edge: int) -> tuple[int, int, int]:
    """(rows, cols of merged patches, tower patches) of one height x width image."""
    h, w = resized(height, width, longest_edge)
    side = patch * merge
    rows, cols = (h - 1) // side + 1, (w - 1) // side + 1
    return rows, cols, rows * cols * merge * merge


def tokens(height: int, width: int, patch: int, merge: int, longest_edge: int) -> int:
    """Decoder tokens of one image: a token per merged patch plus one a row."""
    rows, cols, _ = grid(height, width, patch, merge, longest_edge)
    return rows * cols + rows
