"""LLM.int8 mechanisms checked against bitsandbytes' own autograd function on CPU tensors
(bitsandbytes >= 0.45 registers torch kernels for its int8 ops): what MatMul8bitLt keeps for
backward (stack mechanism bnb-int8-keeps-input) and the tensors one call makes
(bnb-int8-copies, stack_mechanisms.int8_call_bytes). Skipped where bitsandbytes is not
installed; checked here with bitsandbytes 0.49.2 and torch 2.13.0 (CPU)."""
import pytest

torch = pytest.importorskip("torch")
bnb = pytest.importorskip("bitsandbytes")

from bitsandbytes.autograd._functions import MatMul8bitLt, MatmulLtState  # noqa: E402

from vramplan.workloads import stack_mechanisms as mech  # noqa: E402

T, H, F = 16, 64, 256


def _state() -> MatmulLtState:
    state = MatmulLtState()
    state.threshold, state.has_fp16_weights = 6.0, False
    w = torch.randn(F, H, dtype=torch.float16)
    state.CB, state.SCB, _ = bnb.functional.int8_vectorwise_quant(w)
    return state


def test_matmul8bitlt_keeps_its_input_itself():
    """ctx.tensors = (CAt, subA, A): with a frozen weight CAt is None, subA holds the outlier
    columns (none here: |x| < 6), A is the input's own storage, T x H x 2 B = 2048 B."""
    state = _state()
    x = (torch.rand(T, H, dtype=torch.float16) - 0.5).requires_grad_()
    y = MatMul8bitLt.apply(x, state.CB, None, None, state)
    cat, sub_a, a = y.grad_fn.tensors
    assert cat is None and sub_a.numel() == 0
    assert a.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert a.untyped_storage().nbytes() == T * H * 2 == 2048
    # an input that needs no gradient (inference): nothing kept, no graph
    assert MatMul8bitLt.apply(x.detach(), state.CB, None, None, state).grad_fn is None


def test_one_int8_call_makes_the_counted_tensors():
    """int8_vectorwise_quant: CA int8 T x H and SCA fp32 per row; int8_linear_matmul: int32
    T x F. 16 x 64 + 4 x 16 + 4 x 16 x 256 = 17,472 B = int8_call_bytes(64, 256, 16)."""
    state = _state()
    x = torch.rand(T, H, dtype=torch.float16) - 0.5
    ca, sca, _ = bnb.functional.int8_vectorwise_quant(x, threshold=6.0)
    acc = torch.ops.bitsandbytes.int8_linear_matmul.default(ca, state.CB)
    assert (ca.dtype, sca.dtype, acc.dtype) == (torch.int8, torch.float32, torch.int32)
    made = sum(t.untyped_storage().nbytes() for t in (ca, sca, acc))
    assert made == mech.int8_call_bytes(H, F, T) == 17_472


@pytest.mark.parametrize("cols", [(), (3,), (3, 17, 40)])
def test_matmul8bitlt_keeps_the_outlier_columns_the_data_has(cols):
    """Threshold 6.0: int8_mixed_scaled_mm copies the input's columns holding a value >= 6
    (subA = A[:, outlier_cols].contiguous(), in A's dtype) and MatMul8bitLt keeps it for
    backward beside A: T x k x 2 B, k set by the data (one value of 7.0 per chosen column
    here: 0, 16 x 1 x 2 = 32, 16 x 3 x 2 = 96 B), at most every column of the input
    (mech.int8_outlier_bound: 2 x 64 = 128 B per token)."""
    state = _state()
    x = torch.rand(T, H, dtype=torch.float16) - 0.5
    for row, col in enumerate(cols):
        x[row, col] = 7.0
    x.requires_grad_()
    _, sub_a, a = MatMul8bitLt.apply(x, state.CB, None, None, state).grad_fn.tensors
    kept = sub_a.untyped_storage().nbytes()
    assert kept == T * len(cols) * 2 and kept in (0, 32, 96)
    if cols:
        assert sub_a.shape == (T, len(cols)) and torch.equal(sub_a, x.detach()[:, list(cols)])
        assert sub_a.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()
    assert kept <= T * mech.int8_outlier_bound(2, [H]) == T * 128


def test_the_outlier_count_is_a_dynamic_size_in_bitsandbytes_itself():
    """bitsandbytes' fake kernel for int8_vectorwise_quant (_ops.py) returns the outlier column
    indices with a new dynamic size (an unbacked SymInt) when the threshold is above 0: the
    library itself cannot say their number from the shapes, hence a bound, not bytes."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with FakeTensorMode(shape_env=ShapeEnv()):
        a = torch.empty(T, H, dtype=torch.float16)
        ca, sca, cols = torch.ops.bitsandbytes.int8_vectorwise_quant.default(a, 6.0)
        assert ca.shape == (T, H) and sca.shape == (T,)
        assert isinstance(cols.shape[0], torch.SymInt)
        assert torch.ops.bitsandbytes.int8_vectorwise_quant.default(a, 0.0)[2] is None
