"""The parallel layout's keys for MoE experts and interleaved pipelines: `parallel.expert` and
`parallel.virtual_stages` (rows of the key table, registered in `keys.py`'s NESTED), and the
rules between them and the model, the layout and the accumulation (`check_layout`, run by the
scenario pass after `parallel` and `gradient_accumulation` are read).

Rules, each from the framework that runs the layout:
* `expert` (Megatron-LM --expert-model-parallel-size; torchtitan expert_parallel_degree):
  MoE models only; divides the model's routed experts (megatron/training/arguments.py:
  "Number of experts should be a multiple of expert model parallel_size") and data x context
  (Megatron-Core parallel_state.initialize_model_parallel: world_size must be a multiple of
  expert_tensor x expert x pipeline, expert_tensor defaulting to tensor, so the expert group
  is carved out of the data x context ranks; torchtitan's ParallelDims builds its EP mesh from
  dp_shard x cp the same way).
* `virtual_stages` v (Megatron --num-virtual-stages-per-pipeline-rank, the interleaved 1F1B
  schedule; torchtitan pipeline_parallel_schedule Interleaved1F1B): needs pipeline > 1; v
  divides the layers per pipeline stage (arguments.py: "number of layers per pipeline stage
  must be divisible number of layers per virtual pipeline stage"); the micro-batches per step
  (gradient_accumulation) are a multiple of pipeline (Megatron-Core
  pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving: the
  micro-batch group per virtual stage, default pp, must lie in [pp, m] and m modulo it be 0 or
  >= pp, which for the default group is m % pp == 0).
"""
from __future__ import annotations

from ..errors import ScenarioError
from ..vocab import TRAINING_TASKS, TRANSFORMER_FAMILIES
from .schema import Key

BIG = 1 << 20


def is_moe(spec) -> bool:
    """Does the model route tokens to experts (a form shows `parallel.expert` only then)?"""
    arch = getattr(spec, "arch", None) if spec is not None else None
    return bool(arch is not None and getattr(arch, "is_moe", False))


_COMMON = dict(kind="int", lo=1, hi=BIG, tasks=TRAINING_TASKS, families=TRANSFORMER_FAMILIES,
               default=1)

PARALLEL_KEYS = (
    Key("parallel.expert", label="Expert parallel", doc="expert-parallel ranks: each MoE "
        "layer's routed experts split over them (Megatron --expert-model-parallel-size); "
        "divides the experts and data x context", unit="GPUs", flag="--expert",
        where="MoE transformer models, training tasks", shown_for=is_moe,
        default_doc="1", **_COMMON),
    Key("parallel.virtual_stages", label="Virtual pipeline stages", doc="model chunks per "
        "pipeline rank: the interleaved 1F1B schedule (Megatron "
        "--num-virtual-stages-per-pipeline-rank); 1 is plain 1F1B; divides the layers per "
        "stage, needs micro-batches a multiple of pipeline", unit="chunks",
        flag="--virtual-stages", where="transformer models, training tasks",
        default_doc="1 (plain 1F1B)", **_COMMON),
)


def _refuse_inapplicable(layout, task: str, family: str | None) -> None:
    for k in PARALLEL_KEYS:
        v = getattr(layout, k.name.split(".", 1)[1])
        if v != 1 and not k.applies(task, family):
            raise k.refusal(task, family)


def check_expert(layout, spec) -> None:
    e = layout.expert
    if e == 1:
        return
    if not is_moe(spec):
        name = getattr(spec, "id", "this model")
        raise ScenarioError("parallel.expert", f"{e}: expert parallelism needs an MoE model; "
                            f"{name} has no routed experts")
    experts = spec.arch.num_experts
    if experts % e:
        raise ScenarioError("parallel.expert", f"{e} does not divide the {experts} routed "
                            f"experts of {spec.id} (each rank holds experts / expert)")
    group = layout.data * layout.context
    if group % e:
        raise ScenarioError("parallel.expert", f"{e} does not divide data x context = "
                            f"{layout.data} x {layout.context} = {group} (the expert group "
                            "is carved out of the data-parallel ranks, as Megatron-Core and "
                            "torchtitan build it)")


def check_virtual(layout, spec, accumulation: int) -> None:
    v, p = layout.virtual_stages, layout.pipeline
    if v == 1:
        return
    if p <= 1:
        raise ScenarioError("parallel.virtual_stages", f"{v} virtual stages need pipeline > 1 "
                            "(the interleaved schedule splits each pipeline rank's layers)")
    layers = spec.arch.total_layers if spec is not None and spec.arch is not None else None
    if layers is not None:
        per_stage = -(-layers // p)
        if layers % p or per_stage % v:
            raise ScenarioError("parallel.virtual_stages", f"{v} does not divide the layers "
                                f"per pipeline stage ({layers} layers / pipeline {p}"
                                + ("" if layers % p == 0 else ", not a whole number")
                                + f" = {layers / p:g}; Megatron requires whole chunks)")
    m = int(accumulation or 1)
    if m % p:
        raise ScenarioError("parallel.virtual_stages", f"the interleaved schedule needs "
                            f"gradient_accumulation (micro-batches per step, {m}) to be a "
                            f"multiple of pipeline ({p}) (Megatron-Core schedules.py)")


def check_layout(layout, spec, task: str, accumulation: int) -> None:
    """The rules of the module doc, each refused naming its key."""
    family = getattr(spec, "family", None) if spec is not None else None
    _refuse_inapplicable(layout, task, family)
    check_expert(layout, spec)
    check_virtual(layout, spec, accumulation)
