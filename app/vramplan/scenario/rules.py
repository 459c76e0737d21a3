"""The scenario's vocabulary and its defaults by task (docs/scenario.md has the same table):
the options and offload targets and what each does to memory (and which workloads read them),
the precisions a task takes, the tasks a model family takes (from the workload registry) and
the defaults of the keys a task decides.

Kept apart from the validation code so that the lists a UI, a doc page or a flag needs can be
read on their own.
"""
from __future__ import annotations

from ..vocab import (ATTENTION, CHECKPOINTING, DIFFUSION_FAMILIES, KV_CACHE_DTYPES,  # noqa: F401
                     LORA_TASKS, LOW_PRECISION_TRAINING, MODELLESS_TASKS, OPTIMIZERS,
                     PRECISION_BYTES, PRECISIONS, QUANTISED, TASKS, TRAINING_TASKS,
                     TRANSFORMER_FAMILIES, VISION_FAMILIES)
from ..workloads.registry import family_defaults, family_tasks, families
from ..errors import VramplanError
from ..hardware import get_gpu
from .resolve import spec_of

OFFLOAD: dict[str, str] = {
    "optimizer": "optimizer states live in CPU memory (ZeRO-Offload / FSDP CPU offload); the "
                 "GPU keeps none, the step runs on the CPU or streams states in",
    "params": "parameters live in CPU memory and are gathered to the GPU layer by layer "
              "(ZeRO-3 / FSDP offload_params); the GPU holds about one layer's weights",
    "gradients": "gradients are moved to CPU memory as they are produced (with optimizer "
                 "offload); the GPU holds a bucket at a time",
    "activations": "saved activations are copied to pinned CPU memory during forward and "
                   "brought back in backward (torchtune / torch.autograd.graph.save_on_cpu); the "
                   "GPU holds about one layer's activations",
    "model": "whole pipeline components move to the GPU only while they run (diffusers "
             "enable_model_cpu_offload); the peak holds the largest component, not all of them",
}

OPTIONS: dict[str, str] = {
    "compile": "torch.compile: fuses elementwise chains, so fewer intermediate activations are "
               "saved (typically 10-30% less activation memory); adds compile workspace",
    "chunked-loss": "the output projection and cross-entropy run in chunks, so the "
                    "batch x seq x vocab fp32 logits (and their gradient) are never whole",
    "optimizer-in-backward": "each parameter's optimizer step runs as its gradient is ready and "
                             "the gradient is freed: no full set of gradients at the peak",
    "fused-qkv": "q, k and v are one projection: one saved input instead of three views; "
                 "slightly smaller activation and temporary memory",
    "float8-linears": "torchao float8 training: linear inputs are saved in fp8 (half the "
                      "16-bit activation bytes of the matmul inputs) plus per-tensor scales",
    "sequence-parallel": "with tensor parallelism, layer-norm and dropout activations are split "
                         "across the tensor group too (Korthikanti et al. 2022): activations / t",
    "loss-parallel": "with tensor parallelism, the logits and loss stay sharded over the "
                     "vocabulary: the logits buffer is divided by t",
    "layerwise-casting": "the denoiser's weights are stored in fp8 (or its precision) and "
                         "upcast to the compute dtype one layer at a time (diffusers "
                         "enable_layerwise_casting): one layer's upcast copy at a time; "
                         "the text encoders stay in the compute dtype",
    "vae-tiling": "the VAE decodes in overlapping tiles: decoder activations scale with the "
                  "tile, not the image",
    "vae-slicing": "the VAE decodes one image of the batch at a time",
    "attention-slicing": "attention is computed in slices over heads/queries (diffusers "
                         "enable_attention_slicing): the score matrix is never whole",
    "fused-optimizer": "the optimizer step is one fused kernel (Adam fused=True): no temporary "
                       "copy of the states (foreach Adam holds one at the step)",
    "tiled-mlp": "Unsloth's long-context tiled MLP (unsloth_tiled_mlp, stack unsloth only): "
                 "each MLP keeps only its input; its backward recomputes one tile of hidden-"
                 "size tokens at a time",
    "expandable-segments": "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the caching "
                           "allocator maps 20 MiB pages into one growing segment instead of "
                           "rounding each large request up to its own segment (reserved "
                           "memory: no per-tensor rounding, the last page's unfilled part)",
    # The software stack: by default inferred from the GPU generation (compute capability < 8.0
    # implies the torch 1.x era) and, for `generate`, from the attention kernel. These override.
    "legacy-stack": "torch 1.x-era runtime: eager CUDA module loading (bigger CUDA context), Adam "
                    "as a per-tensor loop, zero_grad() filling zeros instead of freeing",
    "modern-stack": "torch 2.x runtime: lazy CUDA module loading, foreach Adam, zero_grad() "
                    "frees gradients (set_to_none)",
    "legacy-cache": "generate with Hugging Face's pre-4.36 tuple KV cache: torch.cat grows each "
                    "layer's cache, briefly holding two copies, and the whole prompt's logits",
    "dynamic-cache": "generate with Hugging Face DynamicCache (>= 4.36): one copy of the cache "
                     "per layer grown in place, last-position logits only",
    "static-cache": "generate with a static, pre-allocated KV cache of seq_len + new_tokens "
                    "(transformers StaticCache / torch.compile decoding)",
}

