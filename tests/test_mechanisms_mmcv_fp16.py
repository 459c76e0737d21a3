"""mmcv's fp16 hook under DDP (workloads/vision/mmcv_fp16.py), on the published case K02
(mmdetection v2.0 faster_rcnn_r50_fpn_fp16_1x_coco, bs 2 at 800x1333 on 8 GPUs).

Trainable parameters by hand: the catalog's 41,753,056 minus the frozen stem and stage 1
(frozen_stages=1): stem conv 7*7*3*64 = 9,408 + BN 128; stage 1 block 1: 64*64 + 9*64*64 +
64*256 + downsample 64*256 = 73,728 convolution weights + BN 128 + 128 + 512 + 512; blocks 2 and
3: 256*64 + 9*64*64 + 64*256 = 69,632 + BN 768 each -> 225,344 frozen, 41,527,712 trainable."""
from vramplan.estimate import estimate
from vramplan.workloads.vision import mmcv_fp16
from vramplan.workloads.vision.footprint import build

TRAINABLE = 41_753_056 - 225_344          # 41,527,712


def _k02(precision="fp16-mixed", data=8, model="mmdet/faster-rcnn_r50_fpn") -> dict:
    return {"model": model, "task": "train", "batch_size": 2, "resolution": [800, 1333],
            "precision": precision, "optimizer": "sgd-momentum",
            "parallel": {"gpus": data, "data": data}, "gpu": "nvidia-v100-sxm2-32gb"}


def _phases(sc):
    return estimate(sc, with_max_batch=False).footprint.phases


def test_trainable_count_by_hand():
    assert TRAINABLE == 41_527_712
    est = estimate(_k02(), with_max_batch=False)
    assert any("41,527,712 trainable" in n for n in est.notes)


def test_ddp_buckets_stay_fp32_under_the_fp16_hook():
    """fp16 gradients 2 B + the hook's fp32 gradients 4 B + DDP's fp32 buckets 4 B per
    trainable parameter: 415,277,120 bytes, in every phase."""
    ph = _phases(_k02())
    assert (2 + 4 + 4) * TRAINABLE == 415_277_120
    for name in ("forward", "backward", "optimizer-step"):
        assert ph[name]["gradients"] == 415_277_120, name


def test_without_ddp_there_are_no_buckets():
    ph = _phases(_k02(data=1))
    assert ph["forward"]["gradients"] == (2 + 4) * TRAINABLE == 249_166_272


def test_fp32_buckets_are_the_gradient_size():
    """K01 (fp32, no hook): gradients 4 B + DDP buckets 4 B, as before."""
    ph = _phases(_k02("fp32"))
    assert ph["forward"]["gradients"] == 8 * TRAINABLE == 332_221_696


def test_the_hooks_flat_allreduce_copy_at_the_step():
    """allreduce_grads(coalesce=True, bucket_size_mb=-1): one flat fp32 copy of all gradients,
    4 B * 41,527,712 = 166,110,848 bytes, more than SGD's per-parameter loop temporary."""
    ph = _phases(_k02())
    assert ph["optimizer-step"]["temporary"] == 4 * TRAINABLE == 166_110_848
    assert _phases(_k02(data=1))["optimizer-step"]["temporary"] < 166_110_848


def test_applies_only_to_the_mmcv_hook_on_ddp():
    assert mmcv_fp16.applies("mmcv", 4, True)
    assert not mmcv_fp16.applies("mmcv", 0, True)       # fp32 / pure fp16: no master copy
    assert not mmcv_fp16.applies("mmcv", 4, False)      # one GPU: no DDP buckets
    assert not mmcv_fp16.applies("torch", 0, True)      # autocast: fp32 params, fp32 buckets
    assert mmcv_fp16.bucket_bytes(1000) == mmcv_fp16.step_flat_bytes(1000) == 4000


def test_the_note_is_said_for_the_hook_on_ddp_only():
    assert mmcv_fp16.NOTE in estimate(_k02(), with_max_batch=False).notes
    assert mmcv_fp16.NOTE not in estimate(_k02(data=1), with_max_batch=False).notes
    assert mmcv_fp16.NOTE not in estimate(_k02("fp32"), with_max_batch=False).notes


def test_auto_fp16_keeps_the_fp32_image_and_its_cast():
    """The pipeline's fp32 image (3 x 800 x 1344 after padding to 32, batch 2):
    2 * 3 * 800 * 1344 * 4 = 25,804,800 bytes, and auto_fp16's cast 12,902,400, both kept."""
    from vramplan.catalog import get_model
    cfg = get_model("mmdet/faster-rcnn_r50_fpn").config
    _, keep = build(cfg, (800, 1344), "f16", None, True, "sdpa", True)
    img, half = keep[0], keep[1]
    assert (img.dtype, img.nbytes(2)) == ("f32", 25_804_800)
    assert (half.dtype, half.nbytes(2)) == ("f16", 12_902_400)
    # pure fp16 (no hook, loss not forced to fp32): the input is the 16-bit tensor itself
    _, keep16 = build(cfg, (800, 1344), "f16", None, True, "sdpa", False)
    assert (keep16[0].dtype, keep16[0].nbytes(2)) == ("f16", 12_902_400)
