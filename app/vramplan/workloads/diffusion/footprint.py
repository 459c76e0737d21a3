"""Diffusion pipelines (family "diffusion"): text encoders, a denoiser (U-Net / DiT / MMDiT),
a VAE; inference (`denoise`), weights only (`load`), one denoiser step (`forward`), and LoRA /
full fine-tuning of the denoiser (`lora`, `train`).

What it models, phase by phase (the estimate is the largest phase, as diffusers runs them one
after another):
- text-encode: every encoder over the prompt (and the negative prompt under CFG); CLIP encoders
  always see 77 tokens, T5 encoders `text_len` (default: the pipeline's max_sequence_length).
- denoise: one denoiser forward; classifier-free guidance doubles its batch (`guidance`, on by
  default where the pipeline uses it; FLUX is guidance-distilled: no doubling).
- vae-decode: the VAE decoder at full resolution (SDXL's VAE upcast to fp32 under fp16), eager
  or SDPA mid-block attention, `vae-slicing` (one image at a time), `vae-tiling` (tiles of the
  VAE's sample size).
Resident weights: every component (`pipe.to("cuda")`, as the J cases do) unless `offload`
holds "model" (enable_model_cpu_offload: only the running component is on the GPU).
Precision: per component (`precision_for`); a quantised global precision (nf4/int8/fp8/int4)
applies to the denoiser and T5 (as diffusers' PipelineQuantizationConfig / quanto examples do),
the small CLIP encoders and the VAE stay in the bf16 compute dtype.
"""
from __future__ import annotations

from ... import optimizers
from ... import precision as P
from ...hardware.capabilities import plan_warnings
from .family import (LORA_TARGETS, SAMPLING_TASKS, TASKS, TEXT_ENCODERS,  # noqa: F401
                     check_geometry)
from .flops import denoiser_flops
from ...vec import peak as peak_of
from ...vec import pick, shown, to_int
from ...catalog import stacks
from .. import stack_mechanisms
from ..base import Footprint
from .parts import vae2d_decode
from .sampling import act_bytes as _act_bytes
from .sampling import (denoise_phase, image_tokens, text_encode_phase,
                       vae_decode_phase)

DENOISERS = ("unet", "transformer")




def component_precision(scenario, name: str, comp: dict) -> str:
    """The precision a component runs in. A global quantised format reaches only components
    marked `quantize` (denoiser, T5); the others run in bf16. With `layerwise-casting` a global
    fp8 reaches the denoiser alone: the option is diffusers' `ModelMixin.enable_layerwise_casting`,
    called on the pipeline's transformer / U-Net (diffusers docs, "Layerwise casting"; the HF
    blog diffusers-quantization's FLUX recipe); transformers' text encoders have no such method
    and stay in the compute dtype. A component whose catalog entry has `load_dtype` takes it
    under any unquantised global precision (the Wan VAE: diffusers' WanPipeline example loads
    AutoencoderKLWan with torch_dtype=torch.float32 beside a bf16 pipeline). Per-component
    precision (a dict) states any other split."""
    if isinstance(scenario.precision, dict):
        return scenario.precision_for(name)
    prec = scenario.precision
    if comp.get("load_dtype") and not P.is_quantized(prec):
        return comp["load_dtype"]       # the pipeline's documented recipe loads it so
    if P.is_quantized(prec) and not comp.get("quantize", False):
        return "bf16"
    if prec == "fp8" and name not in DENOISERS and "layerwise-casting" in (scenario.options or ()):
        return "bf16"
    return prec


# bitsandbytes NF4 as diffusers pipelines load it: diffusers' and transformers'
# BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4") leave
# bnb_4bit_use_double_quant at its default False (the FLUX examples of the diffusers
# bitsandbytes docs and of the HF blog "Exploring Quantization Backends in Diffusers" set no
# more), so each 64-weight block keeps an fp32 absmax: 0.5 + 4/64 B per weight (precision.py's
# nf4 is QLoRA's double-quantised format, 0.5 + 1/64 + ...). FLUX.1-dev so: 12.54 GiB vs the
# blog's 12.584 GiB after loading (double quantisation would give 11.86).
NF4_PIPELINE_BYTES = 0.5 + 4.0 / 64


