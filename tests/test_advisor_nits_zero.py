"""Advisor nit from the browser walk (issue 20.5): after the cluster solver's 32-GPU point for
Llama-3.1-70B training at 8k on H100 (TP8 PP2 CP2, DP1), the ZeRO rows said 'over the 2
data-parallel GPUs' while dp is 1. The shard group is data x context-parallel ranks
(parallel.shard_group = 1 x 2 = 2): context-parallel ranks hold the same parameters and reduce
their gradients together, so FSDP shards over them too (torchtitan parallel_dims.py: 'fsdp:
... This includes dp_shard and cp'); the title says so.

Its traffic by hand (comm.py): 70.55e9 params / (TP8 x PP2) = 4.41e9 per GPU; fp32 gradients
17.64 GB, bf16 parameters 8.82 GB. Today the gradients are all-reduced over the 2 ranks:
2 (n - 1) / n x 17.64 = 17.64 GB. ZeRO-2: reduce-scatter 1/2 x 17.64 = 8.82 GB plus the
all-gather of the updated parameters 1/2 x 8.82 = 4.41 GB = 13.23 GB: no more than now."""
from __future__ import annotations

import pytest

from vramplan.advisor import recommendations
from vramplan.i18n import translate_message

PLAN = {"model": "meta-llama/Llama-3.1-70B", "task": "train", "seq_len": 8192,
        "parallel": {"gpus": 32, "tensor": 8, "pipeline": 2, "context": 2, "data": 1}}
H100 = "nvidia-h100-sxm5-80gb"


@pytest.fixture(scope="module")
def zero_rows():
    return {r.id: r for r in recommendations(PLAN, H100) if r.id.startswith("zero-")}


def test_zero_names_its_shard_group_of_data_x_context_ranks(zero_rows):
    assert set(zero_rows) == {"zero-1", "zero-2", "zero-3"}
    assert zero_rows["zero-2"].title == \
        "ZeRO-2 / FSDP SHARD_GRAD_OP over the 2 data x context-parallel GPUs"
    assert not any("data-parallel GPUs" in r.title and "context" not in r.title
                   for r in zero_rows.values())
    assert translate_message(zero_rows["zero-2"].title, "zh") == \
        "ZeRO-2 / FSDP SHARD_GRAD_OP，在 2 张数据 × 上下文并行 GPU 上"


def test_zero_is_priced_over_the_two_ranks(zero_rows):
    """ZeRO-2's data-dimension traffic is 8.82 + 4.41 = 13.23 GB per step (module doc): it
    shards over 2 ranks, and adds nothing over today's 17.64 GB all-reduce."""
    data = [t for t in zero_rows["zero-2"].cost.transfers if t["dimension"] == "data"]
    assert sum(t["bytes"] for t in data) == pytest.approx(13.23e9, rel=0.01)
    assert zero_rows["zero-2"].cost.communication_bytes_per_step == 0


def test_without_context_parallelism_the_group_is_data_parallel():
    plan = {**PLAN, "parallel": {"gpus": 32, "tensor": 8, "pipeline": 2, "data": 2}}
    rows = [r for r in recommendations(plan, H100) if r.id == "zero-2"]
    assert [r.title for r in rows] == ["ZeRO-2 / FSDP SHARD_GRAD_OP over the 2 data-parallel "
                                       "GPUs"]
