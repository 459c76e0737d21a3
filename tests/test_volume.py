from hypothesis import given, settings, strategies as st

from vramplan.scenario import Scenario
from vramplan.workloads.dispatch import footprint


def fp(**kw):
    sc = Scenario.from_dict({"task": "volume", **kw})
    return footprint(sc, sc.spec, None)


def test_512_mri():
    f = fp(resolution=[512, 512, 512], channels=1, dtype="float32", copies=3)
    assert f.components["volumes"] == 3 * 512**3 * 4
    assert f.bandwidth["rule_of_thumb"]["memory_bytes"] == int(1.5 * 512**3 * 4)


@settings(max_examples=20, deadline=None)
@given(st.integers(8, 256), st.integers(1, 8), st.integers(1, 4))
def test_grows_with_size_channels_batch(n, c, b):
    base = fp(resolution=[n, n, n], channels=c, batch_size=b).peak_allocated_bytes
    assert fp(resolution=[n + 1, n, n], channels=c, batch_size=b).peak_allocated_bytes > base
    assert fp(resolution=[n, n, n], channels=c + 1, batch_size=b).peak_allocated_bytes > base
    assert fp(resolution=[n, n, n], channels=c, batch_size=b + 1).peak_allocated_bytes > base
