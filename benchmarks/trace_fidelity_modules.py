"""Trace the modules of the published diffusion cases near the fidelity median (issue 22.4) and
compare each with the estimate's phase (docs/accuracy.md, "The under-estimates near the median").

    python benchmarks/trace_fidelity_modules.py [ROW ...] [--json] [--diffusers-path DIR]

Each row builds one diffusers module from its config (no weights; configs in
benchmarks/configs/real_modules.json or below, each with its source), runs the call the
pipeline makes under fake tensors with the CUDA kernels emulated (vramplan.measure.trace
.trace_module, no_grad as in a pipeline call) and prints the traced peak activations (peak
allocated minus the module's weights) beside the estimate's activations of that phase for the
case's scenario. The attention processor follows the case: `eager` calls
set_default_attn_processor() (diffusers AttnProcessor: baddbmm + softmax), as the
diffusion-fast benchmark does under --no_sdpa (utils/pipeline_utils.py load_pipeline).
`--diffusers-path DIR` traces the diffusers release the case ran instead of the pinned one:
DIR holds it (`pip install --target DIR --no-deps diffusers==0.30.2 huggingface_hub==0.24.6`);
transformers is hidden from it (those releases import it when installed, and the pinned
transformers needs a newer huggingface_hub), and CogVideoXSafeConv3d's size test
(`torch.prod(torch.tensor(input.shape)).item()` up to 0.30.3, a value fake tensors cannot give)
is computed from the shape, the same number.
Rows (case: module):
  J09-vae   SDXL AutoencoderKL.decode, bf16, eager, 1 x 1024^2
  J09-unet  SDXL UNet2DConditionModel step, bf16, eager, batch 2 (CFG), 1024^2, 77 tokens
  J08-vae   the same VAE in fp32
  J07-vae   FLUX.1 AutoencoderKL.decode (16 latent channels), bf16, SDPA, 1 x 1024^2
  J07-dit   FLUX.1-dev FluxTransformer2DModel step, bf16, SDPA, 4096 image + 512 text tokens
  J17-vae   CogVideoX-5b AutoencoderKLCogVideoX.decode, bf16, 49 frames 480 x 720
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "app"))
CONFIGS = ROOT / "benchmarks" / "configs" / "real_modules.json"
CASES = ROOT / "tests" / "data" / "public_cases.jsonl"
GiB = 2**30

# FLUX.1-dev vae/config.json (values copied; black-forest-labs/FLUX.1-dev, the same layout as
# SD3's): 16 latent channels, no quant / post-quant convs
FLUX_VAE = {"in_channels": 3, "out_channels": 3, "latent_channels": 16,
            "block_out_channels": [128, 256, 512, 512], "layers_per_block": 2,
            "down_block_types": ["DownEncoderBlock2D"] * 4,
            "up_block_types": ["UpDecoderBlock2D"] * 4, "sample_size": 1024,
            "use_quant_conv": False, "use_post_quant_conv": False}
# FLUX.1-dev transformer/config.json (values copied): diffusers FluxTransformer2DModel with
# 19 double-stream and 38 single-stream blocks, 24 heads x 128, guidance embedding
FLUX_DIT = {"patch_size": 1, "in_channels": 64, "num_layers": 19, "num_single_layers": 38,
            "attention_head_dim": 128, "num_attention_heads": 24, "joint_attention_dim": 4096,
            "pooled_projection_dim": 768, "guidance_embeds": True}
# THUDM/CogVideoX-5b vae/config.json (values copied): diffusers AutoencoderKLCogVideoX defaults
# with block_out_channels 128/256/256/512, 3 layers per block, 16 latent channels
COGVIDEOX_VAE = {"in_channels": 3, "out_channels": 3, "latent_channels": 16,
                 "block_out_channels": [128, 256, 256, 512], "layers_per_block": 3,
                 "temporal_compression_ratio": 4, "sample_height": 480, "sample_width": 720}


def use_diffusers_from(path: str) -> None:
    """Import diffusers from `path` (see the module docstring), before anything imports it."""
    import importlib.util
    find_spec = importlib.util.find_spec

    def hide_transformers(name, *a, **k):
        return None if name.split(".")[0] in ("transformers", "peft") else find_spec(name, *a, **k)
    importlib.util.find_spec = hide_transformers
    sys.path.insert(0, str(Path(path).resolve()))


def _safe_conv3d_forward(self, input):
    """diffusers 0.30.x CogVideoXSafeConv3d.forward (autoencoder_kl_cogvideox.py), its byte
    count taken from the shape (math.prod) instead of .item() on a tensor of it: inputs over
    2 GiB (at 2 bytes per element) are cut into int(GiB / 2) + 1 chunks along time, each chunk
    after the first prefixed with the previous chunk's last kernel - 1 frames; outputs concatenated."""
    import math

    import torch
    memory_count = math.prod(input.shape) * 2 / 1024**3
    if memory_count <= 2:
        return torch.nn.Conv3d.forward(self, input)
    k = self.kernel_size[0]
    chunks = torch.chunk(input, int(memory_count / 2) + 1, dim=2)
    if k > 1:
        chunks = [chunks[0]] + [torch.cat((chunks[i - 1][:, :, -k + 1:], chunks[i]), dim=2)
                                for i in range(1, len(chunks))]
    return torch.cat([torch.nn.Conv3d.forward(self, c) for c in chunks], dim=2)


