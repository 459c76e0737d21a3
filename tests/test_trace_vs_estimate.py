"""The analytic estimate and the trace (CUDA kernels emulated) agree within 10 % on peak
allocated bytes for the catalog models trace builds, at two sizes each."""
import pytest

pytest.importorskip("torch")

from vramplan.measure import trace as T  # noqa: E402

estimate_mod = pytest.importorskip("vramplan.estimate")

TRAIN = {"task": "train", "optimizer": "adamw", "gpu": "nvidia-a100-sxm4-80gb"}
CASES = [
    ("gpt2-small", {"model": "gpt2", "batch_size": 2, "seq_len": 256, "precision": "fp32", "attention": "eager", **TRAIN}),
    ("gpt2-large", {"model": "gpt2", "batch_size": 4, "seq_len": 512, "precision": "bf16-mixed", "attention": "sdpa", **TRAIN}),
    ("llama-small", {"model": "meta-llama/Llama-3.2-1B", "batch_size": 1, "seq_len": 256, "precision": "bf16-mixed", "attention": "sdpa", **TRAIN}),
    ("llama-large", {"model": "meta-llama/Llama-3.2-1B", "batch_size": 4, "seq_len": 1024, "precision": "bf16-mixed", "attention": "sdpa", "checkpointing": "full", **TRAIN}),
    ("bert-small", {"model": "bert-base-uncased", "batch_size": 4, "seq_len": 128, "precision": "fp32", "attention": "eager", **TRAIN}),
    ("bert-large", {"model": "bert-base-uncased", "batch_size": 16, "seq_len": 512, "precision": "fp32", "attention": "sdpa", **TRAIN}),
    ("resnet-small", {"model": "torchvision/resnet50", "batch_size": 4, "precision": "fp32", **TRAIN}),
    ("resnet-large", {"model": "torchvision/resnet50", "batch_size": 32, "precision": "fp32", **TRAIN}),
    ("vit-small", {"model": "torchvision/vit_b_16", "batch_size": 4, "precision": "fp32", "attention": "sdpa", **TRAIN}),
    ("vit-large", {"model": "torchvision/vit_b_16", "batch_size": 32, "precision": "fp32", "attention": "sdpa", **TRAIN}),
    ("unet-small", {"model": "unet/unet-2d", "batch_size": 1, "resolution": [128, 128], "precision": "fp32", **TRAIN}),
    ("unet-large", {"model": "unet/unet-2d", "batch_size": 2, "resolution": [512, 512], "precision": "fp32", **TRAIN}),
    ("llama-generate", {"model": "meta-llama/Llama-3.2-1B", "task": "generate", "batch_size": 4, "seq_len": 512,
                        "new_tokens": 256, "precision": "bf16", "gpu": "nvidia-a100-sxm4-80gb"}),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,sc", CASES, ids=[c[0] for c in CASES])
def test_estimate_within_10pct_of_trace(name, sc):
    t = T.trace(sc, timeline=False).peak_allocated_bytes
    e = estimate_mod.estimate(sc).to_dict()["per_gpu"]["peak_allocated_bytes"]
    err = (e - t) / t
    assert abs(err) <= 0.10, f"{name}: estimate {e} vs trace {t}: {err:+.1%}"
