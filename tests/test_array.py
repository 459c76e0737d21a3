from vramplan.scenario import Scenario
from vramplan.workloads.dispatch import footprint


def fp(**kw):
    sc = Scenario.from_dict({"task": "array", **kw})
    return footprint(sc, None, None)


def test_arrays_and_work_buffers():
    arr = [{"name": "u", "shape": [1024, 1024], "dtype": "float64"},
           {"name": "mask", "shape": [1024, 1024], "dtype": "uint8", "count": 2}]
    f = fp(arrays=arr)
    assert f.components["arrays"] == 1024 * 1024 * (8 + 2)
    g = fp(arrays=arr, work_buffers={"fft": "out-of-place", "solver": "cg"})
    m = 1024 * 513 * 8                                  # R2C complex64 output
    assert g.components["fft_workspace"] == m and g.components["fft_output"] == m
    assert g.components["solver_vectors"] == 4 * 1024 * 1024 * 8
    h = fp(arrays=arr, work_buffers={"solver": "gmres", "restart": 10})
    assert h.components["solver_vectors"] == 11 * 1024 * 1024 * 8 + 11 * 10 * 8
    assert g.bandwidth["rule_of_thumb"]["memory_bytes"] == int(1.5 * f.components["arrays"])
