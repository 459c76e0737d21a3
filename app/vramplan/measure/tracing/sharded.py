"""One rank of a ZeRO-2/3 (FSDP2) data-parallel plan, traced in this process on a fake process group.

`torch.distributed.init_process_group(backend="fake", store=FakeStore(), rank=0, world_size=N)`
gives a process group whose collectives are no-ops: an all-gather allocates its output and returns
without filling it, a reduce-scatter likewise. That is all memory needs: rank 0 allocates exactly
what it would on a real N-rank job. FSDP2 `fully_shard` (per decoder block, then the root) runs on
it under `FakeTensorMode` on device 'cpu' (or with real CPU tensors, `mode='cpu'`: same bytes).

Two things the plain counter cannot see, fixed here per FSDP parameter group (instance attributes
on our own groups, nothing global is patched):
* FSDP2 frees and re-allocates the unsharded parameters by resizing their storages
  (`storage.resize_(0)` / back), which no dispatched op reports: after `wait_for_unshard` and
  `reshard` the all-gather outputs are re-measured and labelled `weights` (the unsharded working
  set of the gathered blocks).
* Buffers allocated inside `unshard` / `wait_for_unshard` / `post_backward` (all-gather input
  and output, reduce-scatter input and output) are labelled `temporary`, not `activations`.
* Sharded gradients are assigned by the reduce-scatter (`sharded_param.grad = ...`), not
  accumulated, so no post-accumulate-grad hook fires: after `post_backward` they are labelled
  `gradients`.
The DeviceMesh is built before the fake mode (its constructor reads tensor values).
"""
from __future__ import annotations

import contextlib

from ...errors import ScenarioError


def check_plan(zero: int, data: int, tensor: int = 1, pipeline: int = 1, context: int = 1) -> None:
    if context > 1:
        raise ScenarioError("parallel", "trace does not run context parallelism: torch's ring "
                                        "attention (context_parallel) dispatches the CUDA flash / "
                                        "efficient SDPA kernels only, which a CPU trace cannot "
                                        "call; trace context=1, or use the analytic estimate "
                                        "(docs/tracing.md)")
    if zero == 1 and data > 1:
        raise ScenarioError("parallel", "trace does not model ZeRO-1 (optimizer-state sharding "
                                        "only) yet; use zero 2 or 3, or the analytic estimate")


@contextlib.contextmanager
def fake_process_group(world: int, shape: tuple | None = None, names: tuple | None = None):
    """A fake-backend default process group (rank 0 of `world`) and a CPU DeviceMesh of
    `shape` (default 1-D, `names` its dimension names); destroyed on exit, so repeated traces
    work. Refuses when a group already exists."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if not dist.is_available():
        raise ScenarioError("parallel", "this torch build has no torch.distributed")
    if dist.is_initialized():
        raise ScenarioError("parallel", "a torch.distributed process group is already "
                                        "initialised; trace a sharded plan in a fresh process")
    dist.init_process_group(backend="fake", store=FakeStore(), rank=0, world_size=world)
    try:
        yield init_device_mesh("cpu", shape or (world,), mesh_dim_names=names)
    finally:
        dist.destroy_process_group()


def shard_model(model, zero: int, mesh):
    """FSDP2 per block (a numbered child of a `layers`/`blocks`/`layer`/`h` list) and the root;
    zero 3 reshards after forward, zero 2 keeps the parameters gathered until backward."""
    from torch.distributed.fsdp import fully_shard
    blocks = [m for n, m in model.named_modules()
              if "." in n and n.split(".")[-1].isdigit() and n.split(".")[-2] in ("layers", "layer", "h", "blocks")]
    for b in blocks:
        fully_shard(b, mesh=mesh, reshard_after_forward=zero >= 3)
    fully_shard(model, mesh=mesh, reshard_after_forward=zero >= 3)
    return model


def instrument(model, counter, owner) -> None:
    """Re-measure FSDP2's resized storages and label sharded grads (see the module docstring)."""
    from torch.distributed.fsdp import fully_shard
    for m in model.modules():
        try:
            state = fully_shard.state(m)
        except Exception:
            continue
        if state is None:
            continue
        for pg in getattr(state, "_fsdp_param_groups", None) or []:
            _wrap_group(pg, counter, owner)


def _wrap_group(pg, counter, owner):
    def remeasure():
        for fp in pg.fsdp_params:
            g = owner.get(fp.sharded_param)
            for t in list(fp.all_gather_outputs) + list(getattr(fp, "_unsharded_inner_tensors", []) or []):
                counter.track(t, "weights", g)

    def label_grads():
        for fp in pg.fsdp_params:
            gr = fp.sharded_param.grad
            if gr is not None:
                counter.track(gr, "gradients", owner.get(fp.sharded_param))

    def after(fn, *then):
        def wrapped(*a, **k):
            counter.comm += 1     # collective buffers are 'temporary', not activations
            try:
                out = fn(*a, **k)
            finally:
                counter.comm -= 1
            for t in then:
                t()
            return out
        return wrapped
    pg.unshard = after(pg.unshard)
    pg.wait_for_unshard = after(pg.wait_for_unshard, remeasure)
    pg.reshard = after(pg.reshard, remeasure)
    pg.post_backward = after(pg.post_backward, remeasure, label_grads)
