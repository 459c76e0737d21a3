"""Inference with part of the weights in host memory (scenario keys `offload_layers`,
`offload_experts`, task generate): what stays on the GPU and what every decode step reads over
the host link.

* `offload_layers` N: accelerate's big-model inference (`device_map` / `max_memory`:
  `infer_auto_device_map` fills the GPU in module order, so the last N decoder layers land on
  "cpu"); `AlignDevicesHook` (accelerate/hooks.py, `offload=True`) copies a CPU-resident
  module's weights to the execution device for its forward and drops them after, so the GPU
  holds one such layer at a time (a staging copy) and every forward moves all N layers' weights
  over the link.
* `offload_experts` N: the routed experts of the first N MoE layers stay in host memory
  (llama.cpp `--n-cpu-moe N`, i.e. `-ot "blk\\.(0..N-1)\\.ffn_.*_exps=CPU"`; vLLM's
  `--cpu-offload-gb` keeps weights in pinned host memory read by the GPU in place, UVA). A
  step reads only the experts its tokens are routed to: E x (1 - (1 - k/E)^tokens) per layer
  (uniform routing, traffic.experts_touched). Streamed to the GPU (UVA) those bytes cross the
  link; llama.cpp instead computes those experts on the CPU, where host-memory bandwidth over
  the same bytes bounds the step (not in the hardware database), stated in the notes.

The KV cache stays on the GPU in both (the attention runs there). The tokens per second the
link allows, tokens_per_step / (host_read_bytes_per_step / link bandwidth), is added to the
estimate's bandwidth section by `vramplan.timing` from the GPU's host link (hwdb interconnect).
"""
from __future__ import annotations

from dataclasses import dataclass

from ... import precision as prec_mod
from ...errors import ScenarioError
from ...scenario.inference_keys import check_offload_experts
from . import formats, traffic


@dataclass(frozen=True)
class HostWeights:
    what: str                 # "layers" | "experts"
    count: int                # layers (or MoE layers) in host memory
    host_bytes: int           # weights kept in host memory
    staging_bytes: int        # GPU copy of one offloaded layer during its forward
    per_layer_bytes: int      # one offloaded layer's (or its experts') weights


def _check(ctx, n_l: int, n_e: int) -> None:
    a = ctx.arch
    if n_l and n_e:
        raise ScenarioError("offload_experts", "give offload_layers or offload_experts, not "
                            "both (accelerate offloads whole layers, llama.cpp's --n-cpu-moe "
                            "the experts)")
    if "params" in ctx.off:
        raise ScenarioError("offload_layers" if n_l else "offload_experts", "offload 'params' "
                            "already keeps every weight in host memory; drop one of them")
    if ctx.L.gpus > 1:
        raise ScenarioError("offload_layers" if n_l else "offload_experts", "is modelled on "
                            "one GPU (accelerate's device_map, llama.cpp); parallel.gpus is "
                            f"{ctx.L.gpus}")
    if n_l > a.layers:
        raise ScenarioError("offload_layers", f"{n_l} exceeds the model's {a.layers} layers")
    check_offload_experts(a, n_e)      # the scenario pass's rule (scenario/build.py)


def plan(ctx) -> HostWeights | None:
    """The weights a generate scenario keeps in host memory (None: all on the GPU)."""
    x = ctx.sc.extra or {}
    n_l, n_e = int(x.get("offload_layers") or 0), int(x.get("offload_experts") or 0)
    if not (n_l or n_e):
        return None
    _check(ctx, n_l, n_e)
    a = ctx.arch
    if n_l:
        rest = prec_mod.weights_bytes(0, ctx.norms_g + ctx.embed_g, ctx.prec)
        per = (ctx.base_weight_bytes() - rest) // a.layers   # the blocks' average layer
        return HostWeights("layers", n_l, n_l * per, per, per)
    n = a.num_experts * traffic.expert_params(a)
    per = int(n * formats.expert_bytes_per_param(a, ctx.prec)) if formats.shipped(
        a, ctx.prec) is not None else prec_mod.weights_bytes(n, 0, ctx.prec)
    return HostWeights("experts", n_e, n_e * per, 0, per)


def read_per_step(ctx, hw: HostWeights, tokens: int) -> int:
    """Host-resident weight bytes one step of `tokens` tokens reads."""
    if hw.what == "layers":
        return hw.host_bytes
    a = ctx.arch
    touched = traffic.experts_touched(a.num_experts, a.experts_per_token, tokens)
    return int(hw.host_bytes * touched / a.num_experts)


def apply_generate(ctx, phases: dict, bw: dict) -> HostWeights | None:
    """Move the host-resident weights out of every phase, add the staging copy, and state the
    bytes a step reads from host memory (host_read_bytes_per_step) in `bw`."""
    hw = plan(ctx)
    if hw is None:
        return None
    for ph in phases.values():
        ph["weights"] = ph["weights"] - hw.host_bytes
        if hw.staging_bytes:
            ph["temporary"] = ph.get("temporary", 0) + hw.staging_bytes
    tokens = int(bw.get("tokens_per_step") or ctx.b)
    read = read_per_step(ctx, hw, tokens)
    bw["host_resident_weight_bytes"] = int(hw.host_bytes)
    bw["host_read_bytes_per_step"] = read
    if hw.what == "layers":
        how = (f"the last {hw.count} decoder layers' weights ({hw.host_bytes / 2**30:.2f} GiB) "
               "stay in CPU memory (accelerate device_map / max_memory); each is copied to the "
               f"GPU for its forward ({hw.staging_bytes / 2**30:.2f} GiB staging), so every "
               "step moves all of them over the host link")
    else:
        how = (f"the routed experts of the first {hw.count} MoE layers "
               f"({hw.host_bytes / 2**30:.2f} GiB) stay in CPU memory (llama.cpp --n-cpu-moe "
               f"{hw.count}; vLLM --cpu-offload-gb reads them in place); a step of {tokens:,} "
               f"tokens reads the experts it is routed to, {read / 2**30:.2f} GiB. llama.cpp "
               "computes them on the CPU instead: then host-memory bandwidth over the same "
               "bytes bounds the step, not the link")
    ctx.notes.append("inference offload: " + how + "; the KV cache stays on the GPU. "
                     "host_link_tokens_per_s = tokens per step / (host bytes per step / "
                     "host-link bandwidth)")
    return hw
