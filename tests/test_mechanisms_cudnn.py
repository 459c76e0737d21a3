"""cuDNN convolution workspaces (workloads/vision/cudnn.py): counted as none, said in the notes
of convolution nets only, and the bytes do not move with it."""
from vramplan.estimate import estimate
from vramplan.workloads.vision import cudnn
from vramplan.workloads.vision.layers import Graph


def _sc(model: str) -> dict:
    return {"model": model, "task": "train", "batch_size": 8, "resolution": [224, 224],
            "precision": "fp32", "optimizer": "sgd", "gpu": "nvidia-a100-sxm4-80gb"}


def test_conv_nets_carry_the_workspace_note():
    est = estimate(_sc("torchvision/resnet50"), with_max_batch=False)
    assert cudnn.WORKSPACE_NOTE in est.notes
    assert "workspace" not in est.components


def test_a_vit_patch_embedding_is_not_a_conv_net():
    est = estimate(_sc("torchvision/vit_b_16"), with_max_batch=False)
    assert cudnn.WORKSPACE_NOTE not in est.notes


def test_conv_net_counts_convolutions():
    g = Graph(dt="f32", training=True)
    x = g.input((3, 32, 32))
    y = g.conv(x, 8, 3)
    assert not cudnn.conv_net(g)          # one convolution (a patch embedding)
    g.conv(y, 8, 3)
    assert cudnn.conv_net(g)
