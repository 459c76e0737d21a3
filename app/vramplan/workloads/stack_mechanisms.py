"""What each software-stack mechanism (`catalog/data/stacks.toml`) does to the bytes, and how
an estimate reports the ones it applied.

A workload asks `use(notes, stack, name)` where a mechanism could change its figures: True when
the stack has it (the note, with the mechanism's source, is added once); `section(...)` is the
estimate's `stack` section (name, version, the change point taken, each mechanism with its
source and whether this plan applied it).

The byte formulas, each read in the framework's source:

- `compiled-loss` (torchtitan >= 2025-04, PR #1033, commit bbb1b616,
  torchtitan/components/loss.py: `torch.compile(cross_entropy_loss)` when training.compile):
  the compiled graph saves the 16-bit logits and two fp32 values per row (max and log-sum-exp)
  and its backward is one fused kernel writing a 16-bit gradient beside one fp32 value per row
  (the row sum it reduces): 2 p T V + 12 T bytes, instead of the eager loss's fp32 log-softmax
  output, its gradient and the input gradient (3 x 4 T V). Traced on CPU with inductor itself
  (tests/test_stack_trace_loss.py: saved tensors, and the buffers of the backward code it
  generates; on CUDA the row sum may stay inside the kernel, 4 T bytes either way).
- `fused-cross-entropy` (Unsloth, unsloth/kernels/cross_entropy_loss.py
  Fast_CrossEntropyLoss, commit 015bdef0): forward saves (logits, logsumexp, labels) with an
  fp32 logsumexp per row; backward writes the gradient into the logits in place: p T V + 4 T.
- `bnb-4bit-no-double-quant` (transformers BitsAndBytesConfig: bnb_4bit_use_double_quant=False
  by default; bitsandbytes quantize_4bit blocksize 64 with an fp32 absmax per block):
  0.5 + 4 / 64 = 0.5625 B per 4-bit weight (0.5 + 1/64 + 4/(64*256) with double quantisation).
- `bnb-4bit-fp32-compute` (transformers BitsAndBytesConfig: bnb_4bit_compute_dtype None ->
  torch.float32; bitsandbytes nn/modules.py Linear4bit.forward casts x to compute_dtype, and
  MatMul4Bit's backward multiplies by F.dequantize_4bit(B).to(grad_output.dtype)): in a 4-bit
  linear's backward the weight is dequantised to an fp32 copy, with the fp32 input and output
  beside it: 4 i o + 4 T (i + o) bytes for the widest block linear (i x o = h x f).
- `bnb-4bit-keeps-input` (bitsandbytes MatMul4Bit.forward, `ctx.tensors = (A, B)` when the
  input needs a gradient, from commit 13c0a4dc until 0.43.2, PR #1270 / 9e753741): every
  frozen 4-bit linear keeps its input for backward, as an adapted one does.
- `offloaded-checkpointing` (Unsloth_Offloaded_Gradient_Checkpointer, unsloth/models/_utils.py,
  commit 4474e4bc): with checkpointing 'full' each block's input is copied to the host, so
  the GPU keeps none of them (one block recomputed in backward remains).
- `tiled-mlp` (unsloth-zoo unsloth_zoo/tiled_mlp.py `TiledMLP` / `patch_tiled_mlp`, added in
  c9c7693d, PR #350, 2025-11-12; read at ce232d6c), only with option `tiled-mlp` (Unsloth's
  `unsloth_tiled_mlp`): the default "arctic" split cuts the B*S tokens into tiles of h tokens
  (`tiled_forward_arctic_size`: chunk_size = H, n_shards = S // H, a remainder tile). Forward
  runs the MLP per tile under no_grad and `save_for_backward(x)` only: a block keeps the MLP
  input (p per token per hidden unit) instead of the MLP's saved tensors. Backward recomputes
  one tile at a time with grad enabled (its intermediates and their gradients live for that
  tile only) into a whole-size x gradient (`zeros_like(x)`, the input gradient a plain MLP
  writes too).
- `unsloth-lora-kernels` (unsloth/kernels/fast_lora.py, in Unsloth's first upload c3d6def6,
  2023-11-30, unchanged in what it saves at 015bdef0; patched in by unsloth/models/llama.py
  FastLlamaModel.patch_peft_model when lora_dropout is 0 and bias 'none'): `LoRA_MLP` (gate,
  up and down all adapted) saves `X, e, g` (the input, gate and up outputs) and the six
  adapter matrices; its backward computes DW = dY @ down^T (one f-wide tensor), then
  swiglu_DWf_DW_dfg writes h, df and de into DW, e and g in place, and dX is written into X
  (`out = X`): a block keeps x + 2 p f per token, not the product and act(gate) as well (PEFT's
  x + 4 p f), and its MLP backward holds one f-wide gradient, not two. `LoRA_QKV` (q, k, v all
  adapted) saves X once for q, k and v, and `LoRA_W` (o) saves its input X: what the layer
  model counts for adapted attention linears already (PEFT's adapters on a dropout-0 input
  share it too), so they move no bytes; the r-wide X @ A products PEFT keeps are not counted
  either way.
- `loss-parallel-backward` (torchtitan's loss_parallel() with tensor parallelism; torch's
  torch/distributed/tensor/parallel/loss.py _nll_loss_backward_handler, torch 2.13.0): the
  backward of the vocabulary-sharded loss holds the saved fp32 log-softmax output x,
  zeros_like(x), exp(x) and their sum, then the product: four fp32 T x V/t buffers at once
  (the eager loss holds three).
- `litgpt-qkv-views` (litgpt/lora.py LoRAQKVLinear, fde438aa; litgpt/model.py
  CausalSelfAttention, d28a00d8): v is a view of the fused qkv output, so with as many key /
  value heads as query heads (no repeat_interleave) SDPA's saved v keeps the q and k parts of
  qkv alive too, p (q + kv) per token beside the roped q and k; a LoRA on some of q, k, v
  zero-pads the adapters' output with index_copy_, which keeps its source, p x (the adapted
  widths) per token.
- `cudnn-attention-recomputed` (torchtitan 2025-05 to 2025-12: PR #1196, 3b85aa31, runs cuDNN
  attention on compute capability >= 10.0; PR #2095, b39377f9, adds that op to the op-level
  SAC save list): with selective checkpointing the attention output (p q per token) and its
  fp32 log-sum-exp (4 heads / h) are recomputed, not kept.
- `fsdp2-own-units` (torchtitan >= 2025-07, PR #1094, commit 83e69410, models/llama3/infra/
  parallelize.py apply_fsdp): the embeddings and [norm, output] are FSDP2 units of their own
  and the root unit holds nothing; the embeddings reshard after forward, so the parameters
  that stay gathered beside the blocks are the head's alone (before: embeddings + head).
- `adamw-8bit-default` (Unsloth >= 2025-02, PR #1701, commit 95fb1d69, unsloth/models/rl.py
  _patch_trl_rl_trainers: every TRL trainer config Unsloth patches takes `optim="adamw_8bit"`
  as its default): a scenario naming no optimizer gets `adamw-8bit` (the scenario stage reads
  `catalog.stacks.default_optimizer`): bitsandbytes AdamW8bit keeps two uint8 states and fp32
  block scales (vramplan.optimizers), not two states of the parameter's dtype. bitsandbytes
  keeps 32-bit states for tensors under `min_8bit_size` = 4096 elements (optim/optimizer.py
  Optimizer2State.init_state); a LoRA adapter holds r x in >= 4096 elements for r >= 8 and
  in >= 512, so none of them is that small.
- `bnb-optim-block-256` (bitsandbytes >= 0.44.0, PR #1365, aa57bd89, 2024-09: Optimizer2State
  .init_state blocksize 2048 -> 256): 8-bit optimizer states carry one fp32 absmax per 256
  values, 2 x (1 + 4 / 256) = 2.03125 B per parameter (2.00390625 B with 2048).
- `t5-fp32-wo` (transformers PR #20683; 5.23.0 T5PreTrainedModel._keep_in_fp32_modules =
  ["wo"], modeling_utils._get_dtype_plan for float16, the bitsandbytes quantizers'
  get_modules_to_not_convert): in T5-family models (t5, mt5, umt5, udop, pop2piano) every FFN
  output projection `wo` (d_ff x d_model, one per encoder and decoder layer) stays fp32 when
  the model loads in fp16, int8 or nf4 (their default load dtype is float16): 4 B per weight
  instead of the format's. Its input is cast to fp32 in T5DenseActDense.forward (not counted).
- `bnb-int8-keeps-input` (bitsandbytes MatMul8bitLt.forward, `ctx.tensors = (CAt, subA, A)`
  when any input needs a gradient, since c771b3a7): in a LoRA on an LLM.int8 base every frozen
  int8 linear keeps its input for backward (the input itself: q, k and v share one).
- `bnb-int8-copies` (bitsandbytes >= 0.45.0, PR #1401, 81e6345d): a call holds, beside its
  input and 16-bit output, the int8 quantised input (T x in), an fp32 scale per row (4 T) and
  the int32 accumulator (4 T x out) while it is dequantised: T (in + 4 out) + 4 T bytes for
  the widest block linear (h -> f); with fp16 activations (transformers' load_in_8bit default
  dtype) `A.to(float16)` is A itself. Outlier columns (subA = A[:, outlier_cols].contiguous(),
  T x the columns holding a value >= the 6.0 threshold, in A's dtype; 0.49.2 backends/default/
  ops.py int8_mixed_scaled_mm) depend on the data, and bitsandbytes' own fake kernel
  (_ops.py, int8_vectorwise_quant) gives their count a dynamic size: not counted. A LoRA
  keeps each call's subA for backward (ctx.tensors); the estimate notes the bound, every
  column of every int8 linear's input (int8_outlier_bound). The forward's other threshold
  copies (the CUDA kernel's A.abs() and bool mask, T x in at 2 + 1 B; the out-of-place
  output.addmm, a second T x out output once the int32 accumulator is freed) stay below
  the counted int32 moment of the widest linear while subA and subB take less than 2 T out
  bytes. Backward dequantises the weight:
  `state.CB.to(dtype_A, copy=True)`, a 16-bit copy of the widest linear, p in out bytes.
- `expandable-segments` (torchtitan >= 2024-10, commit a5e57e4a: run_llama_train.sh sets
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; pytorch CUDACachingAllocator.cpp Note
  [Expandable Segments]): the large pool is one segment that grows by 20 MiB pages and the
  small pool by 2 MiB pages, so no request gets a segment of its own rounded to 2 MiB and the
  1-10 MiB requests share no half-used 20 MiB segment: the rounding the allocator model adds
  is the unfilled part of the last 20 MiB page (vramplan.overhead.page_waste). Blocks inside
  the segment are still placed best-fit and split, so the fragmentation share stays: the
  published torchtitan runs that set it (F01-F07) hold a reserved - allocated gap like the
  runs without it.
- `topk-moe-routing` (torchtitan >= 2025-04, PR #1064, e4e48349, TokenChoiceTopKRouter +
  GroupedExperts; torchtune torchtune/modules/moe/moe.py; Megatron-Core moe/router.py
  TopKRouter): the stack's own Llama 4 MoE gathers each token's top-k routed copies only, so
  training keeps what layer_coeffs counts for the k routed experts and not what transformers'
  Llama4TextMoe.forward keeps for the E - k others (it repeats every token over all E experts:
  moe_buffers.dense_routing_saved).
- `megatron-selective-tp` (Megatron-LM / Megatron-DeepSpeed; Korthikanti et al. 2022 s.4):
  with `checkpointing: selective` and tensor parallelism the estimate otherwise follows
  torchtitan's op SAC over DTensor TP, which adds two terms (workloads/transformer/sharding.py
  `sac_gathered_inputs`: with SP the replay's column-parallel matmuls save the re-gathered
  attention and MLP inputs whole, 2 p' (1 - 1/t) s b h per block; training.py
  `_replicated_embedding_grad`: the RowwiseParallel embedding's gradient is the whole V x h
  table on every TP rank, tb V h (1 - 1/t)). Megatron recomputes the core attention only
  (megatron/core/transformer/attention.py `_checkpointed_attention_forward`), its sequence-
  parallel linears keep their s/t input shard and all-gather it again inside their own
  backward (tensor_parallel/layers.py `LinearWithGradAccumulationAndAsyncCommunication`), and
  `VocabParallelEmbedding`'s gradient is its V/t x h shard: both terms are 0 and the
  Megatron coefficient (sharding.tp_selective) holds.
- `frozen-bn` (detectron2/layers/batch_norm.py and torchvision.ops.misc FrozenBatchNorm2d:
  `x * scale + bias` with scale and bias from buffers): a frozen BN keeps no input for
  backward and has no parameters (four per-channel buffers).
"""
from __future__ import annotations

