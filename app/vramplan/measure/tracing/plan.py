"""One rank of a tensor / pipeline / FSDP (2-D) plan, traced in this process.

`run_plan(build, layout, ...)` wraps the job a scenario builds (jobs.job_for) for rank 0 of
its layout and runs it with the runner:
* pipeline > 1: stage `stage`'s slice and its 1F1B schedule (pipeline.py); no process group is
  needed for the stage itself (its neighbours are emulated);
* tensor > 1: DTensor `parallelize_module` over a `tensor`-rank mesh (tensor_parallel.py),
  sequence parallel with the scenario option `sequence-parallel`, loss parallel with
  `loss-parallel` (the loss and its backward inside `loss_parallel()`);
* data > 1 with ZeRO 2/3: FSDP2 over the data dimension (sharded.py); with tensor > 1 a 2-D
  DeviceMesh ("dp", "tp"), TP first then `fully_shard` on the "dp" mesh (torchtitan's order).
The fake process group covers the ranks the traced rank talks to (dp x tp); pipeline peers and
data-parallel replicas without ZeRO need none.

torch is imported when this module is imported: import it lazily (measure/trace.py does).
"""
from __future__ import annotations

import contextlib

from . import pipeline as P
from . import sharded
from . import tensor_parallel as TP
from . import transformer as T


def _fake_group(lay, tp: int, fsdp: bool):
    """The fake process group (dp, tp or dp x tp mesh) the traced rank runs in."""
    if fsdp and tp > 1:
        return sharded.fake_process_group(lay.data * tp, (lay.data, tp), ("dp", "tp"))
    elif tp > 1:
        return sharded.fake_process_group(tp, (tp,), ("tp",))
    elif fsdp:
        return sharded.fake_process_group(lay.data, (lay.data,), ("dp",))
    return contextlib.nullcontext()


def _plan_notes(lay, stage: int, micro_batches: int, sp: bool, lp: bool, fsdp: bool,
                style: str) -> list[str]:
    """What the trace emulated: the pipeline schedule, tensor parallel plan, FSDP."""
    tp, pp = lay.tensor, lay.pipeline
    notes = []
    v = getattr(lay, "virtual_stages", 1)
    if pp > 1 and v > 1:
        notes.append(f"pipeline stage {stage} of {pp}: interleaved 1F1B, {v} chunks, "
                     f"{micro_batches} micro-batches, neighbours emulated")
    elif pp > 1:
        notes.append(f"pipeline stage {stage} of {pp}: 1F1B with {micro_batches} micro-batches "
                     f"({min(pp - stage, micro_batches)} in flight), neighbours emulated "
                     "(received activations and gradients as fresh tensors, the sent output's "
                     "data freed as Megatron does)")
    if tp > 1:
        notes.append(f"rank 0 of tensor parallel {tp}: DTensor parallelize_module (torchtitan "
                     "plan)" + (f", sequence parallel ({style} style)" if sp else "")
                     + (", loss parallel" if lp else "") + " on a fake process group")
    if fsdp:
        notes.append(f"ZeRO-{lay.zero} as FSDP2 fully_shard per block + root over {lay.data} "
                     "data-parallel ranks" + (" (2-D mesh dp x tp)" if tp > 1 else ""))
    return notes


def run_plan(build, lay, options=(), micro_batches=1, mode="fake", kernels="cuda", steps=2,
             timeline=True, on_step=None, stage=0, style="megatron"):
    """Rank 0 (of pipeline stage `stage`) of layout `lay` (a parallel.ParallelConfig)."""
    from .runner import run_job
    tp, pp = lay.tensor, lay.pipeline
    fsdp = lay.data > 1 and lay.zero >= 2
    opts = set(options or ())
    sp = tp > 1 and "sequence-parallel" in opts
    lp = tp > 1 and "loss-parallel" in opts
    v = getattr(lay, "virtual_stages", 1)
    if v > 1 and (tp > 1 or fsdp):
        from ...errors import ScenarioError
        raise ScenarioError("parallel.virtual_stages", "the tracer runs the interleaved "
                            "schedule without tensor parallelism or FSDP only")
    group = _fake_group(lay, tp, fsdp)
    with group as mesh:
        def plan_build():
            job = build()
            model = job.model
            if not isinstance(model, T.CausalLM) and (tp > 1 or pp > 1):
                from ...errors import ScenarioError
                raise ScenarioError("parallel", "trace of tensor / pipeline parallel builds "
                                                "decoder language models (train) only")
            if tp > 1:
                TP.check(model.model.a, tp, sp)
            if pp > 1:
                model = (P.Chunks(model, stage, pp, v) if v > 1
                         else P.Stage(model, stage, pp))
                job.loss_fn = P.stage_loss(model)
            if tp > 1:
                TP.parallelize(model, mesh["tp"], sp, lp, style)
            if fsdp:   # FSDP2 over TP builds a dp x tp mesh, whose constructor makes a real
                # index tensor: outside the fake mode (the fake parameters stay fake)
                from torch._subclasses.fake_tensor import unset_fake_temporarily
                with unset_fake_temporarily() if tp > 1 else contextlib.nullcontext():
                    model = sharded.shard_model(model, lay.zero, mesh["dp"])
            job.model = model
            if pp > 1:
                ids = job.inputs[0]
                b, s = ids.shape
                shape = (b, s // (tp if sp else 1), model.hidden)
                dtype = next(model.parameters()).dtype
                m = micro_batches
                sched = P.interleaved_1f1b if v > 1 else P.one_f_one_b
                job.schedule = lambda step_mod, inputs, counter, amp: sched(
                    step_mod, inputs[0], counter, amp, model, pp, stage, m, shape,
                    dtype, (lambda: TP.loss_context(lp)))
            elif lp:
                job.schedule = _loss_parallel_loop(job.micro_batches)
            return job
        plan_build.precision = build.precision
        counted = run_job(plan_build, mode, kernels, steps, timeline, on_step=on_step,
                          instrument=sharded.instrument if fsdp else None)
    counted.notes.extend(_plan_notes(lay, stage, micro_batches, sp, lp, fsdp, style))
    return counted



def _loss_parallel_loop(micro_batches):
    """The runner's micro-batch loop with the loss and its backward inside loss_parallel()."""
    def loop(step_mod, inputs, counter, amp):
        for _ in range(micro_batches):
            counter.phase = "forward"
            with amp(), TP.loss_context(True):
                loss = step_mod(*inputs)
            counter.phase = "backward"
            with TP.loss_context(True):
                loss.backward()
            del loss
    return loop