# Defaults (docs/scenario.md has the same table)
SEQ_LEN_TRAIN = 2048       # train / lora / qlora / forward, capped at the model's positions
SEQ_LEN_PROMPT = 512       # generate: prompt tokens
NEW_TOKENS = 256           # generate
SERVE_MAX_NUM_SEQS = 256   # vLLM default
SERVE_MAX_MODEL_LEN = 4096  # serve without a seq_len on a model whose positions are not known


def vllm_batched_tokens(max_model_len):
    """vLLM's default max_num_batched_tokens under chunked prefill (always on in the V1
    engine): the usage context's default (2048 for the API server) raised to at least the
    2048 floor and at most 8192, and never above what one max_model_len request holds:
    max(2048, min(max_model_len, 8192)). The non-chunked path, max(max_model_len, 2048)
    (vllm/config SchedulerConfig: `max(self.max_model_len, DEFAULT_MAX_NUM_BATCHED_TOKENS)`),
    is V0 only and not used here. None while max_model_len is not a number (a draft)."""
    if not isinstance(max_model_len, int) or isinstance(max_model_len, bool):
        return None
    return max(2048, min(max_model_len, 8192))


def default_precision(task: str, gpu: str | None = None) -> str:
    """The task's default precision on `gpu` (a hardware-database id): bf16(-mixed), or
    fp16(-mixed) on a GPU whose generation has no bf16 tensor cores (compute capability
    below 8.0, hwdb/generations.toml: Turing, Volta, Pascal), where PyTorch would emulate
    bf16 matmuls; the memory is the same, the default follows what the GPU runs."""
    if task == "qlora":
        return "nf4"
    if task in MODELLESS_TASKS:
        return "fp32"
    p = "bf16-mixed" if task == "train" else "bf16"  # lora: bf16 base + adapters; inference
    return p.replace("bf16", "fp16") if gpu and _no_bf16(gpu) else p


def _no_bf16(gpu: str) -> bool:
    try:
        dev = get_gpu(gpu)
    except VramplanError:
        return False                  # the gpu key names the problem itself
    return dict(dev.capabilities or {}).get("bf16") is False


def default_optimizer(task: str) -> str:
    return "adamw" if task in TRAINING_TASKS else "none"


