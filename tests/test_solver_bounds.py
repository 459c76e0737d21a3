"""The cluster solver's memory bounds (advisor/cluster_parts.py Bounds) and its scenario fast
path (issue 20.3: a 70B job on up to 1024 GPUs in <= 2 s; the speed itself is measured in
benchmarks/cluster_solver.py).

A stage shape's floor (micro-batch 1, full recomputation) holds the least memory of the
shape: 1F1B keeps min(p, n / m) micro-batches of m sequences in flight on stage 0, that is
min(m p, n) sequences for n sequences per data rank, which does not fall as m grows (p 4,
n 8: m 1 -> 4, m 2 -> 8, m 4 -> 8, m 8 -> 8); full recomputation keeps less than selective,
selective less than none. The solver estimates the floor first and rules the whole shape out
when the floor is over the limit."""
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from vramplan.advisor.cluster import Job, Layout, Solver
from vramplan.advisor.cluster_parts import Bounds
from vramplan.estimate import estimate

H100 = "nvidia-h100-sxm5-80gb"
GiB = 2**30


def _used(s, lay):
    return estimate(s.scenario(lay), s.dev, with_max_batch=False).device_used_bytes


def test_bounds_by_hand():
    b = Bounds()
    floor = Layout(2, 8, 4, 1, 1, 1, "full", 1, 64)       # n = 64 sequences per data rank
    b.record(floor, 10 * GiB)
    none2 = Layout(2, 8, 4, 1, 1, 1, "none", 2, 32)        # same shape: min(4, 64) = 4
    assert b.floor_rest(none2) == 10 * GiB
    assert b.lower(none2) == 10 * GiB                     # micro 1 <= 2, full >= none
    b.record(replace(none2, checkpointing="selective"), 30 * GiB)
    assert b.lower(none2) == 30 * GiB                     # the larger of two bounds
    assert b.lower(replace(none2, checkpointing="full")) == 10 * GiB   # selective > full
    assert b.lower(replace(none2, micro=1, accumulation=64)) == 10 * GiB  # micro 2 > 1
    assert b.lower(replace(none2, zero=3)) is None        # another ZeRO stage: no bound
    assert b.lower(replace(none2, data=4, accumulation=16)) == 30 * GiB  # any data degree
    inter = replace(none2, virtual=2)                      # interleaved: 1F1B's bounds it
    assert b.lower(inter) == 30 * GiB and b.floor_rest(inter) == 10 * GiB
    assert b.lower(replace(floor, virtual=2)) == 10 * GiB
    b.record(replace(floor, virtual=2), 12 * GiB)
    assert b.floor_rest(inter) == 12 * GiB
    assert b.floor_rest(floor) == 10 * GiB                # interleaved does not bound 1F1B


def test_a_floor_over_the_limit_rules_out_its_shape():
    # Llama-3.1-70B on 16 H100 with TP 8 x PP 2, no ZeRO: model states alone are
    # 70.55e9 x (4 + 4 + 8) B / 16 = 65.7 GiB a rank (fp32 weights, gradients, Adam moments),
    # under the limit 79.6 GiB x 0.95 = 75.7 GiB; the floor at seq 8192 adds activations,
    # buffers and workspace past it (the estimate: ~89 GiB at the worst stage).
    s = Solver(Job("meta-llama/Llama-3.1-70B", 8192, 64, H100, max_gpus=1024))
    lay = Layout(1, 8, 2, 1, 1, 0, "none", 2, 32)
    opt = s.price(lay)
    assert s.check(opt) is False
    floor = Bounds.floor(lay)
    assert floor in s._done and lay not in s._done         # the floor, not the layout
    assert s.states_bound(lay) / GiB < s.limit / GiB < 75.7
    assert s.estimates == 1 and s.group_over(lay)
    for other in (replace(lay, checkpointing="selective", micro=4, accumulation=16),
                  replace(lay, micro=1, accumulation=64)):
        assert s.check(s.price(other)) is False
    assert s.estimates == 1                                # no estimate for the others


@settings(max_examples=12, deadline=None)
@given(p=st.sampled_from([1, 2, 4]), t=st.sampled_from([1, 2]), z=st.sampled_from([1, 3]),
       m=st.sampled_from([2, 4]), ck=st.sampled_from(["none", "selective"]))
def test_the_floor_and_smaller_layouts_bound_a_shape(p, t, z, m, ck):
    """What Bounds assumes, by the estimate itself: in one stage shape (same data degree),
    the floor <= a smaller micro-batch or more recomputation <= the layout."""
    s = Solver(Job("meta-llama/Llama-3.2-1B", 2048, 16, H100, max_gpus=64))
    lay = Layout(2, t, p, 1, 1, z, ck, m, 8 // m)
    used = _used(s, lay)
    assert _used(s, Bounds.floor(lay)) <= used
    assert _used(s, replace(lay, micro=m // 2, accumulation=16 // m)) <= used
    assert _used(s, replace(lay, checkpointing="full")) <= used


def test_fast_scenarios_are_the_pass_scenarios():
    """The solver's scenarios from a floor's with the micro-batch, accumulation and
    checkpointing changed alone equal the scenario pass's, layout by layout."""
    s = Solver(Job("meta-llama/Llama-3.1-70B", 8192, 64, H100, max_gpus=1024))
    for lay in (Layout(2, 8, 4, 1, 1, 1, ck, m, 32 // m, v) for ck in ("none", "selective",
                                                                         "full")
                for m in (1, 2, 8) for v in (1, 2) if v == 1 or (32 // m) % 4 == 0):
        assert s._scenario(lay) == s.scenario(lay), lay
    assert s._same == {"none": True, "selective": True, "full": True}
