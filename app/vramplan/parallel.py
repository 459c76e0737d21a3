"""How data (ZeRO / FSDP), tensor, pipeline and context parallelism divide memory per GPU.

Pure functions over counts and bytes. Conventions (say which is assumed):
* ZeRO-1 shards optimizer states, ZeRO-2 also gradients, ZeRO-3 (FSDP full shard) also
  parameters; FSDP shard-grad-op is ZeRO-2. The shard group is data x context (torchtitan and
  Megatron shard over the flattened dp x cp mesh).
* Tensor parallel (Megatron / vLLM / torchtitan): attention heads and MLP width split;
  embeddings and lm_head vocab-parallel; norms replicated. Activations between a column- and a
  row-parallel linear divide by tp; the norm inputs, the linears' (replicated) inputs, dropout
  masks and the checkpointed block inputs only with sequence parallelism (Korthikanti et al.
  2022, Table 2; workloads/transformer/sharding.py). Logits and loss divide by tp only with loss
  parallelism (torchtitan loss_parallel; Megatron's vocab-parallel cross entropy).
* Pipeline (1F1B): each stage holds ceil(layers/pp) blocks; stage i holds min(pp - i,
  micro-batches) micro-batches in flight (PipeDream-flush / Megatron 1F1B warm-up); stage 0
  keeps the embeddings, the last stage the head (a copy when tied), the logits and the loss.
  Each distinct stage is estimated; per_gpu is the worst one.
* Context parallel: each rank holds seq/cp tokens.
* Checkpointing per rank (workloads/transformer/training.py): none keeps the TP / SP split
  block (sharding.tp_layer); full keeps each block's input (over t only with SP) and one
  recomputed block; selective (torchtitan op-level SAC) keeps sharding.tp_selective and, in a
  block's backward, that block's recomputed rest.
* Expert parallel (`expert`, Megatron-LM --expert-model-parallel-size): the routed experts of
  every MoE layer split over `expert` ranks (num_experts % expert == 0, megatron/training/
  arguments.py); the expert group lies inside data x context (Megatron-Core parallel_state.py
  initialize_model_parallel: world % (expert_tensor x expert x pipeline) == 0 with
  expert_tensor = tensor by default, so expert divides data x context). Expert weights,
  gradients and optimizer states per rank divide by it; ZeRO shards the experts over the
  expert-data group (data x context / expert).
* Interleaved pipeline (`virtual_stages` v, Megatron --num-virtual-stages-per-pipeline-rank,
  torch.distributed.pipelining ScheduleInterleaved1F1B): each rank holds v model chunks of
  layers / (pp v) blocks; rank r runs 2 (pp - r - 1) + (v - 1) pp warm-up chunk forwards
  before its first backward (Megatron-Core pipeline_parallel/schedules.py
  get_pp_rank_microbatches, microbatch group = pp), so it holds that + 1 chunk-micro-batches:
  stage 0 holds pp + (pp - 1) / v micro-batches' worth of a stage's blocks, 1 + (pp - 1) /
  (pp v) times the 1F1B figure (Narayanan et al. 2021, arXiv:2104.04473 s.2.2); the bubble
  shrinks to (pp - 1) / (v m) and each micro-batch crosses v times as many stage boundaries.
"""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class ParallelConfig:
    """How the job is spread: gpus == data * tensor * pipeline * context; `zero` 0-3 is the
    ZeRO stage over the data-parallel group (FSDP full shard = 3, shard-grad-op = 2). The
    scenario's `parallel` (validated there, key table `vramplan.scenario.keys`) and the layout
    every function here reads: one definition of the groups derived from it."""
    gpus: int = 1
    data: int = 1
    tensor: int = 1
    pipeline: int = 1
    context: int = 1
    zero: int = 0
    expert: int = 1
    virtual_stages: int = 1

    @property
    def shard_group(self) -> int:
        """Ranks over which ZeRO / FSDP shards model states (data x context)."""
        return max(1, self.data * self.context)

    @property
    def multi_gpu(self) -> bool:
        return max(self.gpus, self.data * self.tensor * self.pipeline * self.context) > 1

    @property
    def model_parallel(self) -> int:
        return self.tensor * self.pipeline * self.context

    @property
    def expert_shard_group(self) -> int:
        """Ranks over which ZeRO / FSDP shards the routed experts' states (the expert-data
        group: data x context / expert; Megatron-Core's expert_data_parallel_size)."""
        return max(1, self.shard_group // max(1, self.expert))

    def to_dict(self) -> dict:
        """Every field; expert and virtual_stages only when set (1: the plain layout, whose
        normalised scenario and JSON are as before these fields existed)."""
        return {k.name: getattr(self, k.name) for k in fields(self)
                if k.name not in _OPTIONAL or getattr(self, k.name) != 1}


_OPTIONAL = ("expert", "virtual_stages")
Layout = ParallelConfig


def layout_of(parallel) -> Layout:
    """Read a scenario's `parallel` (ParallelConfig or dict) into a Layout; missing fields take
    their defaults. A dict is taken as given (already validated or built by code)."""
    if parallel is None:
        return Layout()
    if isinstance(parallel, Layout):
        return parallel
    get = (parallel.get if isinstance(parallel, dict)
           else lambda k, d=None: getattr(parallel, k, d))
    vals = {k: int(get(k, d) or d) for k, d in
            (("gpus", 1), ("data", 1), ("tensor", 1), ("pipeline", 1), ("context", 1))}
    return Layout(zero=int(get("zero", 0) or 0), expert=int(get("expert", 1) or 1),
                  virtual_stages=int(get("virtual_stages", 1) or 1), **vals)


def shard_divisors(zero: int, group: int) -> dict[str, int]:
    """Divisor of each model-state component under ZeRO stage `zero` over `group` ranks."""
    g = max(1, group)
    return {"weights": g if zero >= 3 else 1,
            "gradients": g if zero >= 2 else 1,
            "optimizer_states": g if zero >= 1 else 1}


def shard(nbytes: int, divisor: int) -> int:
    """Per-rank share of a flat-sharded tensor set (FSDP pads to a multiple of the group)."""
    return -(-int(nbytes) // max(1, divisor))


def fsdp_unsharded_bytes(unit_params: int, compute_bytes: int, grad_reduce_bytes: int,
                         prefetch: int = 1) -> int:
    """Working set of FSDP/ZeRO-3 during backward: the all-gathered parameters of the unit being
    computed plus `prefetch` units gathered ahead (FSDP default backward prefetch: 1), and the
    unit's unsharded gradients before their reduce-scatter (in the reduce dtype)."""
    return unit_params * compute_bytes * (1 + prefetch) + unit_params * grad_reduce_bytes


def stage_layers(layers: int, pipeline: int) -> int:
    """Blocks on the busiest pipeline stage."""
    return -(-layers // max(1, pipeline))


def pipeline_inflight(pipeline: int, micro_batches: int, stage: int = 0) -> int:
    """1F1B: stage i runs pp - i warm-up forwards before its first backward, so it holds
    min(pp - i, micro-batches) micro-batches of activations at once (stage 0: pp)."""
    if pipeline <= 1:
        return 1
    return max(1, min(pipeline - stage, micro_batches))


def interleaved_inflight(pipeline: int, virtual: int, micro_batches: int,
                         stage: int = 0) -> float:
    """Micro-batches' worth of a stage's blocks that pipeline rank `stage` holds at once.
    1F1B (virtual 1): `pipeline_inflight`. Interleaved (Megatron-Core schedules.py
    get_pp_rank_microbatches, microbatch group = pp): 2 (pp - r - 1) + (v - 1) pp warm-up
    chunk forwards, + 1 in the steady state, at most m v chunks; each chunk is 1/v of the
    rank's blocks. Stage 0: (v pp + pp - 1) / v = pp (1 + (pp - 1) / (pp v))."""
    if virtual <= 1 or pipeline <= 1:
        return pipeline_inflight(pipeline, micro_batches, stage)
    warm = 2 * (pipeline - stage - 1) + (virtual - 1) * pipeline
    return min(warm + 1, micro_batches * virtual) / virtual


def bubble_share(pipeline: int, micro_batches: int, virtual: int = 1) -> float:
    """Idle share of a step's compute in the pipeline bubble: (p - 1) / m for 1F1B,
    (p - 1) / (v m) interleaved (Narayanan et al. 2021, arXiv:2104.04473 s.2.2.1)."""
    if pipeline <= 1:
        return 0.0
    return (pipeline - 1) / (max(1, virtual) * max(1, micro_batches))


def nccl_bytes(layout: Layout) -> int:
    """NCCL communicator buffers and kernels outside PyTorch's allocator, per GPU: ~0.5 GiB per
    communicator that talks (DESIGN: NCCL adds 0.5-4 GiB; NCCL_BUFFSIZE 4 MiB x channels x peers
    plus its own kernels and proxy memory). One per parallel dimension > 1."""
    if not layout.multi_gpu:
        return 0
    dims = sum(1 for d in (layout.data * layout.context, layout.tensor, layout.pipeline,
                           layout.expert) if d > 1)
    return max(1, dims) * 512 * 2**20
