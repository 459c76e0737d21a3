"""The images of a vision-language model's samples (`images`, `image_size`;
scenario/multimodal_keys.py): their tokens in the text decoder and the vision tower's memory.

`apply(ctx, spec)` runs before the task: it refuses the keys by name for a model without a
vision tower, adds `images x decoder tokens` (catalog/images.py) to each sequence, so the KV
cache, the decoder's activations and the logits see them, and returns the plan. `finish(fp,
plan)` adds, after the task's own phases are built:

* the vision tower over `b x images x tower tokens` (catalog/images.py), as a text-model block
  walk of the tower's shape (activations.py): at inference (forward, generate's prefill) and
  for a frozen tower (lora / qlora: no parameter of the tower requires grad and pixel values do
  not, so autograd saves nothing in it) one block's tensors at a time (`inference_coeff`),
  before the decoder's prefill, so the phase holds the larger of the two; in full training
  every block's saved tensors (`layer_coeffs` with the step's kernels; under activation
  checkpointing each block's input plus one block's), alive with the decoder's.
* Llama 3.2 Vision's cross-attention memory: 4 tiles x 1601 tokens an image, whose K and V
  each of the text model's `cross_attention_layers` projects and caches
  (MllamaCrossAttentionDecoderLayer; generate: in the KV cache of every phase; forward and
  training: the memory at the text width plus those K / V, kept for backward in training).
  Those layers have no self-attention, so the text tokens' cache is the other layers' only
  (catalog/nested.py MultimodalArch.kv_bytes_per_token: 32 of the 11B's 40).

The tower's attention is taken as SDPA / flash (no score matrix): the Qwen-VL towers use
window attention with a few full blocks, and the eager scores of a full block over every patch
of a batch are not modelled. Qwen's image sizes go through the processor's smart_resize with
the checkpoint's min / max pixels, Pixtral's through its longest-edge clamp (catalog/images.py),
so a photo's own size may be given. The
sequence with its image tokens is checked against the model's positions (multimodal_keys.py
check_context).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...catalog.images import ImageCost, cross_attention_layers, image_cost
from ...catalog.transformer_arch import TransformerArch
from ...scenario.multimodal_keys import check_images
from ...vec import peak as peak_of
from ...vec import to_int, vmax
from .activations import inference_coeff, layer_coeffs


@dataclass(frozen=True)
class ImagePlan:
    images: int
    cost: ImageCost
    cross_layers: int


def apply(ctx, spec) -> ImagePlan | None:
    """Check the image keys against the model, add the image tokens to ctx's sequence."""
    sc = ctx.sc
    n, size = int(getattr(sc, "images", None) or 0), getattr(sc, "image_size", None)
    if not n and size is None:
        return None
    check_images(spec, {"images": n, "image_size": size}, sc.seq_len,   # the scenario pass's
                 getattr(sc, "new_tokens", None) or 0)                  # rules
    config = spec.config
    h, w = size if size is not None else (None, None)
    plan = ImagePlan(n, image_cost(config, h, w), cross_attention_layers(config))
    added = n * plan.cost.decoder_tokens
    ctx.s += added
    if ctx.arch.kind != "encoder-decoder":
        ctx.t = ctx.s
    where = (f"{added:,} image tokens in each sequence (seq_len {ctx.s - added:,} text + "
             f"{n} x {plan.cost.decoder_tokens})" if added else
             f"{n} x {plan.cost.cross_tokens:,} tokens of cross-attention memory a sample "
             f"(Llama 3.2 Vision: image tokens are not in the text sequence)")
    ctx.notes.append(f"images: {where}; the vision tower runs over {n} x "
                     f"{plan.cost.tower_tokens:,} patches a sample")
    return plan


def _tower_arch(plan: ImagePlan) -> TransformerArch:
    t = plan.cost.tower
    return TransformerArch(
        model_type="vision_tower", kind="encoder", layers=t.layers, decoder_layers=0,
        hidden=t.hidden, heads=t.heads, kv_heads=t.heads, head_dim=t.hidden // t.heads,
        ffn=t.ffn, gated_mlp=t.gated, vocab=1, tied_embeddings=True, max_positions=1,
        learned_positions=False, norm=t.norm, bias=True)


def _tower_bytes(ctx, plan: ImagePlan, saved: bool):
    """(bytes the tower holds at its widest, whether they stay for backward)."""
    arch = _tower_arch(plan)
    tokens = ctx.b * plan.images * plan.cost.tower_tokens
    if not saved:
        return inference_coeff(arch, ctx.p) * tokens * arch.hidden, False
    per_layer = layer_coeffs(arch, ctx.kernels(True))[0] * tokens * arch.hidden
    if (ctx.sc.checkpointing or "none") != "none":   # block inputs, one block recomputed
        return ctx.p * tokens * arch.hidden * arch.layers + per_layer, True
    return per_layer * arch.layers, True


def _cross_bytes(ctx, plan: ImagePlan, kv_b: int) -> tuple[float, float]:
    """Llama 3.2 Vision: (the memory at the text width, its K and V over the cross layers)."""
    if not plan.cross_layers:
        return 0, 0
    a, tp = ctx.arch, max(1, ctx.L.tensor)
    tokens = ctx.b * plan.images * plan.cost.cross_tokens
    kv = tokens * plan.cross_layers * 2 * a.kv_heads * a.head_dim * kv_b / tp
    return ctx.p * tokens * a.hidden, kv


def finish(fp, ctx, plan: ImagePlan | None):
    """Add the tower's and the cross-attention memory's bytes to the phases; re-take the peak."""
    if plan is None:
        return fp
    task = ctx.sc.task
    tower, kept = _tower_bytes(ctx, plan, saved=task == "train")
    memory, cross_kv = _cross_bytes(ctx, plan, 4 if ctx.p == 4 else 2)
    for name, ph in fp.phases.items():
        act = ph.get("activations", 0)
        if task == "generate":
            ph["kv_cache"] = to_int(ph.get("kv_cache", 0) + cross_kv)
            if name == "prefill":
                ph["activations"] = to_int(vmax(act, tower) + memory)
        elif task == "forward":
            ph["activations"] = to_int(vmax(act, tower) + memory + cross_kv)
        elif not _live(act):
            continue   # a training phase after the activations are freed (optimizer step)
        elif kept:
            ph["activations"] = to_int(act + tower + memory + cross_kv)
        else:
            ph["activations"] = to_int(vmax(act, tower) + memory + cross_kv)
    peak, comps = peak_of(fp.phases)
    fp.peak_phase, fp.components = peak, {k: to_int(vmax(0, v)) for k, v in comps.items()}
    what = "saved for backward" if kept else "one block at a time"
    fp.notes.append(f"images: the vision tower ({plan.cost.tower.layers} blocks, width "
                    f"{plan.cost.tower.hidden:,}) over {plan.images} x "
                    f"{plan.cost.tower_tokens:,} patches a sample, {what}")
    return fp


def _live(act) -> bool:
    try:
        return bool(act > 0) if not hasattr(act, "any") else bool((act > 0).any())
    except TypeError:   # pragma: no cover
        return False
