"""Per-rank peaks of a sharded plan under torch.distributed (run with torchrun).

    torchrun --nproc-per-node 8 -m vramplan.live.distributed --scenario plan.json --out results/

Each rank builds the scenario's model (as `vramplan trace` does), shards it as the scenario's
`parallel` block says (zero 3: FSDP2 `fully_shard` per block + root, parameters resharded after
forward; zero 2: the same without resharding after forward; zero 0/1: a full replica per rank;
DDP's gradient buckets are not modelled), runs two steps and writes rank<N>.json with its peak. On CUDA the peak is
`torch.cuda.max_memory_allocated`; on CPU (gloo, the tests) it is the live-tensor counter's.
Tensor parallelism is not wrapped yet: a plan with tensor > 1 is refused with a message.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ..errors import VramplanError


def _shard(model, zero: int):
    from torch.distributed.fsdp import fully_shard
    blocks = [m for n, m in model.named_modules() if n.count(".") == 2 and n.split(".")[-2] == "layers"]
    for b in blocks:
        fully_shard(b, reshard_after_forward=zero >= 3)
    fully_shard(model, reshard_after_forward=zero >= 3)
    return model


def run_rank(scenario: dict, steps: int = 2) -> dict:
    import torch
    import torch.distributed as dist
    from .. import trace
    from ..tracing import runner
    cuda = torch.cuda.is_available()
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    scn = trace._scenario_obj(scenario)
    par = scenario.get("parallel", {}) or {}
    zero, tp = int(par.get("zero", 0)), int(par.get("tensor", 1))
    if tp > 1:
        raise VramplanError("distributed measurement does not wrap tensor parallelism yet")
    family, config, mid = trace.resolve_model(scn)
    family, config = trace._fit_family(family, config, mid)
    build = runner.job_for(scn, family, config)

    def sharded_build():
        job = build()
        if zero >= 2 and world > 1:
            job.model = _shard(job.model, zero)
        return job
    sharded_build.precision = build.precision
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    counted = runner.run_job(sharded_build, mode="cuda" if cuda else "cpu", kernels="cpu",
                             steps=steps, timeline=False)
    out = {"rank": rank, "world_size": world, "zero": zero,
           "peak_allocated_bytes": int(torch.cuda.max_memory_allocated() if cuda else counted.counter.peak),
           "peak_reserved_bytes": int(torch.cuda.max_memory_reserved()) if cuda else None,
           "components": dict(counted.counter.peak_cat), "peak_phase": counted.counter.peak_phase,
           "backend": dist.get_backend()}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vramplan.live.distributed")
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=2)
    a = ap.parse_args(argv)
    import torch.distributed as dist
    try:
        r = run_rank(json.loads(Path(a.scenario).read_text()), a.steps)
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / f"rank{r['rank']}.json").write_text(json.dumps(r))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