def _compat(diffusers) -> None:
    import inspect
    mod = getattr(getattr(diffusers.models, "autoencoders", None), "autoencoder_kl_cogvideox", None)
    conv = getattr(mod, "CogVideoXSafeConv3d", None)
    if conv is not None and "torch.tensor(input.shape)" in inspect.getsource(conv.forward):
        conv.forward = _safe_conv3d_forward


def _real_config(row_id: str) -> dict:
    rows = json.loads(CONFIGS.read_text())["models"]
    cfg = next(r for r in rows if r["id"] == row_id)["trace"]["diffusers"]
    return {k: v for k, v in cfg.items() if not k.startswith("_")}


def _case_scenario(case_id: str) -> dict:
    for line in CASES.read_text().splitlines():
        case = json.loads(line) if line.strip() else {}
        if case.get("case_id") == case_id:
            return dict(case["scenario"])
    raise KeyError(case_id)


ROWS = {   # row: (case, phase, builder kind, config, precision, eager)
    "J09-vae": ("J09", "vae-decode", "AutoencoderKL", "sdxl-vae", "bf16", True),
    "J09-unet": ("J09", "denoise", "UNet2DConditionModel", "sdxl-unet", "bf16", True),
    "J08-vae": ("J08", "vae-decode", "AutoencoderKL", "sdxl-vae", "fp32", True),
    "J07-vae": ("J07", "vae-decode", "AutoencoderKL", "flux-vae", "bf16", False),
    "J07-dit": ("J07", "denoise", "FluxTransformer2DModel", "flux-dit", "bf16", False),
    "J17-vae": ("J17", "vae-decode", "AutoencoderKLCogVideoX", "cogvideox-vae", "bf16", False),
}


def _config(name: str) -> dict:
    return {"sdxl-vae": lambda: _real_config("stable-diffusion-xl-base-1.0 vae"),
            "sdxl-unet": lambda: _real_config("stable-diffusion-xl-base-1.0 unet"),
            "flux-vae": lambda: dict(FLUX_VAE), "flux-dit": lambda: dict(FLUX_DIT),
            "cogvideox-vae": lambda: dict(COGVIDEOX_VAE)}[name]()


