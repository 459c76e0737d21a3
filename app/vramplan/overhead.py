"""From live tensors to what the GPU shows: allocator rounding and slack, then the runtime's
memory outside the allocator (CUDA context, NCCL: `vramplan.runtime`).

reserved  = allocated + allocator_slack      (torch.cuda.max_memory_reserved)
device    = reserved + cuda_context + other non-torch memory (NCCL, CUDA graphs, paged states)
Workloads with allocator 'driver' (no caching allocator) have reserved == allocated.
"""
from __future__ import annotations

from .catalog import stacks
from .parallel import layout_of
from .runtime import cuda_context_bytes, legacy_stack, nccl_bytes  # noqa: F401
from .vec import is_array, to_int, vmax, where

MiB, GiB = 2**20, 2**30
_SMALL = 1 * MiB          # requests <= 1 MiB come from 2 MiB segments (small pool)
_MIN_LARGE = 10 * MiB     # 1-10 MiB requests come from 20 MiB segments
_ROUND_LARGE = 2 * MiB    # larger requests: segments rounded up to 2 MiB
# Fragmentation: activation and loss buffers are freed in backward order while gradients and
# autograd temporaries of other sizes are carved from the same segments; the caching allocator
# neither merges non-adjacent free blocks nor compacts, so part of the transient pool stays split.
# 0.2 of the transient bytes is the reserved-minus-allocated gap of the published training runs:
# HF BERT V100 A02/A03/A07 ~0.2-0.3 and torchtune E02 (the default allocator) and torchtitan F01
# ~0.19 (torchtitan@2024-12, whose run script sets expandable_segments:True, a5e57e4a). One
# model-wide value, shared by both allocator modes: expandable segments change where blocks
# come from (pages of one growing segment), not how they are placed inside it (Note [Expandable
# Segments]: "the same best-fit heuristics"), and the runs with it keep a gap like those without.
FRAG = 0.20
# Persistent tensors (weights, states) waste on average half a 2 MiB rounding step each; ~0.5%
# of their bytes for the tensor sizes of real models (hundreds of tensors of 10-500 MiB).
PERSIST_GRAIN = 0.005
# expandable segments (pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp, read at 001074d2:
# Note [Expandable Segments] "we use 2MiB pages for our small pool and 20MiB pages for our large
# pool"; ExpandableSegment's constructor, "2MB for small pool, 20MB for large pool";
# find_expandable_block: `segment_size = pool->is_small ? kSmallBuffer : kLargeBuffer`, with
# kSmallBuffer = 2097152 and kLargeBuffer = 20971520): one segment per stream and pool grows by
# mapping pages; DeviceCachingAllocator::should_split splits a large-pool block whenever
# kMinBlockSize (512 B) or more remain when expandable segments are on (remaining > kSmallSize,
# 1 MiB, otherwise), so a block is carved at its 512-byte rounded size and no request gets a
# segment of its own (no kRoundLarge 2 MiB rounding per tensor, no half-used 20 MiB segment).
_PAGE_LARGE = 20 * MiB


