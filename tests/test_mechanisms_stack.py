"""The software stack where it changes memory: on the torch 1.x stack (runtime.legacy_stack:
compute capability < 8.0 or option 'legacy-stack'; torch <= 1.10 precisely) softmax and
log_softmax keep their input for backward as well as their output (pytorch/pytorch#64000, the
backward formula referenced `self`; fixed by #66018 for 1.11). Values checkable by hand."""
from vramplan.estimate import estimate
from vramplan.workloads.vision.layers import Graph
from vramplan.workloads.transformer.activations import Kernels, score_bytes_saved
from vramplan.catalog import get_model


def _saved(legacy: bool) -> int:
    g = Graph(dt="f32", training=True)
    g.softmax_saves_input = legacy
    x = g.input((10,))
    y = g.linear(x, 100)          # trainable: y requires grad
    s = g.softmax(y)
    return g.curves([s]).at(1)["saved"]


def test_graph_softmax_keeps_its_input_on_the_old_stack():
    # linear saves x (10 fp32 = 40 B); softmax its output (400 B) and, before 1.11, its input y
    assert _saved(False) == 40 + 400
    assert _saved(True) - _saved(False) == 100 * 4 == 400


def test_eager_score_bytes_old_stack():
    """BERT fp32, eager, dropout 0.1: softmax output 4 + mask 1 + dropped probabilities 4 = 9 B
    per score element; torch <= 1.10 adds the softmax input, 4 B more."""
    arch = get_model("bert-large-uncased").arch
    k = Kernels(p=4, mixed=False, attention="eager", dropout=True, compile=False)
    assert score_bytes_saved(arch, k) == 9
    assert score_bytes_saved(arch, Kernels(**{**k.__dict__, "legacy": True})) == 13


def _bert(option: str) -> dict:
    return {"model": "bert-base-uncased", "task": "train", "batch_size": 2, "seq_len": 128,
            "precision": "fp32", "optimizer": "adamw", "attention": "eager",
            "checkpointing": "none", "options": [option], "gpu": "nvidia-a100-sxm4-80gb"}


def test_estimate_keeps_one_more_score_tensor_per_layer_on_the_old_stack():
    old = estimate(_bert("legacy-stack"), with_max_batch=False)
    new = estimate(_bert("modern-stack"), with_max_batch=False)
    # 12 layers x batch 2 x 12 heads x 128 x 128 scores x 4 B (the fp32 softmax input)
    diff = 12 * 2 * 12 * 128 * 128 * 4
    assert old.footprint.phases["forward"]["activations"] - \
        new.footprint.phases["forward"]["activations"] == diff == 18874368
    assert any("#64000" in n for n in old.notes)
    assert not any("#64000" in n for n in new.notes)