NF4_NO_DOUBLE_QUANT = 0.5 + 4.0 / 64      # B per weight: packed 4 bits + an fp32 absmax per 64

EFFECT = {
    "compiled-loss": "with option compile the cross-entropy is compiled too: it keeps the "
                     "16-bit logits and two fp32 values per row, and its fused backward writes "
                     "a 16-bit gradient (2 p T V bytes, not three fp32 vocabulary buffers)",
    "fused-cross-entropy": "Unsloth's fused cross-entropy keeps the 16-bit logits and an fp32 "
                           "log-sum-exp per row and writes the gradient into the logits in "
                           "place (p T V bytes)",
    "bnb-4bit-no-double-quant": "load_in_4bit without bnb_4bit_use_double_quant: an fp32 "
                                "absmax per 64 weights, 0.5625 B per 4-bit weight",
    "bnb-4bit-fp32-compute": "load_in_4bit without bnb_4bit_compute_dtype computes in fp32: "
                             "a 4-bit linear's backward holds its weight dequantised to fp32 "
                             "with fp32 input and output (the widest block linear)",
    "bnb-4bit-keeps-input": "bitsandbytes MatMul4Bit saves its input for backward: every "
                            "frozen 4-bit linear keeps its input",
    "offloaded-checkpointing": "Unsloth's offloaded gradient checkpointing: each block's input "
                               "is copied to the host during forward; the GPU keeps none",
    "tiled-mlp": "with option tiled-mlp, Unsloth's TiledMLP runs each MLP under no_grad in "
                 "tiles of hidden-size tokens and saves only its input x; its backward "
                 "recomputes one tile at a time (one tile's intermediates and gradients)",
    "unsloth-lora-kernels": "Unsloth's LoRA_MLP keeps its input, gate and up outputs "
                            "(X, e, g) and recomputes the activation and product in backward, "
                            "which rewrites them in place (one f-wide gradient); LoRA_QKV keeps "
                            "X once for q, k and v",
    "loss-parallel-backward": "torch's loss_parallel backward holds a fourth fp32 vocabulary-"
                              "shard buffer ((zeros_like(x) + exp(x)) * grad beside x)",
    "litgpt-qkv-views": "litgpt's fused qkv: the saved v view keeps the whole qkv output alive "
                        "(multi-head attention) and a LoRA on part of q, k, v keeps its "
                        "zero-pad source",
    "cudnn-attention-recomputed": "cuDNN attention on sm100 is not in torchtitan's selective-"
                                  "checkpointing save list: its output and log-sum-exp are "
                                  "recomputed in backward, not kept",
    "fsdp2-own-units": "FSDP2 wraps the embeddings and [norm, output] as units of their own; "
                       "the root unit holds nothing, so only the head stays gathered",
    "megatron-selective-tp": "Megatron's tensor parallelism under selective checkpointing: "
                             "only the core attention is recomputed, so no replay keeps the "
                             "sequence-parallel attention / MLP inputs gathered, and "
                             "VocabParallelEmbedding's gradient is this rank's vocabulary "
                             "shard (torchtitan's DTensor TP keeps both whole)",
    "frozen-bn": "FrozenBatchNorm2d in the backbone: x * scale + bias from buffers, no saved "
                 "input and no BN parameters",
    "adamw-8bit-default": "no optimizer given: the stack's trainer config defaults to "
                          "optim='adamw_8bit' (bitsandbytes AdamW8bit: 8-bit states)",
    "bnb-optim-block-256": "bitsandbytes >= 0.44 8-bit optimizer states: one fp32 absmax "
                           "per 256 values (2.03125 B per parameter)",
    "t5-fp32-wo": "T5's FFN output projections (wo) stay fp32 under fp16, int8 and nf4 "
                  "(transformers _keep_in_fp32_modules)",
    "bnb-int8-keeps-input": "bitsandbytes MatMul8bitLt saves its input for backward: every "
                            "frozen int8 linear keeps its input",
    "bnb-int8-copies": "LLM.int8 calls hold the int8 input, fp32 row scales and an int32 "
                       "accumulator; backward dequantises the weight to 16 bit",
    "expandable-segments": "expandable_segments:True: one growing segment per pool (20 MiB "
                           "pages), no per-request segment rounding",
    "cogvideox-vae-returned-caches": "the CogVideoX VAE decode keeps the previous chunk's "
                                     "causal-conv caches (each kernel-1 spatial-norm conv's a "
                                     "copy of its whole input) alive through the next chunk "
                                     "(workloads/diffusion/cogvideox_vae.py)",
    "topk-moe-routing": "the stack's own Llama 4 MoE sends each token to its top-k experts "
                        "only; transformers' Llama4TextMoe runs every token through all of "
                        "them, whose saved tensors are not counted here",
    "post-load-cached-blocks": "when from_pretrained puts quantised weights on the GPU itself "
                               "(device_map), a reserved reading taken right after loading "
                               "also holds the load's cached blocks (caching_allocator_warmup, "
                               "the 16-bit staging copies) until torch.cuda.empty_cache(); not "
                               "added here: the amount depends on the tensor order, and the "
                               "scenario does not say how the model reached the GPU",
}
_MARK = "stack mechanism "


