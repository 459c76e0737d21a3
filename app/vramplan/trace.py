"""Measure a real torch module without a GPU: two steps under fake tensors, live bytes counted.

    from vramplan import trace
    r = trace.trace({"model": "gpt2", "task": "train", "batch_size": 4, "seq_len": 512,
                     "precision": "fp32", "optimizer": "adamw", "gpu": "nvidia-a100-sxm4-80gb"})
    r.peak_allocated_bytes, r.components, r.by_module, r.peak_phase
    r.to_dict()        # the estimate JSON shape (SCENARIO.md) with "source": "trace"

    trace.trace_module(lambda: MyNet(), (x,), loss_fn=F.cross_entropy, targets=(y,))

A scenario with `parallel` data > 1 and zero 2/3 is traced as rank 0, FSDP2-sharded on a fake
process group in this process (tracing/sharded.py); tensor / pipeline / context parallelism and
ZeRO-1 are refused with a message.

Importing this module does not import torch (the work is in `vramplan.tracing.*`, imported inside
the functions). Method and where trace and the analytic estimate differ: docs/tracing.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ScenarioError, UnavailableError
from .vocab import COMPONENTS

FAMILIES = ("decoder", "encoder", "vit", "cnn", "unet")
_RESNET_DEPTHS = {18: ((2, 2, 2, 2), "basic"), 34: ((3, 4, 6, 3), "basic"),
                  50: ((3, 4, 6, 3), "bottleneck"), 101: ((3, 4, 23, 3), "bottleneck"),
                  152: ((3, 8, 36, 3), "bottleneck")}


def _torch():
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise UnavailableError("trace needs torch (pip install 'vramplan[torch]')") from exc


@dataclass
class TraceResult:
    peak_allocated_bytes: int
    components: dict[str, int]           # at the peak; sums to peak_allocated_bytes
    by_module: dict[str, int]            # at the peak, by module group
    peak_phase: str
    peak_step: int
    peak_reserved_bytes: int             # the caching-allocator model replayed over the run
    phases: dict[str, dict]              # per phase: its top, the step, components there
    timeline: list[tuple[int, str, int]] # (event index, phase, live bytes)
    mode: str
    kernels: str
    largest_allocation: int = 0
    peak_unrounded_bytes: int = 0
    events: int = 0
    ops: int = 0
    seconds: float = 0.0
    rewrites: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    scenario: object = None
    gpu: object = None
    cuda_context_bytes: int = 0

    @property
    def device_used_bytes(self) -> int:
        return self.peak_reserved_bytes + self.cuda_context_bytes

    def timeline_points(self, n: int = 400) -> list[tuple[int, str, int]]:
        """At most ~n points: the maximum of each bucket (so the peak is always kept)."""
        tl = self.timeline
        if len(tl) <= n:
            return list(tl)
        size = -(-len(tl) // n)
        return [max(tl[i:i + size], key=lambda e: e[2]) for i in range(0, len(tl), size)]

    def to_dict(self, timeline: bool = False, points: int = 400) -> dict:
        comps = {k: int(self.components.get(k, 0)) for k in COMPONENTS}
        comps.update({k: int(v) for k, v in self.components.items() if k not in comps})
        comps["cuda_context"] = int(self.cuda_context_bytes)
        comps["allocator_slack"] = int(self.peak_reserved_bytes - self.peak_allocated_bytes)
        scn = self.scenario
        if scn is not None and hasattr(scn, "to_dict"):
            scn = scn.to_dict()
        gpu = None
        fits = headroom = None
        if self.gpu is not None:
            g = self.gpu
            gpu = {"id": g.id, "name": g.name, "memory_bytes": g.memory_bytes}
            usable = getattr(g, "usable_bytes", g.memory_bytes)
            headroom = int(usable - self.device_used_bytes)
            fits = headroom >= 0
        d = {
            "source": "trace",
            "scenario": scn,
            "gpu": gpu,
            "per_gpu": {"components": comps,
                        "peak_allocated_bytes": int(self.peak_allocated_bytes),
                        "peak_reserved_bytes": int(self.peak_reserved_bytes),
                        "device_used_bytes": int(self.device_used_bytes)},
            "fits": fits,
            "headroom_bytes": headroom,
            "max_batch_size": None,
            "bandwidth": {},
            "recommendations": [],
            "trace": {
                "mode": self.mode, "kernels": self.kernels,
                "peak_phase": self.peak_phase, "peak_step": self.peak_step,
                "by_module": dict(sorted(self.by_module.items(), key=lambda kv: -kv[1])),
                "phases": self.phases,
                "largest_allocation_bytes": int(self.largest_allocation),
                "peak_unrounded_bytes": int(self.peak_unrounded_bytes),
                "events": self.events, "ops": self.ops, "seconds": round(self.seconds, 3),
                "kernel_rewrites": self.rewrites,
                "notes": self.notes,
            },
        }
        if timeline:
            d["trace"]["timeline"] = [list(e) for e in self.timeline_points(points)]
        return d


def _result(counted, mode, kernels, scenario=None, gpu=None) -> TraceResult:
    c = counted.counter
    ctx = 0
    if gpu is not None:
        try:
            from . import overhead
            ctx = int(overhead.cuda_context_bytes(gpu))
        except Exception:  # overhead not available yet: leave the context out, say so
            counted.notes.append("cuda_context not added (vramplan.overhead unavailable)")
    return TraceResult(
        peak_allocated_bytes=c.peak, components=dict(c.peak_cat), by_module=dict(c.peak_mod),
        peak_phase=c.peak_phase, peak_step=c.peak_step,
        peak_reserved_bytes=max(counted.reserved["peak_reserved_bytes"], c.peak),
        phases=c.phase_peaks, timeline=c.timeline, mode=mode, kernels=kernels,
        largest_allocation=c.peak_largest, peak_unrounded_bytes=c.peak_raw, events=c.events,
        ops=c.ops, seconds=counted.seconds, rewrites=counted.rewrites, notes=counted.notes,
        scenario=scenario, gpu=gpu, cuda_context_bytes=ctx)


def resolve_model(scenario) -> tuple[str, dict, str]:
    """(family, config, id) of the scenario's model, from the catalog or the inline architecture."""
    get = (lambda k: scenario.get(k)) if isinstance(scenario, dict) else (lambda k: getattr(scenario, k, None))
    model, arch = get("model"), get("architecture")
    if arch:
        arch = dict(arch)
        fam = arch.pop("family", None)
        try:
            from .catalog import spec_from_architecture
            spec = spec_from_architecture(arch)
            return fam or spec.family, dict(spec.config), spec.id
        except ImportError:
            mt = str(arch.get("model_type", "")).lower()
            fam = fam or {"bert": "encoder", "roberta": "encoder", "vit": "vit"}.get(mt, "decoder")
            return fam, arch, "architecture"
    if not model:
        raise ScenarioError("model", "give 'model' (a catalog id) or 'architecture'")
    try:
        from .catalog import get_model
    except ImportError as exc:
        raise UnavailableError("the model catalog is not available; pass 'architecture'") from exc
    spec = get_model(model)
    return spec.family, dict(spec.config), spec.id


