"""Multi-GPU plans for families without a sharded layout of their own: what is physically done
with such a job on several GPUs, written as a scenario `estimate` prices per GPU.

- diffusion (`denoise`): one pipeline component per GPU (diffusers `device_map="balanced"` /
  `component.to("cuda:k")`). Each GPU holds its component's weights and, while that component
  runs, its activations: exactly what model CPU offload holds at that component's phase, so
  the plan's scenario is model offload with a pipeline layout of one stage per component, and
  `estimate` gives the worst GPU. No weights cross the host link; the prompt embeddings and
  the latents cross GPUs once per image.
- volume: the volume split into z-slabs, one per GPU (domain decomposition), each slab with one
  halo plane on each side (a radius-1 stencil; point-wise and FFT pipelines need none, so the
  figure is an upper bound for them); the plan's scenario is the slab on each of n GPUs. An FFT
  over the whole volume becomes a distributed one (cuFFTMp, slab decomposition): one all-to-all
  transpose per transform.
The NCCL buffers `estimate` adds for a multi-GPU layout are counted in both (a single-process
diffusers split moves tensors with peer copies and may not create them: an upper bound).
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import ScenarioError
from ..estimate import estimate
from ..workloads.diffusion.family import TEXT_ENCODERS
from . import comm
from . import costs as C
from .levers import Lever
from .recommend import Recommendation, how_for

COMPONENT_SPLIT = Lever("component-split", ("layout", "off:model"), "component-split",
                        lambda ctx: None)
VOLUME_SPLIT = Lever("volume-split", ("layout", "resolution"), "volume-split", lambda ctx: None)
HALO = 1            # planes each slab holds of each neighbour (radius-1 stencil)


def _rec(lever, title, changes, sc2, est2, cost) -> Recommendation:
    return Recommendation(lever.id, title, changes, sc2, est2, 0, cost, how_for(lever), {}, 0,
                          lever)


def _estimate(ctx, changes):
    try:
        sc2 = ctx.sc.replace(**changes)
        return sc2, estimate(sc2, ctx.dev, with_max_batch=False)
    except ScenarioError:
        return None


def component_split(ctx) -> Recommendation | None:
    """A diffusion pipeline with one component per GPU (None for other plans)."""
    if ctx.family != "diffusion" or ctx.task != "denoise" or ctx.sc.parallel.gpus > 1:
        return None
    comps = list((ctx.spec.config or {}).get("components") or ())
    n = len(comps)
    if n < 2:
        return None
    changes = {"offload": sorted(set(ctx.sc.offload) | {"model"}),
               "parallel": {"gpus": n, "pipeline": n}}
    got = _estimate(ctx, changes)
    if got is None:
        return None
    sc2, est2 = got
    gbs, link = comm.peer_link(ctx.dev, n)
    moved = _handoff_bytes(sc2, ctx.spec)
    cost = C.of("component-split", gpus=n, link=link, communication_bytes_per_step=moved,
                communication_time_s=C.transfer_time(moved, gbs))
    cost = replace(cost, notes=cost.notes + (
        "the estimate is model offload's figure for the worst component's phase plus the NCCL "
        "buffers of a multi-GPU job (a single-process split may not create them: an upper "
        "bound)",))
    title = (f"{n} x GPU, one pipeline component per GPU ({', '.join(comps)}); each GPU holds "
             "its component's weights and its phase's activations (the worst GPU is shown)")
    return _rec(COMPONENT_SPLIT, title, changes, sc2, est2, cost)


def _handoff_bytes(sc, spec) -> int:
    """Bytes that cross GPUs per image, in 16 bit: each text encoder's output embeddings
    (tokens x hidden, per prompt: x2 under classifier-free guidance) to the denoiser's GPU,
    and the final latents (channels x h/8 x w/8) to the VAE's."""
    comps = spec.config["components"]
    cfg = 2 if (sc.guidance and spec.config.get("guidance") != "distilled") else 1
    out = 0
    for c in comps.values():
        if c["kind"] in TEXT_ENCODERS:
            toks = c["max_tokens"] if c["kind"] == "clip-text" else int(sc.text_len or
                                                                        c["max_tokens"])
            out += cfg * toks * int(c["hidden"]) * 2
    vae = comps.get("vae") or {}
    h, w = (list(sc.resolution or spec.config.get("default_resolution") or (512, 512)) +
            [512])[:2]
    f = int(vae.get("downsample", 8))
    out += int(vae.get("latent_channels", 4)) * (h // f) * (w // f) * 2
    return int(out * int(sc.batch_size))


def volume_split(ctx, n: int) -> Recommendation | None:
    """The volume in n z-slabs, one per GPU (None where it does not apply)."""
    res = list(ctx.sc.resolution or ())
    if ctx.task != "volume" or len(res) != 3 or ctx.sc.parallel.gpus > 1 or ctx.spec is not None:
        return None
    d = res[0]
    depth = -(-d // n) + 2 * HALO
    if depth >= d:
        return None
    changes = {"resolution": [depth, res[1], res[2]], "parallel": {"gpus": n, "data": n}}
    got = _estimate(ctx, changes)
    if got is None:
        return None
    sc2, est2 = got
    gbs, link = comm.peer_link(ctx.dev, n)
    ex = sc2.to_dict()
    plane = res[1] * res[2] * int(ex.get("channels", 1)) * _dtype_bytes(ex.get("dtype"))
    wb = ex.get("work_buffers") or {}
    if wb.get("fft", "none") != "none":       # forward + inverse transform: two transposes
        moved = 2 * (n - 1) * (depth - 2 * HALO) * plane // n
        what = "two all-to-all transposes of the slab per pass (distributed FFT)"
    else:
        moved = 2 * HALO * plane
        what = f"{HALO} halo plane from each neighbour per pass"
    cost = replace(C.of("volume-split", gpus=n, link=link, communication_bytes_per_step=moved,
                        communication_time_s=C.transfer_time(moved, gbs)),
                   notes=(f"each GPU sends {what}",))
    title = (f"{n} x GPU, the {'x'.join(map(str, res))} volume in {n} z-slabs of "
             f"{-(-d // n)} planes + {HALO} halo plane per side ({depth}x{res[1]}x{res[2]} per "
             "GPU)")
    return _rec(VOLUME_SPLIT, title, changes, sc2, est2, cost)


def _dtype_bytes(name) -> int:
    from ..scenario.extra import ARRAY_DTYPES
    return int(ARRAY_DTYPES.get(name or "float32", 4))


def splits(ctx, n: int) -> list[Recommendation]:
    """The family splits over n GPUs of this kind (the component split only at its own n)."""
    out = []
    if ctx.family == "diffusion":
        r = component_split(ctx)
        if r is not None and r.scenario.parallel.gpus == n:
            out.append(r)
    v = volume_split(ctx, n) if ctx.task == "volume" else None
    if v is not None:
        out.append(v)
    return out


def split_counts(ctx) -> tuple:
    """GPU counts at which a family split exists beyond the usual powers of two."""
    if ctx.family == "diffusion" and ctx.task == "denoise":
        return (len((ctx.spec.config or {}).get("components") or ()),)
    return ()
