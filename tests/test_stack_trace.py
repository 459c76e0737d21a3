"""The frozen-BN mechanism checked against real torch autograd on CPU tensors: what
detectron2's / torchvision's FrozenBatchNorm2d (x * scale + bias from buffers) and a trainable
BatchNorm2d save for backward after a trainable conv, counted with saved_tensors_hooks, and
the difference the estimate's Graph charges for it (tests/test_stack_mechanisms.py)."""
import pytest

torch = pytest.importorskip("torch")

from vramplan.workloads.vision.layers import Graph  # noqa: E402


class FrozenBN(torch.nn.Module):
    """detectron2/layers/batch_norm.py FrozenBatchNorm2d.forward (training path)."""

    def __init__(self, c, eps=1e-5):
        super().__init__()
        for name, v in (("weight", 1.0), ("bias", 0.0), ("running_mean", 0.0),
                        ("running_var", 1.0)):
            self.register_buffer(name, torch.full((c,), v))
        self.eps = eps

    def forward(self, x):
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        bias = self.bias - self.running_mean * scale
        return x * scale.reshape(1, -1, 1, 1) + bias.reshape(1, -1, 1, 1)


def _saved_bytes(norm) -> int:
    """Bytes of the distinct batch-sized tensors autograd saves for conv -> norm -> relu
    (per-channel tensors left out: BN's mean / invstd, FrozenBN's scale, 64 B each)."""
    conv = torch.nn.Conv2d(3, 16, 3, padding=1)
    x = torch.randn(1, 3, 8, 8)
    seen = {}

    def pack(t):
        if t.dim() == 4 and t.shape[-1] > 1:   # activations and the conv weight (the same
            # in both runs); not FrozenBN's (1, c, 1, 1) scale, which its mul saves
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = torch.relu(norm(conv(x)))
    y.sum().backward()
    return sum(seen.values())


def test_frozen_bn_saves_no_input_in_torch_as_in_the_graph():
    bn = torch.nn.BatchNorm2d(16)
    bn.train()
    torch_diff = _saved_bytes(bn) - _saved_bytes(FrozenBN(16))
    # the BN input: 16 x 8 x 8 fp32 = 4096 B, in torch and in the estimate's graph alike
    g_bn, g_frozen = Graph(dt="f32", training=True), Graph(dt="f32", training=True)
    g_frozen.frozen_bn = True
    saved = []
    for g in (g_bn, g_frozen):
        x = g.input((3, 8, 8))
        z = g.relu(g.bn(g.conv(x, 16, 3, 1)))
        saved.append(g.curves([z]).at(1)["saved"])
    assert torch_diff == saved[0] - saved[1] == 16 * 8 * 8 * 4 == 4096
