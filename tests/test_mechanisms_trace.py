"""The issue 11.4 transformer mechanisms against the trace (torch modules run on fake tensors
with the CUDA kernels' saved tensors emulated): a ReLU MLP (OPT) and a config's dropout
probabilities (a GPT-2 config with dropout 0.1 and one with 0) agree within 5 % on peak
allocated bytes."""
import pytest

pytest.importorskip("torch")

from vramplan.estimate import estimate  # noqa: E402
from vramplan.measure import trace as T  # noqa: E402

BASE = {"task": "train", "optimizer": "sgd", "gpu": "nvidia-a100-sxm4-80gb", "batch_size": 2,
        "seq_len": 256, "checkpointing": "none"}
GPT2 = {"model_type": "gpt2", "n_layer": 6, "n_embd": 512, "n_head": 8, "vocab_size": 8000,
        "n_positions": 512}
CASES = [
    ("opt-relu-sdpa", {"model": "facebook/opt-125m", "precision": "bf16", "attention": "sdpa"}),
    ("opt-relu-eager", {"model": "facebook/opt-125m", "precision": "bf16", "attention": "eager"}),
    ("gpt2-dropout", {"architecture": GPT2, "precision": "fp32", "attention": "eager"}),
    ("gpt2-no-dropout", {"architecture": dict(GPT2, resid_pdrop=0.0, embd_pdrop=0.0,
                                              attn_pdrop=0.0),
                         "precision": "fp32", "attention": "eager"}),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,sc", CASES, ids=[c[0] for c in CASES])
def test_mechanism_within_5pct_of_trace(name, sc):
    s = dict(BASE, **sc)
    t = T.trace(s, timeline=False).peak_allocated_bytes
    e = estimate(s, with_max_batch=False).peak_allocated_bytes
    assert abs(e - t) / t <= 0.05, f"{name}: estimate {e} vs trace {t}: {(e - t) / t:+.1%}"
