"""Vision workloads: parameter counts from the layer walk, footprint behaviour, K-case fidelity."""
import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from vramplan.catalog import list_models
from vramplan.errors import ScenarioError
from vramplan.scenario import Scenario
from vramplan.workloads.dispatch import footprint
from vramplan.vocab import VISION_FAMILIES as FAMILIES
from vramplan.workloads.vision.footprint import activation_bytes, param_count

# Published parameter counts (torchvision weights meta num_params, HF model cards, timm).
KNOWN = {
    "torchvision/resnet18": 11_689_512, "torchvision/resnet50": 25_557_032,
    "torchvision/resnet152": 60_192_808, "torchvision/convnext_tiny": 28_589_128,
    "torchvision/efficientnet_b0": 5_288_548, "torchvision/efficientnet_b7": 66_347_960,
    "torchvision/vit_b_16": 86_567_656, "torchvision/vit_l_16": 304_326_632,
    "torchvision/vit_h_14": 632_045_800, "microsoft/beit-base-patch16-224": 86_530_984,
    "facebook/deit-small-patch16-224": 22_050_664,
    "microsoft/swin-tiny-patch4-window7-224": 28_288_354,
}


@pytest.mark.parametrize("model,want", sorted(KNOWN.items()))
def test_param_count_exact(model, want):
    assert param_count(model) == want


def test_catalog_params_agree_with_layer_walk():
    """Every vision entry's recorded count matches its walk (1%: mmseg/mmdet counts are
    published rounded)."""
    for fam in FAMILIES:
        for spec in list_models(fam):
            want = spec.config.get("params")
            if want:
                assert abs(param_count(spec.id) - want) / want < 0.01, spec.id


def scen(model="torchvision/resnet50", **kw):
    d = {"model": model, "task": "train", "batch_size": 8, "resolution": [224, 224],
         "precision": "fp32", "optimizer": "adamw", "gpu": "nvidia-a100-sxm4-80gb"}
    d.update(kw)
    return Scenario.from_dict(d)


def fp(**kw):
    s = scen(**kw)
    return footprint(s, s.spec, None)


def test_resnet50_states_by_precision_and_optimizer():
    f = fp(batch_size=1, optimizer="adamw")
    p = 25_557_032
    assert f.phases["optimizer-step"]["optimizer_states"] == 8 * p
    # fp32 weights + BatchNorm running mean and variance (26,560 BN channels x 2), 4 B each
    assert f.components["weights"] == 4 * (p + 2 * 26_560)
    assert f.components["gradients"] == 4 * p
    assert fp(batch_size=1, optimizer="sgd").phases["optimizer-step"]["optimizer_states"] == 0


def test_eager_attention_materialises_scores():
    kw = dict(model="torchvision/vit_b_16", batch_size=16)
    eager = fp(attention="eager", **kw).components["activations"]
    sdpa = fp(attention="sdpa", **kw).components["activations"]
    # 12 layers x 12 heads x 197^2 fp32 softmax outputs per image, at least
    assert eager - sdpa > 12 * 12 * 197 ** 2 * 4 * 16 * 0.9


def test_optimizer_in_backward_drops_full_gradients():
    base = dict(model="torchvision/vit_l_16", batch_size=1, optimizer="adam", attention="sdpa")
    a, b = fp(**base), fp(options=["optimizer-in-backward"], **base)
    assert b.peak_allocated_bytes < a.peak_allocated_bytes
    assert b.components["gradients"] < 0.02 * a.phases["optimizer-step"]["gradients"]


def test_frozen_stages_and_dilated_backbone():
    f = fp(model="mmseg/pspnet_r50-d8", resolution=[512, 1024], batch_size=2,
           optimizer="sgd-momentum")
    # output stride 8: layer4 of the dilated ResNet runs at 64 x 128 for a 512 x 1024 crop
    a = activation_bytes("mmseg/pspnet_r50-d8", (512, 1024), 1)["saved"]
    b = activation_bytes("mmseg/pspnet_r50-d8", (256, 512), 1)["saved"]
    assert 3.8 < a / b < 4.2
    assert f.peak_phase in ("forward", "backward")


