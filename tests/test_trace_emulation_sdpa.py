"""The tracer's CUDA memory-efficient SDPA (measure/tracing/sdpa.py, emulation.py) and library
checkpointing inside the kernel emulation (recompute.context_fn). Sizes are chosen so the bytes
can be checked by hand: batch 2, 4 heads, 100 tokens, q/k head 24, v head 16."""
import os

import pytest

torch = pytest.importorskip("torch")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch.nn.functional as F  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from vramplan.measure.tracing.emulation import CudaKernels  # noqa: E402
from vramplan.measure.tracing.sdpa import mem_efficient_sdpa  # noqa: E402

B, H, N, D, DV = 2, 4, 100, 24, 16


def _saved_bytes(fn):
    """Bytes of the distinct storages autograd saves while fn() runs, and fn's result."""
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        seen[id(st)] = st.nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return sum(seen.values()), out


def _qkv(dtype, dv=DV):
    mk = lambda d: torch.randn(B, H, N, d, dtype=dtype, requires_grad=True)  # noqa: E731
    return mk(D), mk(D), mk(dv)


def test_mla_value_head_saves_what_the_memory_efficient_kernel_saves():
    """q/k head 24, v head 16, bf16, causal: CUDA saves q, k, v, out and an fp32 logsumexp of
    b x h x ceil(n / 32) * 32; the CPU's math path keeps b x h x n x n scores besides."""
    with FakeTensorMode():
        q, k, v = _qkv(torch.bfloat16)
        cpu, _ = _saved_bytes(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        mode = CudaKernels()
        with mode:
            saved, out = _saved_bytes(
                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    qk = B * H * N * D * 2                     # 38_400 each
    vo = B * H * N * DV * 2                    # 25_600: v and out
    lse = B * H * 128 * 4                      # 4_096: 100 rows padded to 128, fp32
    assert saved == 2 * qk + 2 * vo + lse == 132_096
    assert cpu >= B * H * N * N * 2 > saved - 2 * qk - vo   # the math path's scores
    assert mode.rewrites == {"sdpa-v-head->mem-efficient": 1}
    assert out.shape == (B, H, N, DV) and out.dtype == torch.bfloat16
    assert out.transpose(1, 2).is_contiguous()             # b x n x h x d, as the kernel writes


class _Allocs(TorchDispatchMode):
    """Shapes and dtypes of the tensors each op returns."""

    def __init__(self):
        super().__init__()
        self.made = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, torch.Tensor):
                self.made.append((t.untyped_storage().nbytes(), t.dtype))
        return out


def test_bias_that_requires_grad_under_autocast():
    """T5's case: a 1 x h x n x n fp32 bias that requires grad, bf16 autocast. CUDA autocast casts
    q, k, v and the bias to bf16; the kernel saves those and its out and lse (no fp32
    probabilities; the bias padded to a row of 104, a multiple of 8); its backward writes a b x h x n x 112 (n padded to 16) bf16 bias gradient,
    an fp32 delta (b x h x n) and the fp32 grad-q accumulator, and autograd sums the bias
    gradient to 1 x h x n x n."""
    with FakeTensorMode():
        q, k, v = _qkv(torch.float32, dv=D)
        bias = torch.randn(1, H, N, N, requires_grad=True)
        mode = CudaKernels()
        with torch.autocast("cpu", dtype=torch.bfloat16), mode:
            saved, out = _saved_bytes(
                lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
        allocs = _Allocs()
        with allocs:
            out.sum().backward()
    qkvo = 4 * B * H * N * D * 2               # bf16 casts of q, k, v and out: 38_400 each
    # the bias's row stride (100) is not a multiple of 8: preprocess_mask pads it to 104
    assert saved == qkvo + H * N * 104 * 2 + B * H * 128 * 4 == 240_896
    assert mode.rewrites == {"sdpa-bias-grad->mem-efficient": 1}
    made = set(allocs.made)
    assert (B * H * N * 112 * 2, torch.bfloat16) in made     # the bias gradient, 179_200 B
    assert (B * H * N * 4, torch.float32) in made            # delta
    assert (B * H * N * D * 4, torch.float32) in made        # grad-q accumulator
    assert (B * H * N * N * 4, torch.float32) not in made    # no fp32 probabilities
    assert bias.grad.shape == (1, H, N, N) and bias.grad.dtype == torch.float32


@pytest.mark.parametrize("dv,with_bias,causal", [(DV, False, True), (D, True, False),
                                                 (DV, True, False)])
def test_real_tensors_match_the_math_path(dv, with_bias, causal):
    """With real CPU tensors the emulation computes the values too: output and every gradient
    equal PyTorch's math path (fp32, 130 tokens: two query blocks)."""
    torch.manual_seed(0)
    q = torch.randn(B, H, 130, D, requires_grad=True)
    k = torch.randn(B, H, 130, D, requires_grad=True)
    v = torch.randn(B, H, 130, dv, requires_grad=True)
    bias = torch.randn(1, H, 130, 130, requires_grad=True) if with_bias else None
    ins = [q, k, v] + ([bias] if with_bias else [])
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=causal)
    g = torch.randn_like(ref)
    want = torch.autograd.grad(ref, ins, g)
    got_out = mem_efficient_sdpa(q, k, v, bias, causal)
    got = torch.autograd.grad(got_out, ins, g)
    assert torch.allclose(got_out, ref, atol=1e-5)
    for a, b in zip(got, want):
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-5)


def test_tiny_t5_traces_with_full_checkpointing():
    """transformers' T5 with gradient checkpointing: the recomputation runs inside the kernel
    emulation (recompute.context_fn), so its saved tensors match the forward's (before:
    CheckpointError, native_dropout's bool mask in the forward, dropout's bf16 mask in the
    recomputation). Checkpointing keeps less than full training."""
    from vramplan.measure import trace
    from vramplan.measure.tracing.thirdparty import require
    from vramplan.errors import UnavailableError
    try:
        require("transformers")
    except UnavailableError as exc:
        pytest.skip(str(exc))
    t5 = {"model_type": "t5", "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2,
          "num_decoder_layers": 2, "num_heads": 4, "vocab_size": 256, "dropout_rate": 0.1}
    s = {"architecture": t5, "task": "train", "batch_size": 4, "seq_len": 128,
         "target_len": 32, "precision": "bf16-mixed", "optimizer": "adamw", "attention": "sdpa"}
    full = trace.trace_real(dict(s, checkpointing="full"), {"hf": t5}, timeline=False, steps=1)
    plain = trace.trace_real(s, {"hf": t5}, timeline=False, steps=1)
    # the bias requires grad in every self-attention layer: 2 encoder + 2 decoder; under
    # checkpointing T5Attention also sets requires_grad on the cross-attention's zero bias
    # (transformers' modeling_t5: `if self.gradient_checkpointing and self.training`): +2.
    # The forward's calls only (each recomputation counts in its own mode).
    assert plain.rewrites["sdpa-bias-grad->mem-efficient"] == 4
    assert full.rewrites["sdpa-bias-grad->mem-efficient"] == 6
    assert full.components["activations"] < plain.components["activations"]
