"""3-D volumes (task "volume"): voxel grids (e.g. a 512^3 MRI) with channels and a dtype, the
copies a pipeline keeps, FFT / solver work buffers, and 3-D CNN training on patches.

Memory = batch_size x copies x d x h x w x channels x dtype bytes (copies: e.g. input, working,
output = 3; add gradients for an optimisation-based reconstruction), plus work buffers of
`work_buffers` over one volume (see workloads/array.py). With a `model` (a 3-D U-Net of the
vision catalog's 'unet' family) and a `patch` [d, h, w], the network's training footprint on
patches of that size is delegated to the vision workload and added to the resident volume.
"""
from __future__ import annotations

from ...scenario.extra import ARRAY_DTYPES
from ...units import counted
from ..array.footprint import work_buffer_bytes
from ...vec import int_or, scalar, shown, to_int
from ..base import Footprint, extra_of
from .family import DEFAULT_RESOLUTION



def volume_bytes(res, channels: int, dtype: str) -> int:
    d, h, w = (res if len(res) == 3 else (1, *res))
    return d * h * w * channels * ARRAY_DTYPES[dtype]


def footprint(scenario, spec, device, network=None) -> Footprint:
    """`network(scenario, spec, device)`: the footprint of the 3-D network trained on patches
    when the plan names one (the dispatcher passes its own footprint function)."""
    ex = extra_of(scenario, "volume")
    res = tuple(scenario.resolution or DEFAULT_RESOLUTION)
    one = volume_bytes(res, ex["channels"], ex["dtype"])
    b = int_or(scenario.batch_size, 1)     # an int64 array in a sweep (vramplan.vec)
    comps = {"volumes": to_int(one * ex["copies"] * b)}
    shape = list(res if len(res) == 3 else (1, *res)) + [ex["channels"]]
    comps.update(work_buffer_bytes(ex["work_buffers"], shape, ex["dtype"]))
    notes = [f"{'x'.join(map(str, res))} voxels x {ex['channels']} ch {ex['dtype']} = "
             f"{one:,} B per volume; {counted(ex['copies'], 'copy', 'copies')} x batch {shown(b)}"]
    phase = "compute"
    if spec is not None and ex.get("patch"):
        scalar(b, "a 3-D network on patches")   # the except below would hide numpy's refusal
        try:
            sc2 = scenario.replace(task="train", resolution=list(ex["patch"]))
            net = network(sc2, spec, device) if network is not None else None
        except Exception as exc:  # the network part is optional; say why it is missing
            net = None
            notes.append(f"3-D network on patches not estimated: {exc}")
        if net is not None:
            for k, v in net.components.items():
                comps[k] = comps.get(k, 0) + v
            phase = net.peak_phase
            notes.append(f"plus {spec.id} training on {ex['patch']} patches "
                         f"(vision workload)")
    total = sum(comps.values())
    data = one * ex["copies"] * b
    bw = {"bytes_per_pass": to_int(2 * data),
          "rule_of_thumb": {"memory_bytes": to_int(1.5 * one * b), "rule": "dataset x 1.5",
                            "explicit_bytes": to_int(total),
                            "why_different": "the rule assumes half a volume of intermediates; "
                                             "a pipeline keeping input, working and output "
                                             "copies needs 3x, and FFT/solver buffers more"}}
    return Footprint(components=comps, peak_phase=phase, largest_allocation=int(one),
                     allocator="torch" if phase != "compute" else "driver", bandwidth=bw,
                     notes=notes)