def test_inference_smaller_than_training_and_3d_unet():
    assert fp(task="forward", optimizer="none").peak_allocated_bytes < fp().peak_allocated_bytes
    # fully convolutional: saved activations scale with the voxels, 8x per doubled side, and
    # the largest tensor at 32^3 is one 64-channel fp32 feature map, 32^3 x 64 x 4 bytes
    a = [activation_bytes("unet/unet-3d", (r, r, r), 1) for r in (32, 64, 128)]
    assert a[1]["saved"] == 8 * a[0]["saved"] and a[2]["saved"] == 64 * a[0]["saved"]
    assert a[0]["largest"] == 32**3 * 64 * 4
    with pytest.raises(ScenarioError):
        fp(model="unet/unet-3d", resolution=[64, 64])


@settings(max_examples=12, deadline=None)
@given(r=st.sampled_from([96, 128, 160, 192, 256]), b=st.integers(1, 16),
       model=st.sampled_from(["torchvision/resnet18", "torchvision/vit_b_16",
                              "torchvision/efficientnet_b0"]))
def test_properties(r, b, model):
    kw = dict(model=model, batch_size=b, resolution=[r, r])
    if "vit" in model:
        kw["resolution"] = [224, 224] if r < 224 else [r - r % 16, r - r % 16]
    base = fp(**kw)
    more_b = fp(**dict(kw, batch_size=b + 1))
    assert more_b.peak_allocated_bytes >= base.peak_allocated_bytes
    res = kw["resolution"][0]
    big = fp(**dict(kw, resolution=[res + 32, res + 32]))
    assert big.components["activations"] >= base.components["activations"]
    ck = fp(**dict(kw, checkpointing="full"))
    assert sum(ck.phases["backward"].values()) <= sum(base.phases["backward"].values())
    assert ck.phases["forward"]["activations"] <= base.phases["forward"]["activations"]
    half = fp(**dict(kw, precision="bf16-mixed"))
    pure = fp(**dict(kw, precision="fp16"))
    a32 = activation_bytes(model, kw["resolution"], b)["saved"]
    assert activation_bytes(model, kw["resolution"], b, precision="fp16")["saved"] <= a32
    # autocast adds batch-independent 16-bit weight copies; what each image adds is smaller
    def per_image(prec):
        return (activation_bytes(model, kw["resolution"], b + 1, precision=prec)["saved"]
                - activation_bytes(model, kw["resolution"], b, precision=prec)["saved"])
    assert per_image("bf16-mixed") <= per_image("fp32")
    # pure fp16: 2-byte gradients at the optimizer step, half of fp32's; mixed keeps fp32 ones
    step = "optimizer-step"
    assert pure.phases[step]["gradients"] * 2 == base.phases[step]["gradients"]
    assert half.phases[step]["gradients"] == base.phases[step]["gradients"]


CASES = Path(__file__).resolve().parents[1] / "tests" / "data" / "public_cases.jsonl"


def test_k_cases_fidelity():
    """Every expressible vision (K) case gets an estimate; median |error| <= 15%."""
    errs = []
    for line in CASES.read_text().splitlines():
        c = json.loads(line)
        if not c["case_id"].startswith("K") or c.get("expressible") is False:
            continue
        s = Scenario.from_dict(c["scenario"])
        try:
            from vramplan.estimate import estimate
            v = estimate(c["scenario"]).to_dict()["per_gpu"][c["quantity"]]
        except ImportError:
            v = footprint(s, s.spec, None).peak_allocated_bytes
        errs.append(abs(v - c["value_bytes"]) / c["value_bytes"])
    assert len(errs) == 9  # K01-K09, every vision case of public_cases.jsonl
    errs.sort()
    assert errs[len(errs) // 2] <= 0.15
