"""The sweep's batch axis in one footprint call (vramplan.vec): a footprint called with
batch_size an int64 array gives, element by element, exactly what the scalar call gives
(components, largest allocation, peak phase, reserved and device-used bytes), for every family
and task of the golden table; a footprint that cannot take the array refuses it loudly (an
exception, never a wrong number), and the plans the sweep is meant to vectorise do take it."""
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vramplan import overhead, vec
from vramplan.errors import ScenarioError
from vramplan.hardware import get_gpu, traits_of
from vramplan.scenario import Scenario
from vramplan.sweep.engine import spec_of
from vramplan.sweep.grid import with_batch
from vramplan.workloads.dispatch import footprint

GOLDEN = Path(__file__).parent / "golden" / "estimates.jsonl"
ROWS = [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]
NOT_ARRAY = (TypeError, ValueError, IndexError, AttributeError)   # what the sweep falls back on


def _family(sc, spec) -> str:
    return getattr(spec, "family", None) or sc.task


def _plan(row):
    sc = Scenario.from_dict(row["input"])
    return sc, spec_of(sc), traits_of(get_gpu(row["gpu"]))


def _elem(x, j):
    return x[j] if vec.is_array(x) else x


def check(sc, spec, tr, batches) -> str:
    """'vector' when the array call equals the scalar calls element by element, 'refused' when
    it raises (the sweep then calls once per batch value), 'skip' when a batch value changes
    more than the batch field (the sweep's BatchVariants never vectorises those). A branch
    that differs between the values (vec.Divergent) is split in halves as the sweep splits
    it (a single value: 'refused', the scalar call)."""
    scalars = []
    for b in batches:
        try:
            one = sc.replace(batch_size=int(b))
        except ScenarioError:
            return "skip"
        if one != with_batch(sc, int(b)):
            return "skip"
        try:
            scalars.append(footprint(one, spec, tr))
        except ScenarioError:
            return "skip"
    arr = np.asarray(batches, dtype=np.int64)
    try:
        fa = footprint(with_batch(sc, arr), spec, tr)
        ra = overhead.reserved_bytes(fa, sc)
        ua = overhead.device_used_bytes(fa, sc, tr)["total"]
    except vec.Divergent:
        if len(batches) < 2:
            return "refused"
        mid = len(batches) // 2
        got = {check(sc, spec, tr, batches[:mid]), check(sc, spec, tr, batches[mid:])}
        return "vector" if "vector" in got else "refused"   # a part went as one array
    except NOT_ARRAY:
        return "refused"
    for j, (b, fs) in enumerate(zip(batches, scalars)):
        where = (sc.to_dict(), b)
        for k, v in fs.components.items():
            assert int(_elem(fa.components[k], j)) == v, (where, k)
        for k in set(fa.components) - set(fs.components):
            assert int(_elem(fa.components[k], j)) == 0, (where, k)
        assert int(_elem(fa.peak_allocated_bytes, j)) == fs.peak_allocated_bytes, where
        assert int(_elem(fa.largest_allocation, j)) == int(fs.largest_allocation), where
        assert _elem(fa.peak_phase, j) == fs.peak_phase, where
        assert int(_elem(ra, j)) == overhead.reserved_bytes(fs, sc), where
        assert int(_elem(ua, j)) == overhead.device_used_bytes(fs, sc, tr)["total"], where
    return "vector"


# (family, task) -> plans of the golden table the array call must take in one go (the rest of
# that kind fall back: pipeline stages, serving pools, ...); the sweep's module doc lists them
MUST = {(f, t) for f in ("decoder", "encoder", "encoder-decoder")
        for t in ("train", "lora", "qlora")} | \
    {(f, t) for f in ("cnn", "vit", "unet", "detection", "segmentation")
     for t in ("train", "forward", "load")} | \
    {("diffusion", t) for t in ("denoise", "forward", "load")}


def _one_by_one(sc, spec) -> bool:
    """What the sweep's module doc lists as evaluated one batch value at a time among MUST:
    pipeline stages, and video pipelines' 3-D VAE."""
    return sc.parallel.pipeline > 1 or bool((getattr(spec, "config", None) or {}).get("video"))


def test_every_golden_plan_equals_its_scalar_calls_or_refuses_the_array():
    seen: Counter = Counter()
    for row in ROWS:
        sc, spec, tr = _plan(row)
        b0 = int(sc.batch_size or 1)
        got = check(sc, spec, tr, sorted({1, 2, 3, b0, b0 + 1, 2 * b0 + 3, 4 * b0 + 9}))
        kind = (_family(sc, spec), sc.task)
        seen[kind + (got,)] += 1
        if kind in MUST and got == "refused":
            assert _one_by_one(sc, spec), (row["id"], "refused the array")
    for kind in MUST:
        assert seen[kind + ("vector",)] > 0, (kind, seen)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=st.sampled_from(ROWS),
       batches=st.lists(st.integers(1, 300), min_size=2, max_size=6, unique=True))
def test_array_call_equals_scalar_calls_per_element(row, batches):
    sc, spec, tr = _plan(row)
    check(sc, spec, tr, sorted(batches))


def test_vec_helpers_are_the_builtins_on_numbers():
    assert vec.vmax(3, 7.5, 2) == 7.5 and isinstance(vec.vmax(3, 2), int)
    assert vec.vmin(3, 7.5) == 3 and vec.to_int(7.9) == 7 and vec.to_int(-7.9) == -7
    assert vec.where(0, "a", "b") == "b" and vec.int_or(None, 1) == 1
    assert vec.peak({"f": {"a": 1, "b": 2}, "g": {"a": 3}}) == ("f", {"a": 1, "b": 2})
    a = np.array([1, 5, 3])
    assert vec.vmax(a, 2, np.array([0, 0, 4])).tolist() == [2, 5, 4]
    assert vec.to_int(np.array([7.9, -7.9])).tolist() == [7, -7]
    names, comps = vec.peak({"f": {"x": a, "y": 2}, "g": {"x": 4}})
    assert names.tolist() == ["g", "f", "f"]      # 4 > 3, 7 > 4, 5 > 4 (ties: the first)
    assert comps["x"].tolist() == [4, 5, 3] and comps["y"].tolist() == [0, 2, 2]
    assert vec.truth(np.array([2, 3])) is True
    with pytest.raises(vec.Divergent):
        vec.truth(np.array([0, 3]))


def test_point_holds_is_the_advisors_fit_on_every_gpu():
    """Point.holds, the one rule advisor.explore.gpu_table and sweep.gpus_needed read, on
    six GPUs under a 100-byte limit: the first holds (used 100 <= 100), then
    101 > 100; an error; a serving engine that does not start; a pool holding no request;
    and the last, batch capacity -1 (none), holds."""
    from vramplan.sweep.engine import Point
    pt = Point(6)
    pt.used[:] = [100, 101, 50, 50, 50, 50]
    pt.errors[2] = "refused"
    pt.starts[3] = False
    pt.capacity[:] = [4, 4, 4, 4, 0, -1]
    assert pt.holds(100).tolist() == [True, False, False, False, False, True]
    assert pt.holds(np.array([99, 101, 100, 100, 100, 49])).tolist() == [False, True] + [False] * 4
