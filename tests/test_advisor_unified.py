"""No offload advice on a unified-memory device (Apple M3 Ultra, DGX Spark, Ryzen AI Max): its
CPU memory is the GPU's memory, so offloaded bytes still take the same memory. `vramplan
advise` for Llama-3.1-70B pre-training (b1, seq 8192, bf16-mixed) on an H100 listed "GPUs that
hold it with one change: apple-m3-ultra (offload-params)": 70.55e9 x 16 B = 1.13 TB of model
states moved to the 'CPU' of a 512 GB machine whose CPU and GPU share those 512 GB."""
from vramplan.advisor import advise

PRETRAIN = {"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 1,
            "seq_len": 8192, "precision": "bf16-mixed"}
OFFLOAD = {"offload-params", "offload-optimizer", "offload-activations", "offload-gradients",
           "model-cpu-offload"}


def test_no_offload_on_unified_memory():
    a = advise({**PRETRAIN, "gpu": "apple-m3-ultra"}, gpu_table_too=False)
    assert a.estimate.gpu.unified_memory
    assert not {r.id for r in a.recommendations + a.job_changes} & OFFLOAD
    for p in a.plans:
        assert not p.scenario.offload


def test_the_gpu_table_offers_no_unified_machine_by_offload():
    from vramplan.hardware import get_gpu
    a = advise({**PRETRAIN, "gpu": "nvidia-h100-sxm5-80gb"})
    unified = [row for row in a.gpus if get_gpu(row["gpu"]).unified_memory]
    assert any(row["gpu"] == "apple-m3-ultra" for row in unified)
    for row in unified:
        assert (row["with_one_change"] or {}).get("id") not in OFFLOAD, row
    offload = {r.id for r in advise({**PRETRAIN, "gpu": "nvidia-h100-sxm5-80gb"},
                                    gpu_table_too=False).recommendations} & OFFLOAD
    assert "offload-params" in offload                       # a discrete GPU keeps it
