"""Pixtral's image processor (Mistral Small 3.x): the longest-edge clamp, then sides rounded up
to a merged patch (catalog/pixtral_resize.py; transformers 5.23
models/pixtral/image_processing_pixtral.py get_resize_output_image_size, processing_pixtral.py
_process_images / replace_image_token). Mistral Small 3.2: patch 14, spatial_merge_size 2
(merged patch 28), vision_config image_size = preprocessor longest_edge 1540."""
from vramplan.catalog import get_model
from vramplan.catalog.images import image_cost
from vramplan.catalog.pixtral_resize import grid, resized

MISTRAL = "mistralai/Mistral-Small-3.2-24B-Instruct-2506"


def test_a_large_photo_is_clamped_to_the_longest_edge_by_hand():
    """4000 x 1000: ratio max(4000, 1000) / 1540 = 2.597; sides floor(4000 / 2.597) = 1540
    (or 1539 by float rounding: both give (side - 1) // 28 + 1 = 55 rows) and floor(1000 /
    2.597) = 385 -> 384 // 28 + 1 = 14 cols: 55 x 14 + 55 [IMG_BREAK] = 825 tokens; the tower
    runs (55 x 2) x (14 x 2) = 3080 patches of 14. Without the clamp it was 143 x 36 + 143 =
    5291 tokens and 286 x 72 = 20592 patches."""
    cost = image_cost(get_model(MISTRAL).config, 4000, 1000)
    assert (cost.decoder_tokens, cost.tower_tokens) == (55 * 14 + 55, 110 * 28) == (825, 3080)


def test_sides_round_up_to_the_merged_patch_by_hand():
    """500 x 310 fits 1540: rows 499 // 28 + 1 = 18, cols 309 // 28 + 1 = 12: 18 x 12 + 18 =
    234 tokens; the processor pads the image to 504 x 336, so the tower runs 36 x 24 = 864
    patches (not ceil(500 / 14) x ceil(310 / 14) = 36 x 23 = 828)."""
    cost = image_cost(get_model(MISTRAL).config, 500, 310)
    assert (cost.decoder_tokens, cost.tower_tokens) == (234, 864)


def test_resize_keeps_small_images_and_never_passes_the_edge():
    assert resized(448, 448, 1540) == (448, 448)
    assert resized(1540, 1540, 1540) == (1540, 1540)
    h, w = resized(3001, 1999, 1024)
    assert max(h, w) <= 1024 and (h, w) in ((1024, 682), (1023, 682))
    rows, cols, patches = grid(3001, 1999, 16, 1, 1024)   # Pixtral-12B: patch 16, no merge
    assert (rows, cols, patches) == (64, 43, 64 * 43)
