"""Measure a real torch module without a GPU: two steps under fake tensors, live bytes counted.

    from vramplan.measure import trace
    r = trace.trace({"model": "gpt2", "task": "train", "batch_size": 4, "seq_len": 512,
                     "precision": "fp32", "optimizer": "adamw", "gpu": "nvidia-a100-sxm4-80gb"})
    r.peak_allocated_bytes, r.components, r.by_module, r.peak_phase
    r.to_dict()        # the estimate JSON shape (SCENARIO.md) with "source": "trace"

    trace.trace_module(lambda: MyNet(), (x,), loss_fn=F.cross_entropy, targets=(y,))

The result is a `vramplan.result.MemoryReport` (`TraceReport`, source "trace"): the contract's
figures (components at the peak, allocated, reserved from the caching-allocator model, device
used = reserved + the CUDA context of `runtime.cuda_context_bytes`, fits and headroom on the
scenario's GPU) and a "trace" section (phases, module groups, timeline, kernel rewrites, notes).

A scenario with `parallel` data > 1 and zero 2/3 is traced as rank 0, FSDP2-sharded on a fake
process group in this process (tracing/sharded.py); tensor / pipeline parallel and FSDP x TP plans
as rank 0 of each pipeline stage (tracing/plan.py); context parallelism and ZeRO-1 are refused
with a message.

Importing this module does not import torch (the work is in `vramplan.measure.tracing`, imported
inside the functions). Method and where trace and the analytic estimate differ: docs/tracing.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import runtime
from ..errors import UnavailableError
from ..hardware import get_gpu, traits_of
from ..parallel import layout_of
from ..result import MemoryReport
from ..scenario.rules import memory_limit
from ..vocab import ALLOCATOR_SLACK, COMPONENTS, CUDA_CONTEXT
from .buildable import FAMILIES, scenario_of, spec_of


def _torch():
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise UnavailableError("trace needs torch (pip install 'vramplan[torch]')") from exc


@dataclass
class TraceReport(MemoryReport):
    """A traced run as a MemoryReport (source "trace"): `components` at the peak hold the counted
    categories (summing to peak_allocated_bytes) plus cuda_context and allocator_slack."""

    source: str = "trace"
    by_module: dict = field(default_factory=dict)   # at the peak, by module group
    peak_phase: str = "setup"
    peak_step: int = 0
    phases: dict = field(default_factory=dict)      # per phase: its top, the step, components
    timeline: list = field(default_factory=list)    # (event index, phase, live bytes)
    mode: str = "fake"
    kernels: str = "cuda"
    largest_allocation: int = 0
    peak_unrounded_bytes: int = 0
    events: int = 0
    ops: int = 0
    seconds: float = 0.0
    rewrites: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    ranks: dict = field(default_factory=dict)       # pipeline stages traced: each one's peak

    def timeline_points(self, n: int = 400) -> list[tuple[int, str, int]]:
        """At most ~n points: the maximum of each bucket (so the peak is always kept)."""
        tl = self.timeline
        if len(tl) <= n:
            return list(tl)
        size = -(-len(tl) // n)
        return [max(tl[i:i + size], key=lambda e: e[2]) for i in range(0, len(tl), size)]

    def to_dict(self, timeline: bool = False, points: int = 400) -> dict:
        """The contract's JSON with a "trace" section (its "timeline" when `timeline`)."""
        t = {"mode": self.mode, "kernels": self.kernels,
             "peak_phase": self.peak_phase, "peak_step": self.peak_step,
             "by_module": dict(sorted(self.by_module.items(), key=lambda kv: -kv[1])),
             "phases": self.phases,
             "largest_allocation_bytes": int(self.largest_allocation),
             "peak_unrounded_bytes": int(self.peak_unrounded_bytes),
             "events": self.events, "ops": self.ops, "seconds": round(self.seconds, 3),
             "kernel_rewrites": self.rewrites, "notes": self.notes}
        if self.ranks:
            t["ranks"] = self.ranks
        if timeline:
            t["timeline"] = [list(e) for e in self.timeline_points(points)]
        self.sections = {"trace": t}
        return super().to_dict()