def use(notes: list, stack, name: str) -> bool:
    """True when `stack` has mechanism `name`; the first time, a note with its effect and
    source is added to `notes`."""
    if not stack.has(name):
        return False
    head = f"{_MARK}'{name}' ({stack.label})"
    if not any(n.startswith(head) for n in notes):
        notes.append(f"{head}: {EFFECT[name]} (source: {stack.mechanisms[name]})")
    return True


def applied(notes: list) -> set[str]:
    """The mechanisms `use` applied, read from the notes it wrote."""
    out = set()
    for n in notes:
        if isinstance(n, str) and n.startswith(_MARK + "'"):
            out.add(n[len(_MARK) + 1:].split("'", 1)[0])
    return out


def section(stack, notes: list) -> dict:
    """The estimate's `stack` section."""
    done = applied(notes)
    return {"name": stack.name, "version": stack.version, "change_point": stack.point,
            "resolution": stack.resolution_note(),
            "mechanisms": [{"name": m, "source": src, "applied": m in done}
                           for m, src in stack.mechanisms.items()]}


def mark_applied(section_: dict | None, name: str) -> None:
    """Set a mechanism applied in an estimate's `stack` section made before a later stage
    (the allocator's, vramplan.overhead) applied it."""
    for m in (section_ or {}).get("mechanisms", ()):
        if m["name"] == name:
            m["applied"] = True