def _kept_out(comp: dict, prec: str) -> tuple[int, int]:
    """(params, bytes each) that transformers keeps out of `prec`: a model's
    `_keep_in_fp32_modules` (T5's 'wo', the catalog's `keep_in_fp32`). modeling_utils keeps
    them in fp32 when torch_dtype is float16 (not under bf16) and for the quantizers that ask
    (`bytes_by_format`: fp32 under bitsandbytes 4-bit, the compute dtype under torchao int8).
    The fp16 rule shows in the HF blog quanto-diffusers' PixArt-Sigma figures: quantising the
    fp16 T5 to qfloat8 saved 6.184 GiB, i.e. 3.62e9 fp16 + 1.01e9 fp32 ('wo') weights to 1 B."""
    keep = comp.get("keep_in_fp32") or {}
    by = dict(keep.get("bytes_by_format", {}))
    if keep:
        by.setdefault("fp16", 4)
    return (int(keep.get("params", 0)), int(by[prec])) if prec in by else (0, 0)


def component_weight_bytes(comp: dict, prec: str, layerwise: bool = False) -> int:
    """Resident bytes of one component's weights in `prec`."""
    n = int(comp["params"])
    kept, kept_b = _kept_out(comp, prec)
    if not P.is_quantized(prec):
        per = P.param_bytes(prec) if prec not in ("fp16", "bf16") else 2
        return (n - kept) * per + kept * kept_b
    if layerwise and prec == "fp8":
        skip = int(comp.get("layerwise_skip_params", 0))
        return (n - skip) * 1 + 2 * skip
    embed = int(comp.get("embedding_params", 0))
    rest = n - kept - embed
    lin = int(rest * comp.get("linear_fraction", 1.0))
    other = rest - lin + embed
    fmt = NF4_PIPELINE_BYTES if prec == "nf4" else P.WEIGHT_FORMAT_BYTES[prec]
    return int(lin * fmt) + 2 * other + kept * kept_b


def _lora_params(den: dict, rank: int, n_targets: int) -> int:
    """Adapter parameters on the denoiser's attention projections: rank x (in + out) per
    targeted projection (q/k/v/out of each attention)."""
    if den["kind"] == "unet":
        per_level = [2 * (3 * den.get("layers_per_block", 2) + (1 if i == len(den["heads"]) - 1
                     else 0)) * d for i, d in enumerate(den["transformer_depth"])]
        widths = sum(c * k for c, k, a in zip(den["block_out_channels"], per_level,
                                              den["attention_levels"]) if a)
        return rank * 2 * widths * n_targets
    layers = den.get("layers", 0) + den.get("single_layers", 0)
    return rank * 2 * den["hidden"] * layers * n_targets * (2 if den.get("joint_text") else 1)


def _geometry(scenario, spec):
    """(height, width, frames) the pipeline runs at, and notes; refuses sizes it cannot take."""
    cfg = spec.config
    frames = int(scenario.frames) if cfg.get("video") else 1
    h, w, notes = check_geometry(spec, scenario.resolution,
                                 frames if cfg.get("video") else None)
    return h, w, frames, notes


def _compute_dtype(prec: str) -> str:
    """Denoiser matmul type: quantised weights (nf4 / int8 / fp8 storage, layerwise casting)
    are dequantised into the bf16 compute dtype of the pipeline."""
    if P.is_quantized(prec):
        return "bf16"
    return {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "fp16-mixed": "fp16"}.get(prec, "bf16")


def _cfg_batch(scenario, cfg: dict, task: str) -> tuple[int, int]:
    """(the batch multiplier of one denoiser call, denoiser calls per step) under
    classifier-free guidance."""
    guidance = bool(scenario.guidance)              # None for train / lora: no CFG batch
    cfg_mult = 2 if (guidance and cfg.get("guidance") != "distilled" and task != "train"
                     and task != "lora") else 1
    calls = cfg_mult                                # denoiser calls per step
    if cfg.get("guidance") == "cfg-sequential":     # cond then uncond, each at batch b
        cfg_mult = 1
    return cfg_mult, calls


