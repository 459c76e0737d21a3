"""Compute for every family (issue 20.11): FLOPs per step from the vision layer walk and the
diffusion denoiser, the roofline they give, and the measured-efficiency note of each family
(never an LLM's MFU for a CNN, a ViT or a U-Net)."""
import numpy as np
import pytest

from vramplan import timing
from vramplan.catalog import get_model
from vramplan.estimate import estimate
from vramplan.hardware import get_gpu, traits_of
from vramplan.scenario import Scenario
from vramplan.sweep.grid import with_batch
from vramplan.workloads.dispatch import footprint
from vramplan.workloads.vision import flops
from vramplan.workloads.vision.family import native_resolution
from vramplan.workloads.vision.footprint import _resolution, build

# torchvision's model docs (the weights' meta "_ops", GFLOPS, counted as multiply-adds) at 224
TORCHVISION_GMACS = {
    "torchvision/resnet18": 1.81, "torchvision/resnet50": 4.09,
    "torchvision/convnext_tiny": 4.46, "torchvision/efficientnet_b0": 0.39,
    "torchvision/vit_b_16": 17.56, "torchvision/vit_b_32": 4.41,
    "torchvision/vit_l_16": 61.55, "microsoft/swin-tiny-patch4-window7-224": 4.49,
}


def _graph(model, training=True, mode="sdpa"):
    cfg = get_model(model).config
    g, _ = build(cfg, _resolution(cfg, native_resolution(cfg)), "f32", None, training, mode,
                 False)
    return g


@pytest.mark.parametrize("model,gmacs", sorted(TORCHVISION_GMACS.items()))
def test_forward_macs_match_torchvision(model, gmacs):
    """The walk's multiply-adds per image equal torchvision's published GFLOPS (2 decimals;
    Swin-T: torchvision's swin_t, the same layers as the HF swin-tiny)."""
    assert flops.forward_macs(_graph(model)) / 1e9 == pytest.approx(gmacs, abs=0.006)


def test_resnet50_by_hand():
    """ResNet-50 at 224: 4.09 G multiply-adds = 8.18 GFLOP forward. Training: 3 x forward,
    less the stem conv's input gradient (the image needs none): 64 x 3 x 7 x 7 x 112 x 112 =
    118,013,952 multiply-adds."""
    g = _graph("torchvision/resnet50")
    fwd = flops.forward_macs(g)
    assert fwd == 4_089_184_256
    stem = 64 * 3 * 7 * 7 * 112 * 112
    train = flops.step_flops(g, 1, True)
    assert train["flops_per_image"] == 2 * (3 * fwd - stem)
    assert flops.step_flops(g, 1, False)["flops_per_image"] == 2 * fwd


def test_vit_attention_counts_four_n2_d():
    """ViT-B/16: 197 tokens, width 768, 12 layers: the attention cores are 4 x 197^2 x 768
    FLOPs per layer (2 n^2 d multiply-adds); eager and fused attention count the same; the
    fused backward is 2.5 x its forward (FlashAttention-2) against 2 x for the linears."""
    g = _graph("torchvision/vit_b_16")
    cores = sum(op.macs for op in g.ops if op.kind == "attention")
    assert cores == 12 * 2 * 197 * 197 * 768
    assert flops.forward_macs(_graph("torchvision/vit_b_16", mode="eager")) == \
        flops.forward_macs(g)
    per = flops.step_flops(g, 1, True)["flops_per_image"]
    other = flops.forward_macs(g) - cores
    patch = 768 * 3 * 16 * 16 * 196                  # conv_proj: its input needs no gradient
    assert per == 2 * (3 * other - patch + 3.5 * cores)


def test_swin_window_attention_uses_window_keys():
    """Swin-T stage 1: 56 x 56 tokens in 7 x 7 windows, width 96: each query meets 49 keys,
    2 x 3136 x 49 x 96 multiply-adds per block, not 3136^2."""
    g = _graph("microsoft/swin-tiny-patch4-window7-224")
    first = next(op for op in g.ops if op.kind == "attention")
    assert first.macs == 2 * 3136 * 49 * 96


def test_full_checkpointing_adds_one_forward_of_the_blocks():
    g = _graph("torchvision/vit_b_16")
    blocks = sum(op.macs for a, b in g.blocks for op in g.ops[a:b])
    base = flops.step_flops(g, 1, True)["flops_per_image"]
    full = flops.step_flops(g, 1, True, "full")["flops_per_image"]
    assert full - base == 2 * blocks > 0


