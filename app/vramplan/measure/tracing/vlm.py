"""A vision-language model traced whole, its images included (issue 21 Build 7).

A transformers VLM's forward reads data from small integer tensors: the image grid
(`image_grid_thw`), the placeholder count it checks against the image features
(`get_placeholder_mask`), the packed-sequence boundaries of the vision tower's attention
(`cu_seqlens`, split by `.tolist()` on the SDPA path), Qwen's M-RoPE positions
(`get_rope_index`, a Python loop over token groups) and Gemma 3's image blocks
(`get_block_sequence_ids_for_mask`). Fake tensors hold no data, so those reads fail.

Here those tensors are real: the token ids, the grid, the token types and the values
transformers lets a caller precompute (`vision_utils.get_vision_window_index`'s
`window_index` / `cu_window_seqlens` kwargs; the text `position_ids`, computed by the model's
own `get_rope_index` on real CPU tensors, so its Python loop runs on data) are built as
*constant* fake tensors (`torch.tensor(...)` inside FakeTensorMode keeps the value), and
`constants()` raises FakeTensorMode's constant-propagation limit (`CONSTANT_NUMEL_LIMIT`, 1
element by default) while the steps run (the job's `context`: forward, backward, generate), so an op whose inputs are all such constants is
computed for real (`input_ids == image_token_id`, its sum, `cu_seqlens[1:] - cu_seqlens[:-1]`).
Every op that touches a weight or an activation stays fake; the bytes counted are the same
storages a GPU run allocates (the constants are counted too: they are tensors the run holds).

Inputs, as the processors lay them out (transformers 5.23):

* Qwen2-VL / Qwen2.5-VL / Qwen3-VL (`Qwen2VLImageProcessor`, catalog/qwen_resize.py): an image
  of h x w becomes `grid` (1, h'/p, w'/p) patches of 3 x temporal_patch_size x p x p values
  (pixel_values is (patches, 3 * 2 * p * p)); the text holds its decoder tokens
  (`image_token_id`) between `vision_start_token_id` and `vision_end_token_id`; mm_token_type_ids
  marks them (1) for `get_rope_index`.
* Gemma 3 (`Gemma3Processor.full_image_sequence`): `boi_token_index`, mm_tokens_per_image
  `image_token_index`, `eoi_token_index`; pixel_values (images, 3, image_size, image_size);
  `token_type_ids` (the processor's mm_token_type_ids) 1 on the image tokens, which makes the
  image block attend bidirectionally (`create_masks_for_vision_model`).

The sequence is the scenario's seq_len text tokens (the image delimiters among them) plus
`images` x each image's decoder tokens, as the estimate counts it
(workloads/transformer/vision_inputs.py). Training labels are the ids (the placeholders
included: the loss memory does not depend on which labels are masked).
"""
from __future__ import annotations

import contextlib

import torch

from ...catalog.images import vision_config
from ...catalog.qwen_resize import QWEN_PIXELS, smart_resize
from ...errors import ScenarioError

QWEN = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
TRACED = QWEN + ("gemma3",)
"""parent model_type values whose whole model is traced with images"""


@contextlib.contextmanager
def constants(limit: int = 1 << 22):
    """FakeTensorMode propagates constants up to `limit` elements (default limit: 1)."""
    from torch._subclasses import fake_tensor
    old = fake_tensor.CONSTANT_NUMEL_LIMIT
    fake_tensor.CONSTANT_NUMEL_LIMIT = max(old, limit)
    try:
        yield
    finally:
        fake_tensor.CONSTANT_NUMEL_LIMIT = old


def _real():
    """Real CPU tensors inside the fake mode (the M-RoPE positions are computed on them)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    return unset_fake_temporarily()


def check(config: dict, scn) -> None:
    """Refuse by name what is not traced with images."""
    if config.get("model_type") not in TRACED:
        raise ScenarioError("images", f"the whole model is traced with images for "
                                      f"{', '.join(TRACED)}; not '{config.get('model_type')}'")
    if scn.task not in ("train", "forward", "generate"):
        raise ScenarioError("task", f"a VLM with images is traced for train, forward or "
                                    f"generate; not '{scn.task}'")


def _text(scn, n: int) -> int:
    """Text tokens beside the images' start and end tokens (which seq_len counts)."""
    text = int(scn.seq_len) - 2 * n
    if text < 1:
        raise ScenarioError("seq_len", f"seq_len {scn.seq_len} leaves no text beside {n} "
                                       f"image(s)' start and end tokens")
    return text


