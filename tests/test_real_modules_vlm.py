"""Whole vision-language models traced with their images (measure/tracing/vlm.py): the real
transformers 5.23 module, its vision tower run on pixel values and its features spliced into
the text at the image tokens, against the analytic estimate (the decoder at seq_len + images x
image tokens, the tower's activations: workloads/transformer/vision_inputs.py). The full table:
benchmarks/real_modules.py, families vlm / vlm-generate
(benchmarks/results/real-modules-2026-12-02e.md)."""
import copy
import json

import pytest

from vramplan.errors import ScenarioError
from vramplan.measure import trace

GPU = "nvidia-h100-sxm5-80gb"


def _need(mod):
    pytest.importorskip("torch")
    pytest.importorskip(mod)


def _qwen25(layers=1, depth=2):
    from vramplan.catalog import get_model
    cfg = json.loads(json.dumps(get_model("Qwen/Qwen2.5-VL-7B-Instruct").config))
    t = cfg["text_config"]
    t.update(num_hidden_layers=layers, layer_types=t["layer_types"][:layers])
    cfg["num_hidden_layers"] = layers
    cfg["vision_config"].update(depth=depth, fullatt_block_indexes=[depth - 1])
    return cfg


def _gemma3(layers=2, tower_layers=2):
    from test_catalog_2025 import GEMMA3_4B_IT
    cfg = copy.deepcopy(GEMMA3_4B_IT)
    cfg["text_config"]["num_hidden_layers"] = layers
    cfg["vision_config"]["num_hidden_layers"] = tower_layers
    return cfg


def _both(s, cfg):
    from vramplan.estimate import estimate
    s = dict(s, architecture=cfg, gpu=GPU)
    return (estimate(s, with_max_batch=False),
            trace.trace_real(s, {"hf": copy.deepcopy(cfg)}, timeline=False))


def test_qwen25_vl_with_an_image_is_traced_whole_by_hand():
    """1 text layer, a 2-block tower, one 224 x 224 image (smart_resize keeps it: 8 x 28):
    16 x 16 = 256 patches of 3 x 2 x 14 x 14 = 1176 values, 64 decoder tokens after the 2 x 2
    merge. The inputs the run holds, by hand: ids 1 x (256 + 64) int64 = 2,560 B; pixel values
    256 x 1176 fp32 = 1,204,224 B; grid 1 x 3 int64 (512 B rounded); M-RoPE positions
    3 x 1 x 320 int64 = 7,680 B; token types 320 int32 = 1,280 B -> 1,536; window index 64
    int64 (512 B); window bounds (4 windows of 112 px: 2 x 2, 5 int32; 512 B): each rounded
    up to 512 B. The tower's blocks run (their group is in the breakdown) and the estimate
    agrees within 5% at the peak."""
    _need("transformers")
    cfg = _qwen25()
    s = {"task": "train", "batch_size": 1, "seq_len": 256, "precision": "bf16-mixed",
         "optimizer": "adamw", "attention": "sdpa", "images": 1, "image_size": [224, 224]}
    est, real = _both(s, cfg)
    assert real.by_module["(inputs)"] == 2_560 + 1_204_224 + 512 + 7_680 + 1_536 + 512 + 512
    assert real.by_module.get("model.visual.blocks.0", 0) > 0
    assert abs(est.peak_allocated_bytes / real.peak_allocated_bytes - 1) < 0.05


def test_gemma3_with_images_generates_within_5_percent():
    """Gemma 3 4B-it's config (2 text layers, the SigLIP tower cut to 2 layers), 2 images a
    sample (896 x 896: 4096 patches each, pooled to 256 tokens), 512 text tokens, prompt + 4
    new tokens, bf16: the prefill runs the tower and the decoder over 512 + 512 tokens."""
    _need("transformers")
    s = {"task": "generate", "batch_size": 1, "seq_len": 512, "new_tokens": 4,
         "precision": "bf16", "attention": "sdpa", "images": 2}
    est, real = _both(s, _gemma3())
    assert {"prefill", "decode"} <= set(real.phases)
    assert abs(est.peak_allocated_bytes / real.peak_allocated_bytes - 1) < 0.05


def test_constants_limit_is_restored():
    _need("transformers")
    from torch._subclasses import fake_tensor
    from vramplan.measure.tracing.vlm import constants
    before = fake_tensor.CONSTANT_NUMEL_LIMIT
    with constants():
        assert fake_tensor.CONSTANT_NUMEL_LIMIT >= 1 << 22
    assert fake_tensor.CONSTANT_NUMEL_LIMIT == before


def test_other_vlms_with_images_are_refused_by_name():
    """Llama 3.2 Vision (cross-attention memory) is not traced whole with images: the key
    `images` is named; Qwen-VL's images leave seq_len room for their start / end tokens."""
    _need("transformers")
    from vramplan.catalog import get_model
    cfg = json.loads(json.dumps(get_model("meta-llama/Llama-3.2-11B-Vision").config))
    s = {"task": "forward", "batch_size": 1, "seq_len": 64, "precision": "bf16", "images": 1,
         "architecture": cfg, "gpu": GPU}
    with pytest.raises(ScenarioError) as exc:
        trace.trace_real(s, {"hf": cfg}, timeline=False)
    assert exc.value.key == "images" and "mllama" in str(exc.value)