def _module_and_inputs(kind: str, cfg: dict, sc: dict, dt):
    import torch
    from vramplan.measure.tracing.libs import require
    diffusers = require("diffusers")
    if kind == "AutoencoderKLCogVideoX":
        import diffusers.models.autoencoders.autoencoder_kl_cogvideox  # noqa: F401
        _compat(diffusers)
    h, w = sc["resolution"]
    lat = (h // 8, w // 8)

    class Call(torch.nn.Module):
        """The pipeline's call of one component, under no_grad as in DiffusionPipeline.__call__."""

        def __init__(self):
            super().__init__()
            self.m = getattr(diffusers, kind).from_config(cfg)
            if sc.get("attention") == "eager":
                self.m.set_default_attn_processor()

        def forward(self, *xs):
            with torch.no_grad():
                if kind == "FluxTransformer2DModel":
                    x, e, pooled, t, img_ids, txt_ids, g = xs
                    return self.m(hidden_states=x, encoder_hidden_states=e,
                                  pooled_projections=pooled, timestep=t, img_ids=img_ids,
                                  txt_ids=txt_ids, guidance=g, return_dict=False)[0]
                if kind == "UNet2DConditionModel":
                    x, t, e, te, ti = xs
                    return self.m(x, t, encoder_hidden_states=e, return_dict=False,
                                  added_cond_kwargs={"text_embeds": te, "time_ids": ti})[0]
                return self.m.decode(xs[0]).sample

    c = cfg.get("latent_channels", 4)
    if kind == "UNet2DConditionModel":   # CFG: the pipeline concatenates 2 latents
        b = 2 * sc.get("batch_size", 1)
        pooled = cfg["projection_class_embeddings_input_dim"] - 6 * cfg["addition_time_embed_dim"]
        xs = (torch.randn(b, cfg["in_channels"], *lat, dtype=dt), torch.full((b,), 500.0),
              torch.randn(b, 77, cfg["cross_attention_dim"], dtype=dt),
              torch.randn(b, pooled, dtype=dt), torch.randn(b, 6, dtype=dt))
    elif kind == "FluxTransformer2DModel":   # FluxPipeline: packed 2 x 2 latents, T5 tokens
        b, n, txt = sc.get("batch_size", 1), (h // 16) * (w // 16), 512
        xs = (torch.randn(b, n, cfg["in_channels"], dtype=dt),
              torch.randn(b, txt, cfg["joint_attention_dim"], dtype=dt),
              torch.randn(b, cfg["pooled_projection_dim"], dtype=dt), torch.full((b,), 0.5),
              torch.zeros(n, 3), torch.zeros(txt, 3), torch.full((b,), 3.5))
    elif kind == "AutoencoderKLCogVideoX":
        lat_f = (sc["frames"] - 1) // 4 + 1
        xs = (torch.randn(sc.get("batch_size", 1), c, lat_f, *lat, dtype=dt),)
    else:
        xs = (torch.randn(sc.get("batch_size", 1), c, *lat, dtype=dt),)
    return Call, xs


def trace_row(row: str) -> dict:
    import torch
    from vramplan.estimate import estimate
    from vramplan.measure.trace import trace_module
    case, phase, kind, cname, prec, eager = ROWS[row]
    sc = _case_scenario(case)
    sc["attention"] = "eager" if eager else "sdpa"
    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[prec]
    factory, xs = _module_and_inputs(kind, _config(cname), sc, dt)
    t0 = time.time()
    rep = trace_module(factory, xs, task="forward", precision=prec)
    traced = rep.peak_allocated_bytes - rep.components.get("weights", 0)
    est = estimate(dict(sc, stack="diffusers"), with_max_batch=False)
    est_act = est.footprint.phases[phase]["activations"]
    import diffusers
    return {"row": row, "case": case, "phase": phase, "precision": prec,
            "diffusers": diffusers.__version__,
            "attention": sc["attention"], "traced_activations": int(traced),
            "estimate_activations": int(est_act),
            "error": (est_act - traced) / traced if traced else None,
            "trace_weights": int(rep.components.get("weights", 0)),
            "trace_reserved_above_allocated": int(rep.peak_reserved_bytes
                                                  - rep.peak_allocated_bytes),
            "seconds": round(time.time() - t0, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="*", default=list(ROWS))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--diffusers-path", default=None)
    a = ap.parse_args(argv)
    if a.diffusers_path:
        use_diffusers_from(a.diffusers_path)
    for row in a.rows:
        r = trace_row(row)
        if a.json:
            print(json.dumps(r), flush=True)
            continue
        print(f"{r['row']:9} {r['phase']:10} {r['precision']:5} {r['attention']:5} "
              f"diffusers {r['diffusers']:7} traced "
              f"{r['traced_activations'] / GiB:7.3f} GiB  estimate "
              f"{r['estimate_activations'] / GiB:7.3f} GiB  {r['error']:+6.1%}  "
              f"({r['seconds']:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