def compiled_loss_bytes(p: int, tokens: int, vocab: int) -> int:
    """torchtitan's compiled cross-entropy in its backward: the saved 16-bit logits and two
    fp32 values per row, the 16-bit gradient its fused backward writes and its fp32 row sum
    (traced: tests/test_stack_trace_loss.py)."""
    return 2 * p * tokens * vocab + 12 * tokens


def lora_mlp_coeff(x_bytes: float, p: int, f_ratio: float) -> float:
    """Unsloth's LoRA_MLP saved bytes per token per hidden unit: its input X (x_bytes) and the
    gate and up outputs e, g (p f / h each); the activation and product are recomputed."""
    return x_bytes + 2 * p * f_ratio


def loss_parallel_bytes(tokens: int, vocab_shard: int) -> int:
    """torch's loss_parallel backward: four fp32 T x V/t buffers."""
    return 4 * 4 * tokens * vocab_shard


def fused_ce_bytes(p: int, tokens: int, vocab: int) -> int:
    """Unsloth's Fast_CrossEntropyLoss: the logits (their gradient written in place) and an
    fp32 log-sum-exp per row."""
    return p * tokens * vocab + 4 * tokens


def fp32_dequant_bytes(d_in: int, d_out: int, tokens: int) -> int:
    """A 4-bit linear computing in fp32: its dequantised fp32 weight and fp32 input / output."""
    return 4 * d_in * d_out + 4 * tokens * (d_in + d_out)


def nf4_weights(quantizable: int, kept: int) -> int:
    """4-bit weights without double quantisation; the rest (embeddings, head, norms) 16-bit."""
    return int(quantizable * NF4_NO_DOUBLE_QUANT) + 2 * kept


def int8_call_bytes(d_in: int, d_out: int, tokens: int) -> int:
    """An LLM.int8 call's copies beside its input and 16-bit output (bitsandbytes >= 0.45):
    the int8 input, an fp32 scale per row and the int32 accumulator."""
    return tokens * (d_in + 4 * d_out) + 4 * tokens


def int8_outlier_bound(p: int, in_widths) -> int:
    """Bytes per token per block LLM.int8's saved outlier columns (subA, one per int8 linear
    call) reach at most: every column of every linear's input, p bytes each."""
    return p * sum(in_widths)


T5_FP32_TYPES = ("t5", "mt5", "umt5", "udop", "pop2piano")


def t5_fp32_extra(n_wo: int, fmt_bytes_per_weight: float) -> int:
    """Bytes the fp32 `wo` projections add over storing their n_wo weights in the format."""
    return int(n_wo * (4 - fmt_bytes_per_weight))