def _report(counted, mode, kernels, scenario=None, gpu=None) -> TraceReport:
    c = counted.counter
    reserved = max(counted.reserved["peak_reserved_bytes"], c.peak)
    ctx = runtime.cuda_context_bytes(traits_of(gpu), scenario) if gpu is not None else 0
    comps = {k: 0 for k in COMPONENTS}
    comps.update(c.peak_cat)
    comps[CUDA_CONTEXT], comps[ALLOCATOR_SLACK] = int(ctx), int(reserved - c.peak)
    used = reserved + ctx
    # the estimate's one memory limit: usable memory less the plan's safety_margin (issue 20.6)
    headroom = int(memory_limit(getattr(scenario, "safety_margin", None), gpu.usable_bytes)
                   - used) if gpu is not None else None
    return TraceReport(
        scenario=scenario, gpu=gpu, components=comps, peak_allocated_bytes=c.peak,
        peak_reserved_bytes=reserved, device_used_bytes=used,
        fits=None if headroom is None else headroom >= 0, headroom_bytes=headroom,
        by_module=dict(c.peak_mod), peak_phase=c.peak_phase, peak_step=c.peak_step,
        phases=c.phase_peaks, timeline=c.timeline, mode=mode, kernels=kernels,
        largest_allocation=c.peak_largest, peak_unrounded_bytes=c.peak_raw, events=c.events,
        ops=c.ops, seconds=counted.seconds, rewrites=counted.rewrites, notes=counted.notes)


def trace(scenario, mode: str = "fake", kernels: str = "cuda", *, steps: int = 2,
          timeline: bool = True, spec=None, progress=None, stage=None) -> TraceReport:
    """Trace a scenario (dict or Scenario). `spec`: a ModelSpec or (family, config) to build
    instead of the scenario's model. `progress(phase, k)` is called as the run goes:
    ("build", 0) before the module is built, ("step", k) as step k of `steps` starts,
    ("finish", steps) after the last step (the allocator model runs then). `stage`: the
    pipeline stage to trace (default: each stage the estimate lists; the worst is returned,
    every one in `ranks`)."""
    _torch()
    scn = scenario_of(scenario)
    spec = spec_of(scn, spec)
    from .tracing.jobs import job_for
    from .tracing.runner import run_job
    build = job_for(scn, spec)
    on_step = None
    if progress is not None:
        build, on_step = _with_progress(build, progress, steps)
    gpu = get_gpu(scn.gpu) if scn.gpu else None
    lay = layout_of(scn.parallel)
    notes = []
    if lay.tensor > 1 or lay.pipeline > 1 or lay.context > 1 or (lay.data > 1 and lay.zero >= 1):
        from .tracing import sharded
        sharded.check_plan(lay.zero, lay.data, lay.tensor, lay.pipeline, lay.context)
    if lay.tensor > 1 or lay.pipeline > 1:
        return _trace_plan(build, lay, scn, gpu, mode, kernels, steps, timeline, on_step, stage)
    if lay.data > 1 and lay.zero >= 2:
        counted = _run_sharded(build, lay.zero, lay.data, mode, kernels, steps, timeline,
                               on_step)
    else:
        if lay.gpus > 1:
            notes.append("parallel plan without ZeRO sharding: every rank holds this full "
                         "replica (DDP gradient buckets not modelled)")
        counted = run_job(build, mode, kernels, steps, timeline, on_step=on_step)
    counted.notes.extend(notes)
    return _report(counted, mode, kernels, scn, gpu)