def _qwen_layout(config: dict, scn, n: int, ids_of):
    """(token ids of one sample, grid rows (t, h, w) of its images, patch values per patch).
    `ids_of`: the built model's config (its defaults fill the ids a config.json leaves out)."""
    v = vision_config(config)
    kind, p = v["model_type"], int(v.get("patch_size") or v.get("spatial_patch_size"))
    merge, tp = int(v.get("spatial_merge_size", 2)), int(v.get("temporal_patch_size", 2))
    lo, hi = QWEN_PIXELS[kind]
    h, w = smart_resize(int(scn.image_size[0]), int(scn.image_size[1]), p * merge, lo, hi)
    gh, gw = h // p, w // p
    tokens = gh * gw // (merge * merge)
    start, end = int(ids_of.vision_start_token_id), int(ids_of.vision_end_token_id)
    image = [start] + [int(ids_of.image_token_id)] * tokens + [end]
    ids = [1] * _text(scn, n) + image * n
    return ids, [[1, gh, gw]] * n, 3 * tp * p * p


def _gemma_layout(scn, n: int, ids_of):
    tokens = int(ids_of.mm_tokens_per_image)
    image = [int(ids_of.boi_token_index)] + [int(ids_of.image_token_index)] * tokens + [
        int(ids_of.eoi_token_index)]
    return [1] * _text(scn, n) + image * n


def inputs(config: dict, scn, model) -> tuple[tuple, tuple[str, ...]]:
    """(the inputs: ids, pixel values, then the other model kwargs (constants and precomputed
    values), the names of those kwargs). Called inside the fake mode."""
    with constants():
        (ids, pix), kw = _inputs(config, scn, model)
    return (ids, pix, *kw.values()), tuple(kw)


def _inputs(config: dict, scn, model) -> tuple[tuple, dict]:
    b, n = int(scn.batch_size), int(scn.images)
    if config["model_type"] == "gemma3":
        ids = _gemma_layout(scn, n, model.config)
        v = model.config.vision_config
        ids_t = torch.tensor([ids] * b)
        types = torch.tensor([[1 if t == model.config.image_token_index else 0
                               for t in ids]] * b)
        pix = torch.randn(b * n, v.num_channels, v.image_size, v.image_size)
        return (ids_t, pix), {"token_type_ids": types}
    ids, grid, per_patch = _qwen_layout(config, scn, n, model.config)
    image_id = int(model.config.image_token_id)
    mm = [[1 if t == image_id else 0 for t in ids]] * b
    with _real():
        real_ids, real_grid = torch.tensor([ids] * b), torch.tensor(grid * b)
        pos, _ = type(model.model).get_rope_index(
            model.model, real_ids, image_grid_thw=real_grid,
            mm_token_type_ids=torch.tensor(mm, dtype=torch.int32))
        pos = pos.tolist()
        extra = _qwen_window(model, real_grid)
    patches = b * sum(t * h * w for t, h, w in grid)
    pix = torch.randn(patches, per_patch)
    kw = {"image_grid_thw": torch.tensor(grid * b), "position_ids": torch.tensor(pos),
          "mm_token_type_ids": torch.tensor(mm, dtype=torch.int32)}
    if extra:
        kw["window_index"] = torch.tensor(extra[0])
        kw["cu_window_seqlens"] = torch.tensor(extra[1], dtype=torch.int32)
    return (torch.tensor([ids] * b), pix), kw


def _qwen_window(model, grid):
    """Qwen2.5-VL's window attention order (vision_utils.get_vision_window_index on the real
    grid: its loop reads the grid's values), as lists; None for towers without windows."""
    vc = model.config.vision_config
    if getattr(vc, "window_size", None) is None or not hasattr(vc, "fullatt_block_indexes"):
        return None
    from transformers.vision_utils import get_vision_window_index
    wi, cw = get_vision_window_index(grid, vc.spatial_merge_size, vc.window_size,
                                     vc.patch_size)
    return wi.tolist(), cw.tolist()


def calls(names: tuple[str, ...]):
    """(training loss, forward) over the inputs (ids, pixel values, then the kwargs `names`
    in order: the runner tracks every input; it runs these, and backward, inside the job's
    context: constants())."""
    def loss(net, ids, pix, *rest):
        return net(input_ids=ids, pixel_values=pix, labels=ids, **dict(zip(names, rest))).loss

    def fwd(net, ids, pix, *rest):
        return net(input_ids=ids, pixel_values=pix, **dict(zip(names, rest))).logits
    return loss, fwd


def prefill_kwargs(inputs: tuple, names: tuple[str, ...]) -> dict:
    """The prefill's extra inputs for generate (hf.generate_steps): the images and their
    kwargs; decode steps take the new token only (Qwen: positions from rope_deltas or the
    cache length; the text positions' memory is the same)."""
    return {"pixel_values": inputs[1], **dict(zip(names, inputs[2:]))}
