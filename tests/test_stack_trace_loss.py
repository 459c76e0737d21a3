"""torchtitan's compiled loss (stack mechanism compiled-loss, PR #1033, bbb1b616:
torchtitan/components/loss.py `cross_entropy_loss` = F.cross_entropy(pred.flatten(0, 1)
.float(), labels.flatten(0, 1)), wrapped in torch.compile when training.compile) traced on CPU
tensors: the eager function under the repo's live-bytes counter (measure/tracing/counter.py),
and the compiled one with inductor itself (its saved tensors through saved_tensors_hooks, its
backward's buffers read from the code inductor generates). Checked here with torch 2.13.0."""
import math
import re
import shutil

import pytest

torch = pytest.importorskip("torch")

from vramplan.measure.tracing.counter import MemoryCounter  # noqa: E402
from vramplan.workloads import stack_mechanisms as mech  # noqa: E402

B, S, V = 1, 64, 1000
T, P = B * S, 2          # tokens; the logits are bf16


def cross_entropy_loss(pred, labels):
    """torchtitan/components/loss.py (bbb1b616) cross_entropy_loss."""
    return torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


def _inputs():
    torch.manual_seed(0)
    pred = torch.randn(B, S, V, dtype=torch.bfloat16, requires_grad=True)
    return pred, torch.randint(0, V, (B, S))


def test_eager_loss_holds_three_fp32_vocab_buffers():
    """Eager: log_softmax keeps its fp32 output (4 T V) at forward end; in backward
    nll_loss_backward's fp32 gradient and log_softmax_backward's fp32 result come beside it:
    3 x 4 T V = 768,000 B at the peak (T 64, V 1000), plus a few scalars (loss, its gradient,
    total_weight; < 64 B). pred and labels are counted before the mode."""
    pred, labels = _inputs()
    c = MemoryCounter(round_to=1, timeline=False)
    with c:
        c.track(pred, "weights"), c.track(labels, "weights")
        before = c.cur_raw
        c.phase = "forward"
        loss = cross_entropy_loss(pred, labels)
        fwd = c.cur_raw - before
        c.phase = "backward"
        c.peak, c.peak_raw = c.cur, c.cur_raw
        loss.backward()
        peak = c.peak_raw - before
    assert 4 * T * V <= fwd < 4 * T * V + 64
    assert 3 * 4 * T * V <= peak < 3 * 4 * T * V + 64 and 3 * 4 * T * V == 768_000


_EMPTY = re.compile(r"empty_strided_cpu\(\(([\d, ]*)\), \([\d, ]*\), torch\.(\w+)\)")


def _allocated(code: str) -> list[tuple[tuple[int, ...], str, int]]:
    """(shape, dtype, bytes) of each buffer an inductor wrapper's call() allocates."""
    out = []
    for shape, dt in _EMPTY.findall(code):
        dims = tuple(int(x) for x in shape.replace(" ", "").split(",") if x)
        out.append((dims, dt, math.prod(dims) * getattr(torch, dt).itemsize))
    return out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="inductor's CPU backend needs a C++ compiler")
def test_compiled_loss_keeps_the_logits_and_writes_one_16bit_gradient():
    """torch.compile (inductor, the default backend) of the same function: the forward graph
    saves the bf16 logits (p T V), two fp32 values per row (amax and the log of the sum of
    exponentials: 8 T) and the labels; the backward is one fused kernel whose only vocabulary-
    sized buffer is the bf16 gradient (p T V), beside one fp32 value per row (4 T). At the
    backward: 2 p T V + 12 T = 256,768 B (T 64, V 1000), mech.compiled_loss_bytes, against
    the eager 3 x 4 T V = 768,000 B. Labels (int64) are kept by both and not counted."""
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    pred, labels = _inputs()
    fn = torch.compile(cross_entropy_loss)
    saved = {}

    def pack(t):
        saved[t.untyped_storage().data_ptr()] = (tuple(t.shape), t.dtype,
                                                  t.untyped_storage().nbytes())
        return t

    def step():
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = fn(pred, labels)
        loss.backward()

    _, (fwd_code, bwd_code) = run_and_get_code(step)
    by_shape = sorted(v for v in saved.values() if v[1] != torch.int64 and v[0] != ())
    assert by_shape == sorted([((B, S, V), torch.bfloat16, P * T * V),
                               ((T, 1), torch.float32, 4 * T), ((T, 1), torch.float32, 4 * T)])
    assert bwd_code.count("async_compile.cpp_pybinding(") == 1      # one fused kernel
    bufs = _allocated(bwd_code.split("def call(")[1])
    assert [b for b in bufs if math.prod(b[0]) >= V] == [((T, V), "bfloat16", P * T * V)]
    assert sum(b[2] for b in bufs) == P * T * V + 4 * T
    at_backward = P * T * V + 8 * T + sum(b[2] for b in bufs)
    assert at_backward == mech.compiled_loss_bytes(P, T, V) == 2 * P * T * V + 12 * T == 256_768
    assert pred.grad is not None and pred.grad.dtype == torch.bfloat16