def _trace_plan(build, lay, scn, gpu, mode, kernels, steps, timeline, on_step, stage):
    """Tensor / pipeline (and 2-D with FSDP) plans: rank 0 of each traced pipeline stage
    (tracing/plan.py); the worst stage is the report, every stage's peak in `ranks`."""
    from ..workloads.transformer.sharding import stage_name, stages
    from .tracing.plan import run_plan
    pp = lay.pipeline
    todo = [stage] if stage is not None else stages(pp)
    reps = {}
    for i in todo:
        counted = run_plan(build, lay, scn.options, int(scn.gradient_accumulation or 1), mode,
                           kernels, steps, timeline, on_step, stage=i)
        reps[stage_name(i, pp) if pp > 1 else "rank 0"] = _report(counted, mode, kernels, scn, gpu)
    worst = max(reps.values(), key=lambda r: r.peak_allocated_bytes)
    if pp > 1:
        worst.ranks = {k: {"peak_allocated_bytes": r.peak_allocated_bytes,
                           "peak_phase": r.peak_phase, "components": dict(r.components)}
                       for k, r in reps.items()}
    return worst


def _with_progress(build, progress, steps):
    """`build` and an `on_step` that report to `progress` (see `trace`)."""
    def built():
        progress("build", 0)
        job = build()
        progress("step", 1)
        return job
    built.precision = build.precision

    def on_step(k: int) -> None:
        progress("step", k + 1) if k < steps else progress("finish", steps)
    return built, on_step


def _run_sharded(build, zero, world, mode, kernels, steps, timeline, on_step=None):
    """Rank 0 of a ZeRO-2/3 data-parallel plan: FSDP2 on a fake process group (tracing/sharded.py)."""
    from .tracing import sharded
    from .tracing.runner import run_job
    with sharded.fake_process_group(world) as mesh:
        def sharded_build():
            job = build()
            job.model = sharded.shard_model(job.model, zero, mesh)
            return job
        sharded_build.precision = build.precision
        counted = run_job(sharded_build, mode, kernels, steps, timeline, on_step=on_step,
                          instrument=sharded.instrument)
    counted.notes.append(f"rank 0 of {world}: ZeRO-{zero} as FSDP2 fully_shard per block + root "
                         "on a fake process group (collectives allocate their outputs, move no "
                         "data; NCCL buffers not counted)")
    return counted


def trace_module(module, example_inputs, loss_fn=None, targets=(), *, task=None,
                 precision="fp32", optimizer="adamw", mode="fake", kernels="cuda", steps=2,
                 timeline=True) -> TraceReport:
    """Trace any module: two steps of `loss_fn(module(*example_inputs), *targets)` + backward +
    optimizer (or forward only without loss_fn). `module` may be a factory (fastest in fake mode)."""
    _torch()
    from .tracing.jobs import module_job
    from .tracing.runner import run_job
    counted = run_job(module_job(module, example_inputs, loss_fn, targets, task=task,
                                 precision=precision, optimizer=optimizer), mode, kernels, steps,
                      timeline)
    return _report(counted, mode, kernels)


def trace_real(scenario, source: dict, mode: str = "fake", kernels: str = "cuda", *,
               steps: int = 2, timeline: bool = True) -> TraceReport:
    """Trace the implementation people run, built from its config (no weights, no network):
    `source` is {"hf": config.json dict} (transformers, or diffusers by `_class_name`),
    {"torchvision" | "timm": name, "kwargs": {...}} or {"diffusers": config}; the scenario
    gives the workload (task, batch, lengths, resolution, precision). tracing/thirdparty.py.
    {"module": "pkg.mod:factory", "task": ..., "precision": ...} takes no scenario."""
    _torch()
    from .tracing import thirdparty
    from .tracing.runner import run_job
    if isinstance(source, dict) and "module" in source:
        build = thirdparty.factory_job(source["module"], source.get("task"),
                                       source.get("precision") or "fp32")
        return _report(run_job(build, mode, kernels, steps, timeline), mode, kernels)
    scn = scenario_of(scenario)
    counted = run_job(thirdparty.job_for_source(source, scn), mode, kernels, steps, timeline)
    return _report(counted, mode, kernels, scn, get_gpu(scn.gpu) if scn.gpu else None)


def buildable_families() -> tuple[str, ...]:
    return FAMILIES
