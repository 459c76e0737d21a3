"""The analytic activation memory of the vision layer graph agrees with what the same
architecture saves for backward when it runs.

ResNet-50 and ViT-B/16 are rebuilt here as compact torch modules (torchvision's layer order:
inplace ReLU, v1.5 bottleneck stride on the 3x3, `nn.MultiheadAttention` with need_weights=False)
and run forward on the CPU in fp32; `saved_tensors_hooks` collects every tensor autograd keeps,
counted once per storage, parameters excluded. That is compared with the graph's `saved` bytes.
"""
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from vramplan.workloads.vision.footprint import activation_bytes  # noqa: E402


class Bottleneck(nn.Module):
    def __init__(self, cin, w, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, w, 1, bias=False), nn.BatchNorm2d(w)
        self.c2, self.b2 = nn.Conv2d(w, w, 3, stride, 1, bias=False), nn.BatchNorm2d(w)
        self.c3, self.b3 = nn.Conv2d(w, 4 * w, 1, bias=False), nn.BatchNorm2d(4 * w)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != 4 * w:
            self.down = nn.Sequential(nn.Conv2d(cin, 4 * w, 1, stride, bias=False),
                                      nn.BatchNorm2d(4 * w))

    def forward(self, x):
        idn = x if self.down is None else self.down(x)
        y = self.relu(self.b1(self.c1(x)))
        y = self.relu(self.b2(self.c2(y)))
        y = self.b3(self.c3(y))
        return self.relu(y + idn)


class ResNet50(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for n, w, s in ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)):
            for i in range(n):
                layers.append(Bottleneck(cin, w, s if i == 0 else 1))
                cin = 4 * w
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(2048, 1000)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d, eps=1e-6), nn.LayerNorm(d, eps=1e-6)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        y = self.ln_1(x)
        y, _ = self.attn(y, y, y, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln_2(x))


class ViTB16(nn.Module):
    def __init__(self, res, d=768, layers=12, heads=12):
        super().__init__()
        self.proj = nn.Conv2d(3, d, 16, 16)
        n = (res // 16) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, n + 1, d))
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, 1000)

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.ln(self.blocks(x))
        return self.head(x[:, 0])


def saved_bytes(model, res, batch=1):
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    x = torch.randn(batch, 3, res, res)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
        loss = nn.functional.cross_entropy(out, torch.zeros(batch, dtype=torch.long))
    del loss
    return sum(seen.values())


pytestmark = pytest.mark.usefixtures("torch_two_threads")


@pytest.mark.parametrize("res", [160, 224, 320])
def test_resnet50_saved_activations(res):
    torch.manual_seed(0)
    measured = saved_bytes(ResNet50().train(), res)
    est = activation_bytes("torchvision/resnet50", (res, res), batch=1)["saved"]
    assert abs(est - measured) / measured < 0.05, (est, measured)


@pytest.mark.parametrize("res", [160, 224, 320])
def test_vit_b16_saved_activations(res):
    torch.manual_seed(0)
    measured = saved_bytes(ViTB16(res).train(), res)
    est = activation_bytes("torchvision/vit_b_16", (res, res), batch=1, attention="sdpa")["saved"]
    assert abs(est - measured) / measured < 0.05, (est, measured)


def test_resnet50_batch_linear():
    """Saved activations scale with the batch (two images hold twice one image's bytes)."""
    one = activation_bytes("torchvision/resnet50", (160, 160), batch=1)["saved"]
    two = activation_bytes("torchvision/resnet50", (160, 160), batch=2)["saved"]
    assert two == 2 * one
