"""The sampling phases of a diffusion pipeline call (workloads/diffusion/footprint.py), one
function each, as diffusers runs them one after another: text-encode (every encoder over the
prompt), denoise (one denoiser step) and vae-decode, with the allocator segments the earlier
phases leave to the decode. Each writes its phase's components into `phases` and its largest
tensor into `largest`; footprint.py takes the peak and the reserved floor."""
from __future__ import annotations

from ... import precision as P
from ...vec import truth, vmax
from .family import TEXT_ENCODERS
from .parts import (dit_step, text_encoder_bytes, unet_step, vae2d_decode, vae2d_levels,
                    vae3d_decode, wan_vae_decode, hunyuan_vae_decode, ltx_vae_decode)


def act_bytes(prec: str) -> int:
    """Bytes per activation element of a component running in `prec`."""
    return P.activation_bytes(prec) if prec in P.PRECISIONS else 2


def image_tokens(cfg: dict, den: dict, lat_h: int, lat_w: int, lat_f: int) -> int:
    """Image (video) tokens of one denoiser call: the latent cut into patch x patch (x patch_t
    frames) patches; FLUX.1 Kontext adds the reference image's packed latents to the sequence
    (FluxKontextPipeline: torch.cat([latents, image_latents], dim=1)), taken at the output
    size (the pipeline resizes the reference to a preferred Kontext size near 1024^2). Hand
    check, Wan 2.1 at 81 frames 480 x 832: latent 21 x 60 x 104, 1 x 2 x 2 patches ->
    21 x 30 x 52 = 32,760 tokens."""
    p, pt = den.get("patch", 2), den.get("patch_t", 1)
    n = (lat_h // p) * (lat_w // p) * -(-lat_f // pt)
    return n * (2 if cfg.get("reference_image") else 1)


def text_encode_phase(scenario, comps, den, precs, weights, resident, b, cfg_mult, phases,
                      largest) -> int:
    """The text-encode phase (the encoder with the most activations) into `phases` /
    `largest`; returns the text tokens the denoiser sees."""
    text_tokens = 0
    for n, c in comps.items():
        if c["kind"] not in TEXT_ENCODERS:
            continue
        toks = c["max_tokens"] if c["kind"] == "clip-text" else int(scenario.text_len)
        text_tokens += toks if den.get("joint_text") or c["kind"] == "t5-encoder" or \
            den["kind"] == "unet" else 0
        act = text_encoder_bytes(c, b * cfg_mult, toks, act_bytes(precs[n]))
        cur = phases.get("text-encode", {}).get("activations", 0)
        if truth(act >= cur):
            phases["text-encode"] = {"weights": resident(n), "activations": act}
            largest["text-encode"] = vmax(weights[n] // max(1, c.get("layers", 1)), act // 4)
    if den.get("text_tokens"):
        text_tokens = den["text_tokens"]
    elif den["kind"] == "unet":
        text_tokens = 77
    return text_tokens


def denoise_phase(cfg, den, den_e, step_b, latent, text_tokens, eager, temp, small_state,
                  resident_den, phases, largest) -> None:
    """The denoise phase (one denoiser step at batch `step_b` on the latent (h, w, frames))
    into `phases` / `largest`."""
    lat_h, lat_w, lat_f = latent
    if den["kind"] == "unet":
        act, big = unet_step(den, step_b, lat_h, lat_w, text_tokens, den_e, eager)
    else:
        img_tokens = image_tokens(cfg, den, lat_h, lat_w, lat_f)
        act, big = dit_step(den, step_b, img_tokens, text_tokens, den_e, eager)
    # prompt embeddings fed to the denoiser: cross_attention_dim wide for a U-Net (768 SD1.x,
    # 2048 SDXL), the T5 width (4096) for the DiTs
    embeds = step_b * text_tokens * int(den.get("cross_attention_dim") or 4096) * den_e
    phases["denoise"] = {"weights": resident_den, "activations": act + small_state + embeds,
                         "temporary": temp}
    largest["denoise"] = big


def _vae_tile(vae: dict, opts: set, h: int, w: int, notes: list) -> tuple[int, int]:
    """(height, width) the VAE decoder runs at: the image, or one tile under vae-tiling."""
    oh, ow = h, w
    if "vae-tiling" in opts:
        tile = int(vae.get("sample_size", 512))
        if vae["kind"] == "kl3d-cogvideox":
            oh, ow = min(h, 240), min(w, 360)
        elif vae["kind"] in ("kl3d-wan", "kl3d-hunyuan", "kl3d-ltx"):   # tile_sample_min_*
            oh, ow = min(h, tile), min(w, tile)
        else:
            oh, ow = min(h, tile), min(w, tile)
        notes.append(f"vae-tiling: the decoder runs on {oh}x{ow} tiles")
    return oh, ow


def vae_decode_phase(vae, opts, b, h, w, frames, vae_e, eager, resident_vae, offload_model,
                     notes, phases, largest, returned_caches: bool = False) -> tuple:
    """The vae-decode phase into `phases` / `largest`; returns (the decode's allocator
    staircase, the output image bytes, the segments carried from the earlier phases).
    `returned_caches`: CogVideoX's decoder as diffusers >= 0.31 runs it (cogvideox_vae.py)."""
    dec_b = 1 if "vae-slicing" in opts else b
    oh, ow = _vae_tile(vae, opts, h, w, notes)
    if vae["kind"] == "kl3d-cogvideox":
        vpk, vbig, stair = vae3d_decode(vae, dec_b, frames, oh, ow, vae_e, eager,
                                        returned_caches)
    elif vae["kind"] == "kl3d-wan":
        vpk, vbig, stair = wan_vae_decode(vae, dec_b, max(1, frames), oh, ow, vae_e)
    elif vae["kind"] == "kl3d-ltx":
        vpk, vbig, stair = ltx_vae_decode(vae, dec_b, max(1, frames), oh, ow, vae_e)
    elif vae["kind"] == "kl3d-hunyuan":
        vpk, vbig, stair = hunyuan_vae_decode(vae, dec_b, max(1, frames), oh, ow, vae_e, eager)
    else:
        vpk, vbig, stair = vae2d_decode(vae, dec_b, oh, ow, vae_e, eager)
    out_img = b * 3 * h * w * max(1, frames) * vae_e * (2 if "vae-tiling" in opts else 1)
    # the CogVideoX walk holds the chunks' outputs and their concatenation itself
    held_img = 0 if vae["kind"] == "kl3d-cogvideox" and "vae-tiling" not in opts else out_img
    phases["vae-decode"] = {"weights": resident_vae, "activations": vpk + held_img}
    largest["vae-decode"] = vbig
    carried = 0
    if vae["kind"] == "kl2d" and not offload_model:
        carried = _carried_segments(phases, largest,
                                    vae2d_levels(vae, dec_b, oh, ow, vae_e, eager))
    return stair, out_img, carried


def _lesser(a, b):
    """min(a, b) without a branch, so a sweep's batch array passes through."""
    return b + (a - b) * (a < b)


def _carried_segments(phases: dict, largest: dict, levels: list) -> int:
    """Reserved bytes the text encoders and the denoiser leave behind that the VAE decode
    cannot reuse. A pipeline call runs encode_prompt, the denoising loop and the decode with no
    empty_cache between them (diffusers' pipelines; only enable_model_cpu_offload's hooks call
    accelerate's clear_device_cache as they swap components), so the caching allocator keeps
    those phases' segments (about their peak activations). A cached block serves only a request
    it can hold, so the decode reuses them for the levels whose largest tensor fits the
    denoiser's largest block (FLUX at 1024^2: the 16 and 64 MiB tensors of the first two
    levels, not the 256-512 MiB ones at full resolution); the rest stays reserved beside the
    decode's own staircase. The tracer's allocator model (measure/tracing/allocator.py) agrees
    on FLUX.1-dev bf16 1024^2: T5-XXL at 512 tokens, one transformer step and the decode in one
    allocation log reserve 3.37 GiB above the weights, the decode alone 2.74."""
    held = phases.get("text-encode", {}).get("activations", 0) + \
        phases["denoise"]["activations"]
    fits = 0
    for pk, big in levels:
        fits = fits + pk * (big <= largest["denoise"])
    return held - _lesser(held, fits)
