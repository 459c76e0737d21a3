"""Per-rank peaks of a sharded plan under torch.distributed (run with torchrun).

    torchrun --nproc-per-node 8 -m vramplan.measure.live.distributed --scenario plan.json --out results/

Each rank builds the scenario's model (as `vramplan trace` does: measure/buildable.py and
tracing/jobs.py), shards it as the scenario's `parallel` block says (zero 3: FSDP2 `fully_shard`
per block + root, parameters resharded after forward; zero 2: the same without resharding after
forward; zero 0/1: a full replica per rank; DDP's gradient buckets are not modelled), runs two
steps and writes rank<N>.json: its MemoryReport (`vramplan.result`) with a "rank" section (rank,
world_size, zero, backend, peak_phase). On CUDA the peaks are `torch.cuda.max_memory_allocated /
reserved` (source "measure"); on CPU (gloo, the tests) the live-tensor counter's (source
"trace"). Tensor parallelism is not wrapped yet: a plan with tensor > 1 is refused with a message.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ...errors import VramplanError
from ...result import MemoryReport
from ...vocab import ALLOCATOR_SLACK, COMPONENTS
from ..buildable import scenario_of, spec_of


def run_rank(scenario, steps: int = 2) -> MemoryReport:
    """This rank's peaks (the process group is made from torchrun's environment if needed)."""
    import torch
    import torch.distributed as dist
    from ..tracing import sharded
    from ..tracing.jobs import job_for
    from ..tracing.runner import run_job
    cuda = torch.cuda.is_available()
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    scn = scenario_of(scenario)
    zero, tp = scn.parallel.zero, scn.parallel.tensor
    if tp > 1:
        raise VramplanError("distributed measurement does not wrap tensor parallelism yet")
    build = job_for(scn, spec_of(scn))

    def sharded_build():
        job = build()
        if zero >= 2 and world > 1:
            job.model = sharded.shard_model(job.model, zero, mesh=None)  # the default group
        return job
    sharded_build.precision = build.precision
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    counted = run_job(sharded_build, mode="cuda" if cuda else "cpu", kernels="cpu",
                      steps=steps, timeline=False)
    c = counted.counter
    alloc = int(torch.cuda.max_memory_allocated()) if cuda else int(c.peak)
    reserved = int(torch.cuda.max_memory_reserved()) if cuda else None
    comps = {k: int(c.peak_cat.get(k, 0)) for k in COMPONENTS}
    if reserved is not None:
        comps[ALLOCATOR_SLACK] = reserved - alloc
    return MemoryReport(scenario=scn, gpu=None, components=comps, peak_allocated_bytes=alloc,
                        peak_reserved_bytes=reserved, device_used_bytes=None,
                        source="measure" if cuda else "trace",
                        sections={"rank": {"rank": rank, "world_size": world, "zero": zero,
                                           "backend": dist.get_backend(),
                                           "peak_phase": c.peak_phase}})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vramplan.measure.live.distributed")
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=2)
    a = ap.parse_args(argv)
    import torch.distributed as dist
    try:
        r = run_rank(json.loads(Path(a.scenario).read_text()), a.steps).to_dict()
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / f"rank{r['rank']['rank']}.json").write_text(json.dumps(r))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
