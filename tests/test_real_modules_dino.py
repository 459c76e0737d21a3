"""DINOv2 / DINOv3 backbones traced as transformers builds them (Dinov2Model, DINOv3ViTModel:
published without a classifier, so a config without num_labels is built with AutoModel,
tracing/hf.py BACKBONES; their _init_weights' trunc_normal_ reads values a fake tensor lacks,
so they are built under no_init_weights) against the vision workload's estimate
(workloads/vision, framework "hf": the block keeps the references Dinov2Layer holds, the +30%
of forward activations the 2026-12-02 session read in the source; docs/accuracy.md). The
trace agrees: 2026-12-02e, batch 32, dinov2-base at 518 px and dinov3-vitb16 at 224 px, within
0.1% (benchmarks/results/real-modules-2026-12-02e.md)."""
import pytest

from vramplan.estimate import estimate
from vramplan.measure import trace

GPU = "nvidia-h100-sxm5-80gb"
DINOV2_BASE = {"model_type": "dinov2", "hidden_size": 768, "num_hidden_layers": 12,
               "num_attention_heads": 12, "mlp_ratio": 4, "patch_size": 14, "image_size": 518,
               "qkv_bias": True, "layerscale_value": 1.0, "use_swiglu_ffn": False,
               "hidden_act": "gelu", "layer_norm_eps": 1e-6}
DINOV3_B16 = {"model_type": "dinov3_vit", "hidden_size": 768, "intermediate_size": 3072,
              "num_hidden_layers": 12, "num_attention_heads": 12, "patch_size": 16,
              "num_register_tokens": 4, "image_size": 224}


@pytest.mark.parametrize("model,config,size", [
    ("facebook/dinov2-base", DINOV2_BASE, 518),
    ("facebook/dinov3-vitb16-pretrain-lvd1689m", DINOV3_B16, 224)], ids=["dinov2", "dinov3"])
def test_backbone_forward_agrees_with_transformers(model, config, size):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    s = {"model": model, "task": "forward", "batch_size": 2, "resolution": [size, size],
         "precision": "fp32", "gpu": GPU}
    real = trace.trace_real(s, {"hf": dict(config)}, timeline=False)
    est = estimate(s, with_max_batch=False)
    assert "Model built" in real.notes[0] and "ForImageClassification" not in real.notes[0]
    assert est.components["weights"] == pytest.approx(real.components["weights"], abs=512 * 250)
    assert abs(est.peak_allocated_bytes / real.peak_allocated_bytes - 1) < 0.01


def test_a_backbone_with_labels_is_the_classifier():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from vramplan.measure.tracing.hf import kind_of
    assert kind_of(DINOV2_BASE) == "tower"
    assert kind_of(dict(DINOV2_BASE, num_labels=10)) == "vision"
