"""The shared vocabulary, defined once: component names, model families, tasks, precisions
and the other names every stage speaks. The ground floor: imports nothing of the package.

Names are the domain's own (`weights`, `kv_cache`, `optimizer_states`); the scenario keys that
take these values are described in `vramplan.scenario.keys`.
"""
from __future__ import annotations

# ---- what memory is made of ------------------------------------------------------------------
MODEL_STATES = ("weights", "gradients", "optimizer_states")
# live bytes at the peak, shared by every workload (a workload may add its own, e.g. "arrays")
COMPONENTS = MODEL_STATES + ("activations", "kv_cache", "temporary")
# what the process holds beyond the live tensors (overhead model, trace and live measurement)
CUDA_CONTEXT = "cuda_context"
ALLOCATOR_SLACK = "allocator_slack"
OVERHEAD_COMPONENTS = (CUDA_CONTEXT, ALLOCATOR_SLACK)

# where a memory report comes from (`source` of the result JSON)
SOURCES = ("estimate", "trace", "measure")

# ---- model families ----------------------------------------------------------------------------
TRANSFORMER_FAMILIES = ("decoder", "encoder", "encoder-decoder")
VISION_FAMILIES = ("cnn", "vit", "detection", "segmentation", "unet")
DIFFUSION_FAMILIES = ("diffusion",)
FAMILIES = TRANSFORMER_FAMILIES + VISION_FAMILIES + DIFFUSION_FAMILIES

# ---- tasks ----------------------------------------------------------------------------------------
TASKS = ("train", "lora", "qlora", "forward", "generate", "serve", "denoise", "load", "render",
         "volume", "array")
TRAINING_TASKS = ("train", "lora", "qlora")
MODELLESS_TASKS = ("render", "volume", "array")
# tasks that accept a `lora` object: required-and-defaulted for lora/qlora; an attached adapter
# for the inference tasks (torchtune logs memory after loading base + adapters: task load)
LORA_TASKS = ("lora", "qlora", "load", "forward", "generate", "serve", "denoise")

# ---- numbers and how they are stored -----------------------------------------------------------
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp16-mixed", "bf16-mixed", "fp8", "int8", "int4",
              "nf4", "mxfp4", "nvfp4", "mxfp8-train", "nvfp4-train")
# weight formats: inference or QLoRA bases (mxfp4 / nvfp4: the OCP MX and NVIDIA 4-bit floats)
QUANTISED = ("fp8", "int8", "int4", "nf4", "mxfp4", "nvfp4")
PRECISION_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp16-mixed": 2, "bf16-mixed": 2,
                   "fp8": 1, "int8": 1, "int4": 0.5, "nf4": 0.5, "mxfp4": 0.5, "nvfp4": 0.5,
                   "mxfp8-train": 2, "nvfp4-train": 2}
# low-precision training recipes (torchao / torchtitan MXFP8 and NVFP4 linears): a bf16 model
# whose block linears run their matmuls in the format (precision.LOW_PRECISION_TRAINING); task
# `train` of the transformer families only
LOW_PRECISION_TRAINING = ("mxfp8-train", "nvfp4-train")
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")

# ---- how a job runs ------------------------------------------------------------------------------
OPTIMIZERS = ("adamw", "adam", "sgd", "sgd-momentum", "adafactor", "adamw-8bit",
              "paged-adamw-8bit", "lion", "none")
CHECKPOINTING = ("none", "selective", "full")
ATTENTION = ("eager", "sdpa", "flash")

# ---- display names: one English name per component and per phase (the key of every
# translation in locale/<lang>/*.toml); the charts, the page, the report and the CLI print these
COMPONENT_LABELS = {
    "weights": "Weights", "gradients": "Gradients", "optimizer_states": "Optimizer states",
    "activations": "Activations", "kv_cache": "KV cache", "temporary": "Temporary",
    "allocator_slack": "Allocator slack", "cuda_context": "CUDA context",
    "nccl": "NCCL buffers", "cuda_graphs": "CUDA graphs", "workspace": "Workspaces",
}
# the phases the estimate's footprints and the tracer name (`peak_phase`, `phases`)
PHASE_LABELS = {
    "forward": "Forward", "backward": "Backward", "backward-end": "Backward end",
    "backward-later": "Backward (later)", "optimizer-step": "Optimizer step",
    "prefill": "Prefill", "decode": "Decode", "denoise": "Denoise", "text-encode": "Text encode",
    "vae-encode": "VAE encode", "vae-decode": "VAE decode", "load": "Load", "serve": "Serve",
    "frame": "Frame", "compute": "Compute", "idle": "Idle",
}


def _generic_label(key: str) -> str:
    return str(key).replace("_", " ").replace("-", " ").capitalize()


def component_label(key: str) -> str:
    """'optimizer_states' -> 'Optimizer states'; a key no table names: 'odd_buffer' ->
    'Odd buffer' (English; translate at the edge with `i18n.gettext`)."""
    return COMPONENT_LABELS.get(key) or _generic_label(key)


def phase_label(key: str) -> str:
    """'optimizer-step' -> 'Optimizer step' (English; translate at the edge)."""
    return PHASE_LABELS.get(key) or _generic_label(key)