def _fit_family(family: str, config: dict, model_id: str) -> tuple[str, dict]:
    import re
    if family in ("decoder", "encoder", "vit", "unet"):
        return family, config
    if family == "cnn":
        if config.get("depths") or (isinstance(config.get("layers"), (list, tuple))):
            return family, config
        depth = config.get("depth")
        if depth is None:
            m = re.search(r"resnet-?(\d+)", model_id.lower())
            depth = int(m.group(1)) if m else None
        if depth in _RESNET_DEPTHS:
            d, blk = _RESNET_DEPTHS[int(depth)]
            return family, {**config, "depths": d, "layer_type": blk}
    raise ScenarioError("model", f"trace cannot build '{model_id}' (family '{family}'); it builds "
                                 f"these families: decoder (Llama/Mistral/Qwen2/GPT-2/OPT style), "
                                 f"encoder (BERT style), vit, cnn (ResNet), unet")


def _scenario_obj(scenario):
    if isinstance(scenario, dict):
        try:
            from .scenario import Scenario
        except ImportError:
            return scenario
        return Scenario.from_dict(scenario)
    return scenario


def _gpu_of(scenario):
    gid = scenario.get("gpu") if isinstance(scenario, dict) else getattr(scenario, "gpu", None)
    if not gid:
        return None
    try:
        from .hardware import get_gpu
    except ImportError:
        return None
    return get_gpu(gid)