def _sc(model, task="train", batch=8, prec="bf16-mixed", **kw):
    return Scenario.from_dict({"model": model, "task": task, "batch_size": batch,
                               "precision": prec, "gpu": "nvidia-a100-sxm4-80gb", **kw})


@pytest.mark.parametrize("model", ["torchvision/resnet50", "torchvision/vit_l_16",
                                   "mmdet/faster-rcnn_r50_fpn", "mmseg/pspnet_r50-d8"])
def test_every_vision_kind_has_a_compute_floor(model):
    """Before: vision plans had bytes only (no compute_floor_s, a memory-only step floor)."""
    bw = estimate(_sc(model, batch=2)).bandwidth
    assert bw["flops_per_step"] == 2 * bw["flops_per_image"]
    assert bw["compute_floor_s"] > 0 and bw["arithmetic_intensity"] > 0
    assert bw["min_step_time_s"] >= bw["compute_floor_s"]
    assert bw["attainable_tflops"] <= bw["peak_tflops"]


def test_notes_quote_the_family_not_llm_mfu():
    """The roofline note of a CNN quotes the ResNet-50 measurement, a ViT the ViT-22B one, a
    diffusion denoiser says none is known; only the LLM note quotes Llama 3's MFU."""
    def roof(sc):
        return next(n for n in estimate(sc).notes if n.startswith("roofline"))
    cnn = roof(_sc("torchvision/resnet50"))
    assert "ResNet-50" in cnn and "Llama" not in cnn and "MFU" not in cnn
    assert "ViT-22B" in roof(_sc("torchvision/vit_b_16"))
    unet = roof(Scenario.from_dict({"model": "stable-diffusion-v1-5/stable-diffusion-v1-5", "task": "denoise",
                                    "batch_size": 1, "precision": "fp16",
                                    "gpu": "nvidia-a100-sxm4-80gb"}))
    assert "Llama" not in unet and "diffusion" in unet and "no measured" in unet
    assert "Llama 3" in timing.efficiency_note(None)


def test_diffusion_flops_per_image_is_steps_times_step():
    """SD 1.5 at 512 x 512, 50 steps, CFG: a step is 2 U-Net calls per image; per image 50 x
    that (the denoiser only)."""
    sc = Scenario.from_dict({"model": "stable-diffusion-v1-5/stable-diffusion-v1-5", "task": "denoise",
                             "batch_size": 2, "precision": "fp16", "steps": 50,
                             "gpu": "nvidia-a100-sxm4-80gb"})
    bw = estimate(sc).bandwidth
    assert bw["flops_per_image"] == pytest.approx(bw["flops_per_step"] / 2 * 50, rel=1e-9)
    assert bw["workload_kind"] == "diffusion" and bw["compute_floor_s"] > 0


def test_flops_follow_the_sweep_batch_array():
    """The sweep's batch axis (vramplan.vec): an int64 batch array gives, element by element,
    the scalar calls' FLOPs."""
    tr = traits_of(get_gpu("nvidia-a100-sxm4-80gb"))
    sc = _sc("torchvision/resnet50")
    spec = get_model("torchvision/resnet50")
    arr = np.array([2, 3, 16], dtype=np.int64)
    got = footprint(with_batch(sc, arr), spec, tr).bandwidth["flops_per_step"]
    for j, b in enumerate(arr):
        one = footprint(sc.replace(batch_size=int(b)), spec, tr).bandwidth["flops_per_step"]
        assert int(got[j]) == one


def test_time_per_image_floor():
    """One image's share of the step floor: vision 1 / batch of it; a diffusion image its
    steps' worth (50 steps, batch 2: 25 step floors)."""
    bw = estimate(_sc("torchvision/resnet50", batch=8)).bandwidth
    assert bw["min_time_per_image_s"] == pytest.approx(bw["min_step_time_s"] / 8)
    assert bw["max_images_per_s"] == pytest.approx(8 / bw["min_step_time_s"])
    sc = Scenario.from_dict({"model": "stable-diffusion-v1-5/stable-diffusion-v1-5",
                             "task": "denoise", "batch_size": 2, "precision": "fp16",
                             "steps": 50, "gpu": "nvidia-a100-sxm4-80gb"})
    bw = estimate(sc).bandwidth
    assert bw["min_time_per_image_s"] == pytest.approx(25 * bw["min_step_time_s"])