def round_request(n: int) -> int:
    """PyTorch's block size for a request: multiples of 512 bytes."""
    return vmax(512, -(-to_int(n) // 512) * 512)


def segment_size(n: int) -> int:
    """Size of the cudaMalloc segment the allocator creates for a request of n bytes."""
    n = round_request(n)
    if is_array(n):     # a sweep's batch axis (vramplan.vec): the same rule per element
        return where(n <= _SMALL, 2 * MiB, where(n < _MIN_LARGE, 20 * MiB,
                                                 -(-n // _ROUND_LARGE) * _ROUND_LARGE))
    if n <= _SMALL:
        return 2 * MiB
    if n < _MIN_LARGE:
        return 20 * MiB
    return -(-n // _ROUND_LARGE) * _ROUND_LARGE


def rounding_waste(largest: int) -> int:
    """Unused bytes of the segments the largest request lands in. Up to 10 MiB that is its own
    segment's remainder (2 MiB or 20 MiB segments). From 10 MiB on, the request gets a segment
    rounded to 2 MiB, but the step's 1-10 MiB tensors (smaller layers' activations, norms,
    biases) still share 20 MiB segments, one of them partly used: half of one (10 MiB) is
    counted beside the 2 MiB rounding. Without that term reserved memory would drop by ~10 MiB
    when the largest tensor crosses 10 MiB, and more batch would seem to need less memory."""
    if is_array(largest):
        waste = segment_size(largest) - round_request(largest)
        waste = waste + where(round_request(largest) >= _MIN_LARGE, _MIN_LARGE, 0)
        return where(largest <= 0, 0, waste)
    if largest <= 0:
        return 0
    waste = segment_size(largest) - round_request(largest)
    if round_request(largest) >= _MIN_LARGE:
        waste += _MIN_LARGE
    return int(waste)


def transient_bytes(components: dict) -> int:
    """Bytes allocated and freed every step (activations, loss buffers, temporaries)."""
    persistent = {"weights", "gradients", "optimizer_states", "kv_cache"}
    return to_int(sum(v for k, v in components.items() if k not in persistent))


def page_waste(allocated) -> int:
    """Expandable segments: the unfilled part of the large pool's last 20 MiB page when the
    segment holds `allocated` bytes."""
    return to_int((-to_int(allocated)) % _PAGE_LARGE)


def expandable_segments(footprint, scenario) -> bool:
    """The allocator runs with expandable_segments:True: the scenario's option
    `expandable-segments`, or a software stack whose runs set it (torchtitan from 2024-10,
    stacks.toml; the note says so once). Both mean the same allocator and the same bytes."""
    from .workloads import stack_mechanisms as mech
    st = stacks.of(scenario) if scenario is not None else None
    if st is not None and mech.use(footprint.notes, st, "expandable-segments"):
        mech.mark_applied(getattr(footprint, "stack", None), "expandable-segments")
        return True
    return "expandable-segments" in set(getattr(scenario, "options", ()) or ())


def expandable_slack(allocated, transient) -> int:
    """reserved - allocated with expandable segments: the unfilled part of the large pool's
    last 20 MiB page (page_waste) + FRAG x the transient bytes (blocks are still placed
    best-fit and split inside the segment). No per-tensor rounding and no persistent grain:
    blocks are 512-byte rounded (should_split). The small pool's last 2 MiB page is not
    counted (at most 2 MiB)."""
    return to_int(page_waste(allocated) + FRAG * transient)


def segment_slack(largest, transient, persistent) -> int:
    """reserved - allocated with the default allocator (one cudaMalloc segment per request
    from 1 MiB on): the largest request's segment rounding (rounding_waste) + FRAG x the
    transient bytes + PERSIST_GRAIN x the persistent bytes (half a 2 MiB step per tensor)."""
    return to_int(rounding_waste(largest) + FRAG * transient + PERSIST_GRAIN * persistent)


def allocator_slack(footprint, scenario=None) -> int:
    """reserved - allocated at the peak, for PyTorch's caching allocator: expandable_slack
    when the allocator runs with expandable segments (option or stack), segment_slack
    otherwise."""
    if footprint.allocator != "torch":
        return 0
    comps = footprint.components
    transient = transient_bytes(comps)
    if expandable_segments(footprint, scenario):
        return expandable_slack(footprint.peak_allocated_bytes, transient)
    largest = footprint.largest_allocation
    largest = to_int(largest) if is_array(largest) else int(largest or 0)
    return segment_slack(largest, transient, sum(comps.values()) - transient)


def reserved_bytes(footprint, scenario=None) -> int:
    """Peak reserved: allocated + slack, or the workload's own allocation-history floor."""
    if footprint.allocator != "torch":
        return footprint.peak_allocated_bytes
    floor = footprint.reserved_floor_bytes
    return vmax(footprint.peak_allocated_bytes + allocator_slack(footprint, scenario),
                to_int(floor) if is_array(floor) else int(floor or 0))


def device_used_bytes(footprint, scenario, device, reserved: int | None = None) -> dict:
    """Figures outside the allocator. Returns {'cuda_context', 'nccl', extras..., 'total'}."""
    reserved = reserved_bytes(footprint, scenario) if reserved is None else reserved
    ctx = cuda_context_bytes(device, scenario)
    layout = layout_of(getattr(scenario, "parallel", None))
    nccl = nccl_bytes(layout, device)
    extra = dict(footprint.extra_device_bytes)
    total = reserved + ctx + nccl + sum(extra.values())
    return {"cuda_context": ctx, "nccl": nccl, **extra, "total": to_int(total)}
