"""Per-rank peaks under torch.distributed: two CPU processes (gloo) started by torchrun."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

ARCH = {"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 256, "vocab_size": 512}


def _run(tmp_path: Path, zero: int) -> list[dict]:
    sc = {"architecture": ARCH, "task": "train", "batch_size": 2, "seq_len": 32, "precision": "fp32",
          "optimizer": "adamw", "attention": "sdpa", "parallel": {"gpus": 2, "data": 2, "zero": zero}}
    f = tmp_path / f"s{zero}.json"
    f.write_text(json.dumps(sc))
    out = tmp_path / f"out{zero}"
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_PORT=str(29500 + zero + os.getpid() % 1000))
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                    "--master-port", env["MASTER_PORT"], "-m", "vramplan.measure.live.distributed",
                    "--scenario", str(f), "--out", str(out)],
                   check=True, timeout=150, env=env, capture_output=True)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="no gloo")
def test_fsdp_shards_weights_and_states_per_rank(tmp_path):
    full = _run(tmp_path, 0)
    shard = _run(tmp_path, 3)
    assert [r["rank"]["rank"] for r in shard] == [0, 1] and shard[0]["rank"]["backend"] == "gloo"
    assert shard[0]["source"] == "trace"   # CPU: the live-tensor counter (CUDA: "measure")
    c0, c3 = full[0]["per_gpu"]["components"], shard[0]["per_gpu"]["components"]
    w0, w3 = c0["weights"], c3["weights"]
    o0, o3 = c0["optimizer_states"], c3["optimizer_states"]
    assert 0.45 < w3 / w0 < 0.55          # each rank holds half of the parameters
    assert 0.45 < o3 / o0 < 0.55          # and half of the Adam state
    assert shard[0]["per_gpu"]["peak_allocated_bytes"] == shard[1]["per_gpu"]["peak_allocated_bytes"]
