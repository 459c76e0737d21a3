"""A transformers vision tower's inference peak (workloads/vision/nets.vit_block, Graph.hold):
under no_grad, transformers 5.23's SiglipVisionModel.forward keeps the embedding output in its
`hidden_states` local through the encoder; SiglipEncoder.forward's loop variable keeps each
layer's input until the layer returns; SiglipEncoderLayer.forward's `hidden_states` keeps
layer_norm2's output while `self.mlp(...)` runs. Before, the layer walk freed each at its last
use (the real-module row was -10.7%)."""
from vramplan.catalog import get_model
from vramplan.estimate import estimate
from vramplan.workloads.vision.layers import Graph

GPU = "nvidia-h100-sxm5-80gb"
TOWER = "google/siglip2-so400m-patch14-384"


def _forward(model, **kw):
    sc = {"model": model, "task": "forward", "batch_size": 32, "resolution": [384, 384],
          "precision": "bf16", "attention": "sdpa", "gpu": GPU, **kw}
    return estimate(sc, with_max_batch=False)


def test_siglip_tower_forward_peak_by_hand():
    """So400m/14 at 384 px: 27 x 27 = 729 tokens of width 1152, MLP 4304, bf16, 32 images.
    The peak is inside a later layer's MLP, at GELU: the pixel values (the caller's,
    32 x 3 x 384 x 384 x 2 = 28,311,552), four token tensors (the embedding output, the layer
    input, the post-attention residual, layer_norm2's output: 4 x 32 x 729 x 1152 x 2 =
    214,990,848) and fc1's and GELU's outputs (2 x 32 x 729 x 4304 x 2 = 401,614,848):
    644,917,248 B, the fake-tensor trace's figure for transformers' SiglipVisionModel
    (benchmarks/results/real-modules-2026-12-02c.md). Before: 483,674,112 (three token
    tensors fewer)."""
    e = _forward(TOWER)
    assert e.components["activations"] == 28_311_552 + 214_990_848 + 401_614_848 == 644_917_248


def test_hold_is_inference_only():
    """Training graphs ignore Graph.hold: autograd's saved tensors decide there."""
    g = Graph(dt="bf16", training=True)
    x = g.input((4, 8))
    g.hold(g.ln(x), to_end=True)
    assert g.held == {}
    g = Graph(dt="bf16", training=False)
    y = g.ln(g.input((4, 8)))
    g.hold(y)
    assert g.held == {y.storage: 0}


def test_a_torch_vit_is_not_held():
    """torchvision / timm ViTs (framework torch) free at last use, as before: the SigLIP
    config read as a torch model (same shapes) peaks 3 token tensors lower."""
    cfg = dict(get_model(TOWER).config)
    from vramplan.workloads.vision import footprint as F
    hf = F.build(cfg, (384, 384), "bf16", None, False, "sdpa", False)
    torch_ = F.build({**cfg, "framework": "torch"}, (384, 384), "bf16", None, False, "sdpa",
                     False)
    peak = lambda gk: gk[0].curves(gk[1]).at(32)["inference_peak"]  # noqa: E731
    assert peak(hf) - peak(torch_) == 3 * 32 * 729 * 1152 * 2