def trace(scenario, mode: str = "fake", kernels: str = "cuda", *, steps: int = 2,
          timeline: bool = True, spec=None) -> TraceResult:
    """Trace a scenario (dict or Scenario). `spec`: (family, config) to skip the catalog."""
    _torch()
    scenario = _scenario_obj(scenario)
    if spec is not None:
        family, config = spec if isinstance(spec, tuple) else (spec.family, dict(spec.config))
        model_id = getattr(spec, "id", family)
    else:
        family, config, model_id = resolve_model(scenario)
    family, config = _fit_family(family, config, model_id)
    par = scenario.get("parallel") if isinstance(scenario, dict) else getattr(scenario, "parallel", None)
    from .tracing.runner import job_for, run_job
    build = job_for(scenario, family, config)
    notes = []
    if par:
        from .parallel import layout_of
        lay = layout_of(par)
        group = lay.data
        if lay.tensor > 1 or lay.pipeline > 1 or lay.context > 1 or (group > 1 and lay.zero >= 1):
            from .tracing import sharded
            sharded.check_plan(lay.zero, group, lay.tensor, lay.pipeline, lay.context)
        if group > 1 and lay.zero >= 2:
            return _trace_sharded(scenario, build, lay.zero, group, mode, kernels, steps, timeline)
        if lay.gpus > 1:
            notes.append("parallel plan without ZeRO sharding: every rank holds this full replica "
                         "(DDP gradient buckets not modelled)")
    counted = run_job(build, mode, kernels, steps, timeline)
    counted.notes.extend(notes)
    return _result(counted, mode, kernels, scenario, _gpu_of(scenario))


def _trace_sharded(scenario, build, zero, world, mode, kernels, steps, timeline) -> TraceResult:
    """Rank 0 of a ZeRO-2/3 data-parallel plan: FSDP2 on a fake process group (tracing/sharded.py)."""
    from .tracing import sharded
    from .tracing.runner import run_job
    with sharded.fake_process_group(world) as mesh:
        def sharded_build():
            job = build()
            job.model = sharded.shard_model(job.model, zero, mesh)
            return job
        sharded_build.precision = build.precision
        counted = run_job(sharded_build, mode, kernels, steps, timeline,
                          instrument=sharded.instrument)
    counted.notes.append(f"rank 0 of {world}: ZeRO-{zero} as FSDP2 fully_shard per block + root "
                         "on a fake process group (collectives allocate their outputs, move no "
                         "data; NCCL buffers not counted)")
    return _result(counted, mode, kernels, scenario, _gpu_of(scenario))


def trace_module(module, example_inputs, loss_fn=None, targets=(), *, task=None,
                 precision="fp32", optimizer="adamw", mode="fake", kernels="cuda", steps=2,
                 timeline=True) -> TraceResult:
    """Trace any module: two steps of `loss_fn(module(*example_inputs), *targets)` + backward +
    optimizer (or forward only without loss_fn). `module` may be a factory (fastest in fake mode)."""
    _torch()
    from .tracing.runner import module_job, run_job
    counted = run_job(module_job(module, example_inputs, loss_fn, targets, task=task,
                                 precision=precision, optimizer=optimizer), mode, kernels, steps,
                      timeline)
    return _result(counted, mode, kernels)


def buildable_families() -> tuple[str, ...]:
    return FAMILIES