def default_seq_len(task: str, max_positions: int | None) -> int | None:
    """Tokens per sequence for transformer models (None: the task takes no sequence)."""
    cap = max_positions or 4096
    if task in ("train", "lora", "qlora", "forward"):
        return min(SEQ_LEN_TRAIN, cap)
    if task == "generate":
        return min(SEQ_LEN_PROMPT, max(1, cap // 2))
    if task == "serve":
        return cap
    return None


def task_defaults(task: str, family: str | None, max_positions: int | None,
                  gpu: str | None = None) -> dict:
    """Top-level defaults of a task for a model family (transformer keys only where they
    apply) on `gpu`; used by normalisation and by Scenario.replace to recognise defaulted
    values."""
    transformer = family in TRANSFORMER_FAMILIES
    d = {"batch_size": 1, "precision": default_precision(task, gpu),
         "optimizer": default_optimizer(task), "gradient_accumulation": 1,
         "checkpointing": "none", "attention": None if task in MODELLESS_TASKS else "sdpa"}
    if transformer:
        d["seq_len"] = default_seq_len(task, max_positions)
        if task == "generate":
            d["new_tokens"] = NEW_TOKENS
    if task == "serve":
        d["batch_size"] = SERVE_MAX_NUM_SEQS
    return d


# ---- which workloads read each option and offload target ------------------------------------
# (families, tasks) where a workload's footprint (or the overhead model, for every task) reads
# the name; None: all. From the code of workloads/<family>/footprint.py and overhead.py. A name
# given elsewhere is accepted and has no effect; `vramplan.scenario.form` offers only these.
_T, _V, _D = TRANSFORMER_FAMILIES, VISION_FAMILIES, DIFFUSION_FAMILIES
OPTION_SCOPE: dict[str, tuple[tuple[str, ...] | None, tuple[str, ...] | None]] = {
    "compile": (_T, None), "chunked-loss": (_T, None),
    "optimizer-in-backward": (_T + _V, TRAINING_TASKS), "fused-qkv": ((), None),
    "float8-linears": (_T, None), "sequence-parallel": (_T, None), "loss-parallel": (_T, None),
    "layerwise-casting": (_D, None), "vae-tiling": (_D, None), "vae-slicing": (_D, None),
    "attention-slicing": ((), None), "fused-optimizer": (_T, TRAINING_TASKS),
    "tiled-mlp": (_T, TRAINING_TASKS),
    "expandable-segments": (None, None), "legacy-stack": (None, None),
    "modern-stack": (None, None), "legacy-cache": (_T, ("generate",)),
    "dynamic-cache": (_T, ("generate",)), "static-cache": (_T, ("generate",)),
}
OFFLOAD_SCOPE: dict[str, tuple[tuple[str, ...] | None, tuple[str, ...] | None]] = {
    "optimizer": (_T + _V, TRAINING_TASKS), "params": (_T, None),
    "gradients": (_V, TRAINING_TASKS), "activations": (_T, TRAINING_TASKS),
    "model": (_D, None),
}
assert set(OPTION_SCOPE) == set(OPTIONS) and set(OFFLOAD_SCOPE) == set(OFFLOAD)


def _in_scope(scope, task: str, family: str | None) -> bool:
    fams, tasks = scope
    return (fams is None or family in fams) and (tasks is None or task in tasks)


STACK_OPTIONS = {"tiled-mlp": "tiled-mlp"}
"""Options that exist only in some software: option -> the stack mechanism it needs
(catalog/data/stacks.toml; Unsloth's tiled MLP from unsloth-zoo 2025-11)."""


def stack_allows(option: str, stack) -> bool:
    """Whether `stack` (a `stack` key value, None: the default) has what `option` needs."""
    mechanism = STACK_OPTIONS.get(option)
    if mechanism is None:
        return True
    from ..catalog.stacks import read_stack
    from ..catalog.stacks import resolve as resolve_stack
    from ..errors import VramplanError
    try:
        return resolve_stack(read_stack(stack) if stack is not None else None).has(mechanism)
    except VramplanError:          # a stack the scenario pass refuses by its own name
        return False


def option_choices(task: str, family: str | None, stack=None) -> tuple[str, ...]:
    """The options some workload reads for this task and model family, and the plan's
    software has (OPTIONS order)."""
    return tuple(o for o, sc in OPTION_SCOPE.items()
                 if _in_scope(sc, task, family) and stack_allows(o, stack))


def offload_choices(task: str, family: str | None) -> tuple[str, ...]:
    """The offload targets some workload reads for this task and model family."""
    return tuple(o for o, sc in OFFLOAD_SCOPE.items() if _in_scope(sc, task, family))


# ---- what a task and a model family take ----------------------------------------------------

def precisions_for(task: str) -> tuple[str, ...]:
    """The precisions a task accepts (for its base precision): `train` refuses the weight
    formats (fp8, int8, int4, nf4); `qlora` needs one of them; every other task takes all."""
    if task == "train":
        return tuple(p for p in PRECISIONS if p not in QUANTISED)
    if task == "qlora":   # MXFP4 / NVFP4 checkpoints are dequantised to train (transformers
        # Mxfp4Config(dequantize=True), the gpt-oss fine-tuning recipe): not QLoRA bases
        return tuple(p for p in PRECISIONS if p in QUANTISED and p not in ("mxfp4", "nvfp4"))
    # MXFP8 / NVFP4 training recipes (torchao) convert the trained linears: training only
    return tuple(p for p in PRECISIONS if p not in LOW_PRECISION_TRAINING)


def supported_tasks(family: str | None) -> tuple[str, ...]:
    """The tasks a model family supports, in TASKS order: the workload registry's table
    (`vramplan.workloads.registry.family_tasks`); family None: the model-less tasks."""
    ok = set(family_tasks(family))
    return tuple(t for t in TASKS if t in ok)


def task_hint(task: str) -> str:
    """' ('lora' is for decoder, ... models)': the families that take a task, for messages."""
    where = [f for f in families() if task in supported_tasks(f)]
    return f" ('{task}' is for {', '.join(where)} models)" if where else ""


def default_task(spec) -> str | None:
    """The task of a scenario that names none: a pipeline samples (denoise), any other model
    trains; None without a model (the task is then required)."""
    if spec is None:
        return None
    ok = supported_tasks(spec.family)
    for task in ("denoise", "train"):
        if task in ok:
            return task
    return ok[0] if ok else "train"


def model_given(task: str, spec) -> dict:
    """Keys the model's catalog config decides (resolution, steps, frames, text_len, guidance)
    from its family's defaults hook (`vramplan.workloads.registry.family_defaults`); for the
    model-less tasks (spec None) the task's own (e.g. render's default resolution)."""
    return family_defaults(task, spec)


def max_positions(spec) -> int | None:
    """A transformer's positions (the cap of the default seq_len, serve's default
    max_model_len): the limit of `position_limit` where the config states one, else the
    architecture's (a size-only decoder's 4096); None for other models."""
    if spec is None or spec.family not in TRANSFORMER_FAMILIES:
        return None
    lim = position_limit(spec)
    return lim[0] if lim is not None else spec.arch.max_positions


# the config keys a model's positions are read from (vLLM's `possible_keys`, those our
# configs carry); without one the limit is unknown and nothing is refused
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "seq_length", "max_seq_len",
                  "max_sequence_length")
# position schemes without a table or a trained rotary range, so no limit is refused: T5's
# relative-position buckets (transformers T5Attention._relative_position_bucket: every distance
# past max_distance shares the last bucket) and ALiBi's linear biases (BLOOM, MPT, Falcon with
# `alibi`; Press et al. 2022, arXiv:2108.12409, extrapolate past the trained length)
_UNBOUNDED_POSITIONS = ("t5", "mt5", "umt5", "bloom", "mpt")
# rope types whose max_position_embeddings already counts the scaling (vLLM skips the factor)
_ROPE_PRESCALED = ("su", "longrope", "llama3")


def _rope_scaling(config: dict) -> dict | None:
    for c in (config, config.get("text_config")):
        if isinstance(c, dict):
            rs = c.get("rope_scaling") or c.get("rope_parameters")
            if isinstance(rs, dict):
                return rs
    return None


def position_limit(spec) -> tuple[int, str] | None:
    """(the most tokens a sequence of this transformer may hold, how that was derived), or
    None when the model states no positions (a size-only decoder, a config without any
    position key): the rule vLLM applies to `max_model_len` (vllm/config/model.py
    `_get_and_verify_max_len`, vllm-project/vllm@18ec6629): the config's positions; with
    `rope_scaling`, times its `factor` unless the rope type already counts it (llama3, su,
    longrope: Llama 3.1's max_position_embeddings 131072 = 8192 x 8 already); yarn from
    `original_max_position_embeddings` x factor; Gemma 3's positions are already scaled.
    Learned position embeddings (GPT-2, OPT, BERT) end at their table; relative buckets (T5)
    and ALiBi (BLOOM, MPT) have no limit to refuse."""
    if spec is None or spec.family not in TRANSFORMER_FAMILIES:
        return None
    a = spec.arch
    base = int(a.max_positions)
    if a.learned_positions:
        return base, "learned position embeddings"
    config = spec.config if isinstance(spec.config, dict) else {}
    if a.model_type in _UNBOUNDED_POSITIONS or config.get("alibi") is True:
        return None
    scope = [config] + ([config["text_config"]] if isinstance(config.get("text_config"), dict)
                        else [])
    if not any(k in c for c in scope for k in _POSITION_KEYS):
        return None
    rs = _rope_scaling(config)
    rtype = str((rs or {}).get("rope_type") or (rs or {}).get("type") or "default")
    factor = (rs or {}).get("factor")
    if (rs is None or rtype in _ROPE_PRESCALED or "gemma3" in str(a.model_type)
            or not isinstance(factor, (int, float)) or isinstance(factor, bool) or factor < 1):
        how = f"max_position_embeddings {base}"
        return base, how + (f"; rope_scaling {rtype} already counted" if rs else "")
    orig = rs.get("original_max_position_embeddings")
    if rtype == "yarn" and isinstance(orig, int) and orig > 0:
        return int(orig * factor), (f"original_max_position_embeddings {orig} x yarn "
                                    f"rope_scaling factor {factor:g}")
    return int(base * factor), f"{base} positions x {rtype} rope_scaling factor {factor:g}"


def positions_error(spec, total: int, what: str = "seq_len"):
    """A ScenarioError naming `seq_len` (or the key given) when `total` tokens exceed the
    model's positions (`position_limit`); None when they fit or the limit is unknown. The
    counts with thousands separators (the page's and the report's counts: '1,000,000,000');
    the key is not said again where `what` is the key itself (the page labels the field with
    it, the CLI prefixes "scenario key 'seq_len': ")."""
    from ..errors import ScenarioError
    lim = position_limit(spec)
    if lim is None or total <= lim[0]:
        return None
    limit, how = lim
    key = what.split(" ")[0] if what.startswith("serving.") else "seq_len"
    head = f"{total:,} tokens exceed" if what == key else f"{what} = {total:,} exceeds"
    return ScenarioError(key, f"{head} the {limit:,} positions '{spec.id}' has ({how})")


# ---- what a model supports (public: `vramplan.scenario.valid_tasks` / `model_defaults`) -----

def valid_tasks(model_or_spec=None) -> tuple[str, ...]:
    """The tasks `Scenario.from_dict` accepts for a model (a catalog id, an inline
    `architecture` dict or a ModelSpec), in TASKS order, from the workload registry's table.
    None: the model-less tasks (render, volume, array). An unknown id raises
    ScenarioError('model', ...) listing the closest ids."""
    if model_or_spec is None:
        return supported_tasks(None)
    return supported_tasks(spec_of(model_or_spec).family)


def model_defaults(model_or_spec, task: str | None = None) -> dict:
    """The keys a model's catalog config decides when a scenario leaves them out (native
    `resolution`, pipeline `steps` / `frames` / `text_len` / `guidance`), as `to_dict` shows
    them, for `task` (default: the model's default task). {} for transformers."""
    spec = spec_of(model_or_spec)
    return model_given(task if task is not None else default_task(spec), spec)


# ---- the memory limit: usable memory less a stated safety margin ------------------------------

DEFAULT_SAFETY_MARGIN = 0
"""The margin a plan keeps when it states none: 0. The estimate's device_used already counts
the CUDA context, the caching allocator's slack and the non-torch memory (NCCL, CUDA graphs),
and a device's usable memory already leaves out what the driver and ECC hold
(hwdb/devices/*.toml `usable_memory`), so the verdict compares device_used with usable memory
itself, as it always has (docs/accuracy.md gives how far estimates land from measurements:
the margin to state for that risk). One default for the verdict, max batch and the advisor
(which kept a silent 5% until issue 20.6)."""


def read_safety_margin(v):
    """`safety_margin`: a share of usable memory (0.05 or '5%', below 0.5) or a size (bytes as
    an int, or '2 GiB'); normalised to a float share or an int of bytes."""
    import re

    from ..errors import ScenarioError
    from ..readers import read_size
    key = "safety_margin"
    if isinstance(v, bool):
        raise ScenarioError(key, f"must be a share (0.05 or '5%') or a size ('2 GiB'), got {v!r}")
    text = v.strip() if isinstance(v, str) else None
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*%", text) if text else None
    share = None
    if m:
        share = float(m.group(1)) / 100
    elif isinstance(v, float) and v < 1 or (text and re.fullmatch(r"0*\.[0-9]+|0", text)):
        share = float(v)
    if share is not None:
        if not 0 <= share < 0.5:
            raise ScenarioError(key, f"a share must be at least 0 and below 0.5 (50%), got {v!r}")
        return share
    return read_size(key, v)


def margin_bytes(margin, usable):
    """Bytes the margin keeps free of `usable` (an int, or a numpy array over GPUs)."""
    if margin is None:
        margin = DEFAULT_SAFETY_MARGIN
    if isinstance(margin, float):
        m = usable * margin
        return m.astype("int64") if hasattr(m, "astype") else int(m)
    return margin + 0 * usable


def memory_limit(margin, usable):
    """The one memory limit: usable memory less the safety margin (what `fits`, max batch and
    the advisor's plans and room to grow compare device_used with)."""
    return usable - margin_bytes(margin, usable)