def _component_weights(scenario, device, comps: dict, den_name: str, opts: set, notes: list):
    """(precision, resident weight bytes) per component, the VAE's activation bytes per
    element and the notes (the device's plan warnings first)."""
    task = scenario.task
    precs = {n: component_precision(scenario, n, c) for n, c in comps.items()}
    notes = plan_warnings(device, precisions=set(precs.values()), attention=scenario.attention,
                          options=(), compute=task != "load") + notes
    layerwise = "layerwise-casting" in opts
    weights = {n: component_weight_bytes(c, precs[n], layerwise and n == den_name)
               for n, c in comps.items()}
    vae = comps["vae"]
    vae_e = _act_bytes(precs["vae"])
    if precs["vae"] == "fp16" and vae.get("upcast_fp16"):
        vae_e = 4
        weights["vae"] = 4 * int(vae["params"])
        notes.append("the pipeline upcasts the VAE to fp32 for the decode (force_upcast)")
    return precs, weights, vae_e, notes


def footprint(scenario, spec, device) -> Footprint:
    cfg = spec.config
    comps = cfg["components"]
    task = scenario.task
    opts = set(scenario.options or ())
    offload_model = "model" in set(scenario.offload or ())
    b = to_int(scenario.batch_size)     # an int64 array in a sweep (vramplan.vec)
    h, w, frames, notes = _geometry(scenario, spec)
    cfg_mult, calls = _cfg_batch(scenario, cfg, task)
    eager = scenario.attention == "eager"
    den_name = next(n for n in comps if n in DENOISERS)
    den = comps[den_name]
    precs, weights, vae_e, notes = _component_weights(scenario, device, comps, den_name, opts,
                                                      notes)
    layerwise = "layerwise-casting" in opts
    vae = comps["vae"]
    resident_all = sum(weights.values())

    def resident(active: str) -> int:
        return weights[active] if offload_model else resident_all

    phases: dict[str, dict[str, int]] = {}
    largest: dict[str, int] = {}
    small_state = b * cfg_mult * 4 * 16 * (h // 8) * (w // 8) * max(1, frames)  # latents, noise
    text_tokens = text_encode_phase(scenario, comps, den, precs, weights, resident, b, cfg_mult,
                                    phases, largest)
    den_e = _act_bytes(precs[den_name])
    lat_h, lat_w = max(1, h // vae.get("downsample", 8)), max(1, w // vae.get("downsample", 8))
    lat_f = (frames - 1) // vae.get("temporal_compression", 1) + 1 if cfg.get("video") else 1
    temp = 0
    if layerwise and P.is_quantized(precs[den_name]):
        temp = 2 * den.get("ffn", 4 * den.get("hidden", 1024)) * den.get("hidden", 1024)
    denoise_phase(cfg, den, den_e, b * cfg_mult, (lat_h, lat_w, lat_f), text_tokens, eager,
                  temp, small_state, resident(den_name), phases, largest)
    stair, out_img, carried = vae_decode_phase(vae, opts, b, h, w, frames, vae_e, eager,
                                               resident("vae"), offload_model, notes, phases,
                                               largest, _returned_caches(scenario, vae, notes))

    # -- training of the denoiser -------------------------------------------------------------
    # one denoiser forward of one latent (CFG doubles the batch below)
    fwd_flops = denoiser_flops(den, 1, lat_h, lat_w, lat_f, text_tokens,
                               2 if cfg.get("reference_image") else 1)
    if task in ("lora", "train"):
        return _training(scenario, cfg, comps, den_name, den, weights, precs, b, h, w,
                         (lat_f, lat_h, lat_w), text_tokens, eager, notes, phases, largest,
                         fwd_flops)
    bw = _sampling_bandwidth(scenario, weights, phases, b, calls, cfg_mult, fwd_flops, precs,
                             den_name)
    return _sampling_footprint(scenario, phases, largest, resident_all, bw, notes, precs,
                               cfg_mult, offload_model, stair + out_img + carried)


def _returned_caches(scenario, vae: dict, notes: list) -> bool:
    """CogVideoX's VAE decode as diffusers >= 0.31 runs it (stack mechanism
    cogvideox-vae-returned-caches, catalog/data/stacks.toml); 0.30.x's otherwise."""
    return vae["kind"] == "kl3d-cogvideox" and scenario.task == "denoise" and \
        stack_mechanisms.use(notes, stacks.of(scenario), "cogvideox-vae-returned-caches")


def _sampling_bandwidth(scenario, weights, phases, b, calls, cfg_mult, fwd_flops, precs,
                        den_name) -> dict:
    """Bytes and FLOPs of one sampling step (none for a load: it runs no step)."""
    task = scenario.task
    den_act = phases["denoise"]["activations"]
    steps = int(scenario.steps)
    den_w = weights[den_name]
    step_bytes = (den_w + 2 * den_act) * (calls // cfg_mult)   # sequential CFG: two calls
    bw = {} if task == "load" else {   # a load runs no step
        "bytes_per_step": to_int(step_bytes), "steps": steps,
        "bytes_per_image": step_bytes * steps / b,
        "flops_per_step": to_int(fwd_flops * b * calls),
        # the denoiser's FLOPs over the steps of one image (text encoders, VAE not counted)
        "flops_per_image": int(fwd_flops * calls * steps),
        "compute_dtype": _compute_dtype(precs[den_name]), "workload_kind": "diffusion"}
    return bw


def _sampling_footprint(scenario, phases, largest, resident_all, bw, notes, precs, cfg_mult,
                        offload_model, decode_extra) -> Footprint:
    """The footprint of load / forward / denoise: the peak phase, and the reserved floor that
    the VAE decode's staircase (`decode_extra`: staircase, output image, carried segments)
    leaves."""
    task = scenario.task
    if task == "load":
        peak = "load"
        components = {"weights": resident_all}
        phases = {"load": dict(components)}
    elif task == "forward":
        peak = "denoise"
        components = dict(phases["denoise"])
    else:
        peak, components = peak_of(phases)  # per element for a sweep's batch axis
    components = {k: to_int(v) for k, v in components.items()}
    for k in ("weights", "activations", "temporary"):
        components.setdefault(k, 0)
    notes.append(f"peak phase: {shown(peak)}; CFG batch x{cfg_mult}; precisions "
                 + ", ".join(f"{n}={p}" for n, p in precs.items()))
    if offload_model:
        notes.append("offload 'model': only the running component is resident at each phase")
    # The caching allocator keeps each VAE level's segments (a level's blocks are too small
    # for the next, 4x larger level), so reserved memory climbs above allocated there.
    # The staircase is reserved whenever the decode runs (task denoise), also when another
    # phase holds more allocated bytes: reserved is the maximum over the whole run; on top
    # of it, what the earlier phases left cached and the decode could not reuse (`carried`).
    floor = to_int(phases["vae-decode"]["weights"] + decode_extra) \
        if "vae-decode" in phases and task not in ("load", "forward") else 0
    return Footprint(components=components, peak_phase=peak, phases=phases,
                     largest_allocation=to_int(pick(largest, peak, 0)), bandwidth=bw, notes=notes,
                     reserved_floor_bytes=floor)


def _trainable(scenario, den: dict, den_name: str, prec: str, weights: dict) -> tuple:
    """(trainable denoiser parameters, bytes of each trained value): LoRA adapters in fp32,
    or the whole denoiser (its weights in fp32 under mixed precision: `weights` updated)."""
    if scenario.task == "lora":
        lora = scenario.lora
        rank = getattr(lora, "rank", 8) if lora else 8
        targets = getattr(lora, "targets", ()) if lora else ()
        n_t = max(1, min(4, sum(1 for t in targets if t in LORA_TARGETS)))
        trainable = _lora_params(den, rank, n_t)
        pbytes = 4
        return trainable, pbytes
    trainable = int(den["params"])
    pbytes = P.param_bytes(prec)
    if P.is_mixed(prec):
        weights[den_name] = 4 * trainable
    return trainable, pbytes


def _unet_saved(den: dict, b, lat_h: int, lat_w: int, e: int, eager: bool, ckpt: bool
                ) -> tuple:
    """(activations a U-Net saves for backward, the largest block's working set), level by
    level (block boundaries only under checkpointing)."""
    chans, attn = den["block_out_channels"], den["attention_levels"]
    lpb = den.get("layers_per_block", 2)
    saved = work = 0
    for lvl, c in enumerate(chans):
        n = (lat_h >> lvl) * (lat_w >> lvl)
        unit = b * n * c * e
        blocks = 2 * lpb + 1
        scores = b * den["heads"][lvl] * n * n * e if (eager and attn[lvl]) else 0
        depth = den["transformer_depth"][lvl] if attn[lvl] else 0
        if ckpt:
            saved += blocks * (1 + depth) * unit
            work = max(work, 3 * scores + 30 * unit, 12 * unit)
        else:
            saved += blocks * (8 * unit + depth * (30 * unit + scores))
            work = max(work, 2 * scores + 18 * unit)
    return saved, work


def _dit_saved(cfg: dict, den: dict, b, latent: tuple, text_tokens: int, e: int, eager: bool,
               ckpt: bool) -> tuple:
    """(activations a DiT saves for backward, one layer's working set x 2) over the image
    (video) tokens, plus the text tokens in a joint-attention model."""
    lat_f, lat_h, lat_w = latent
    n = image_tokens(cfg, den, lat_h, lat_w, lat_f) + \
        (text_tokens if den.get("joint_text") else 0)
    hd, f = den["hidden"], den["ffn"]
    layers = den.get("layers", 0) + den.get("single_layers", 0)
    scores = b * den["heads"] * n * n * e if eager else 0
    per_layer = b * n * (12 * hd + 3 * f) * e + scores
    saved = layers * (b * n * hd * e if ckpt else per_layer)
    work = 2 * per_layer
    return saved, work


def _training(scenario, cfg, comps, den_name, den, weights, precs, b, h, w, latent,
              text_tokens, eager, notes, phases, largest, fwd_flops=0.0) -> Footprint:
    """LoRA / full fine-tuning of the denoiser: frozen text encoders and VAE stay resident
    (the VAE encodes the batch every step), the denoiser's forward activations are saved for
    backward (or only block boundaries under checkpointing). `latent` is (frames, h, w) of the
    latent: a video denoiser trains on every latent frame, so its sequence is the same
    `image_tokens` as one denoise call (diffusers' train_cogvideox_lora.py encodes the whole
    clip with the VAE and the transformer sees all latent frames' patches; Wan 2.1 at 81 x 480
    x 832: 21 x 30 x 52 = 32,760 tokens, not one frame's 1,560)."""
    lat_f, lat_h, lat_w = latent
    prec = precs[den_name]
    e = _act_bytes(prec)
    opt = scenario.optimizer or "adamw"
    trainable, pbytes = _trainable(scenario, den, den_name, prec, weights)
    grads = trainable * pbytes
    states = optimizers.state_bytes(opt, trainable, pbytes)
    ckpt = scenario.checkpointing != "none"
    if den["kind"] == "unet":
        saved, work = _unet_saved(den, b, lat_h, lat_w, e, eager, ckpt)
    else:
        saved, work = _dit_saved(cfg, den, b, (lat_f, lat_h, lat_w), text_tokens, e, eager,
                                 ckpt)
    vae_enc = vae2d_decode(comps["vae"], b, h, w, _act_bytes(precs["vae"]), eager)[0] // 2 \
        if comps["vae"]["kind"] == "kl2d" else 0
    frozen = sum(v for k, v in weights.items())
    components = {"weights": int(frozen), "gradients": int(grads),
                  "optimizer_states": int(states), "activations": int(saved + work),
                  "temporary": int(optimizers.step_temporary_bytes(opt, trainable, pbytes,
                                                                   trainable // 100 or 1))}
    phases = {"vae-encode": {"weights": int(frozen), "optimizer_states": int(states),
                             "activations": int(vae_enc)},
              "backward": dict(components)}
    peak = max(phases, key=lambda k: sum(phases[k].values()))
    comp = dict(phases[peak])
    for k in ("gradients", "temporary"):
        comp.setdefault(k, 0)
    # forward + backward: full training 3 forwards' worth (input and weight gradients), LoRA 2
    # (frozen base: input gradients only); recomputation adds a forward
    passes = (3 if scenario.task == "train" else 2) + (1 if ckpt else 0)
    notes.append(f"{scenario.task}: {trainable:,} trainable denoiser parameters; text encoders "
                 "and VAE frozen and resident; the VAE encodes the batch every step")
    return Footprint(components=comp, peak_phase=peak, phases=phases,
                     largest_allocation=int(max(largest.values() or [0])),
                     bandwidth={"bytes_per_step": int(2 * frozen + 3 * (saved + work)),
                                "flops_per_step": int(fwd_flops * b * passes),
                                "flops_per_image": int(fwd_flops * passes),
                                "compute_dtype": _compute_dtype(prec),
                                "workload_kind": "diffusion"},
                     notes=notes)
