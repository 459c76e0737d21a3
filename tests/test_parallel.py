from vramplan import parallel


def test_zero_divisors():
    assert parallel.shard_divisors(0, 8) == {"weights": 1, "gradients": 1, "optimizer_states": 1}
    assert parallel.shard_divisors(1, 8)["optimizer_states"] == 8
    assert parallel.shard_divisors(2, 8)["gradients"] == 8
    assert parallel.shard_divisors(3, 8)["weights"] == 8


def test_shard_group_includes_context():
    lay = parallel.layout_of({"gpus": 8, "data": 4, "context": 2, "zero": 3})
    assert lay.shard_group == 8


def test_pipeline_helpers():
    assert parallel.stage_layers(32, 4) == 8
    assert parallel.pipeline_inflight(4, 16) == 4
    assert parallel.pipeline_inflight(1, 16) == 1
