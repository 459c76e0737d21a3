"""Each software-stack mechanism (workloads/stack_mechanisms.py, catalog/data/stacks.toml) with
a value checkable by hand, and the default `pytorch` stack changing nothing."""
from __future__ import annotations

from vramplan.estimate import estimate
from vramplan.workloads import stack_mechanisms as mech
from vramplan.workloads.vision.layers import Graph

H100, A100 = "nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb"


def _est(d: dict, stack: str | None):
    return estimate({**d, "stack": stack} if stack else d, with_max_batch=False)


def test_torchtitan_compiled_loss_from_2025_04():
    """Llama-3 8B, FSDP over 8 GPUs (bf16 units, fp32 loss), compile on, 1 x 8192 tokens,
    V = 128256: the eager loss holds 3 fp32 T x V buffers = 12 TV; the compiled one (PR #1033)
    the 16-bit logits and gradient plus two fp32 per row saved and one in its backward = 4 TV
    + 12 T (traced: tests/test_stack_trace_loss.py).
    T V = 8192 * 128256 = 1,050,673,152: 12 TV - (4 TV + 12 T) = 8,405,286,912 bytes."""
    d = {"model": "meta-llama/Meta-Llama-3-8B", "task": "train", "batch_size": 1,
         "seq_len": 8192, "precision": "bf16-mixed", "parallel": {"gpus": 8, "zero": 3},
         "options": ["compile"], "gpu": H100}
    old, new = _est(d, "torchtitan@2025-02"), _est(d, "torchtitan@2025-06")
    TV, T = 8192 * 128256, 8192
    assert mech.compiled_loss_bytes(2, T, 128256) == 4 * TV + 12 * T
    assert old.peak_allocated_bytes - new.peak_allocated_bytes == 12 * TV - (4 * TV + 12 * T) \
        == 8_405_286_912
    sec = new.to_dict()["stack"]
    mechs = {m["name"]: m for m in sec["mechanisms"]}
    assert sec["change_point"] == "2025-05" and mechs["compiled-loss"]["applied"]
    assert "#1033" in mechs["compiled-loss"]["source"]
    assert not mechs["loss-parallel-backward"]["applied"]      # no tensor parallelism here
    assert "nearest earlier" in new.notes[0]
    # without compile the loss is eager in both
    eager = {**d, "options": []}
    assert _est(eager, "torchtitan@2025-02").peak_allocated_bytes == \
        _est(eager, "torchtitan@2025-06").peak_allocated_bytes


def test_qlora_before_bitsandbytes_0_43_2_keeps_every_4bit_input():
    """Llama-2-7b QLoRA (q_proj, v_proj adapted), 1 x 512 tokens, MatMul4Bit saving A (until
    PR #1270, 2024-07). Unsloth computes in bf16 (Linear4bit's x.to(bf16) is x itself): the
    frozen o_proj (T x h), gate/up (one shared T x h) and down_proj (T x f) inputs, 2 B each,
    in 32 layers: 32 * (2 * 512 * 4096 * 2 + 512 * 11008 * 2) = 629,145,600 B. transformers'
    default fp32 compute dtype: each of the seven 4-bit linears saves its own fp32 cast,
    32 * 4 * 512 * (6 * 4096 + 11008) = 2,332,033,024 B."""
    d = {"model": "meta-llama/Llama-2-7b-hf", "task": "qlora", "batch_size": 1,
         "seq_len": 512, "gpu": A100}

    def fwd(stack):
        return _est(d, stack).footprint.phases["forward"]["activations"]
    assert fwd("unsloth@2024-06") - fwd("unsloth@2024-08") == 629_145_600
    assert fwd("hf@2024-06") - fwd("hf@2024-08") == 2_332_033_024
    old = _est(d, "hf@2024-06")
    assert {m["name"]: m["applied"] for m in old.to_dict()["stack"]["mechanisms"]} == \
        {"bnb-4bit-no-double-quant": True, "bnb-4bit-fp32-compute": True,
         "bnb-4bit-keeps-input": True, "bnb-int8-keeps-input": False, "t5-fp32-wo": False}


def test_hf_load_in_4bit_without_double_quant():
    """transformers' default BitsAndBytesConfig: 0.5 + 4/64 = 0.5625 B per 4-bit weight, not
    0.5 + 1/64 + 4/16384 with double quantisation. Llama-2-7b's block linears:
    32 * (4 * 4096^2 + 3 * 4096 * 11008) = 6,476,005,376 weights; difference
    6,476,005,376 * (0.5625 - 0.515869140625) = 301,981,696 bytes."""
    d = {"model": "meta-llama/Llama-2-7b-hf", "task": "qlora", "batch_size": 1,
         "seq_len": 512, "gpu": A100}
    assert mech.NF4_NO_DOUBLE_QUANT == 0.5625
    hf, plain = _est(d, "hf@2024-08"), _est(d, None)
    assert hf.components["weights"] - plain.components["weights"] == 301_981_696


def test_unsloth_offloads_block_inputs_and_fuses_the_loss():
    """Llama-3.1-8B LoRA, bf16, full checkpointing, 1 x 32768 tokens: hf keeps each block's
    16-bit input, 32 * 2 * 32768 * 4096 = 8,589,934,592 bytes more at forward end; Unsloth
    copies them to the host. Its fused loss keeps p T V instead of 3 fp32 T V buffers."""
    d = {"model": "meta-llama/Llama-3.1-8B", "task": "lora", "batch_size": 1,
         "seq_len": 32768, "checkpointing": "full", "gpu": H100}
    hf, us = _est(d, "hf"), _est(d, "unsloth")
    fwd = {k: e.footprint.phases["forward"]["activations"] for k, e in (("hf", hf), ("us", us))}
    assert fwd["hf"] - fwd["us"] == 32 * 2 * 32768 * 4096 == 8_589_934_592
    assert us.components["activations"] <= hf.components["activations"] / 2
    for ph in ("forward", "backward"):
        assert us.footprint.phases[ph]["activations"] <= \
            hf.footprint.phases[ph]["activations"] / 2
    assert mech.fused_ce_bytes(2, 10, 100) == 2 * 10 * 100 + 4 * 10


def _bn_saved(frozen_bn: bool) -> int:
    g = Graph(dt="f32", training=True)
    g.frozen_bn = frozen_bn
    x = g.input((3, 8, 8))
    y = g.conv(x, 16, 3, 1)          # trainable conv: y requires grad
    z = g.relu(g.bn(y))
    return g.curves([z]).at(1)["saved"]


def test_frozen_bn_keeps_no_input():
    # BN keeps its 16 x 8 x 8 fp32 input (4096 B); FrozenBatchNorm2d (x * scale + bias with
    # buffers) keeps nothing: the conv's saved input and the ReLU output are the same in both
    assert _bn_saved(False) - _bn_saved(True) == 16 * 8 * 8 * 4 == 4096


def test_detectron2_holds_less_than_mmdet_by_the_bn_inputs():
    d = {"model": "mmdet/faster-rcnn_r50_fpn", "task": "train", "batch_size": 2, "gpu": A100}
    mm, d2 = _est(d, "mmdet"), _est(d, "detectron2")
    diff = mm.components["activations"] - d2.components["activations"]
    assert diff > 0 and d2.peak_allocated_bytes < mm.peak_allocated_bytes
    # the graph unit above: each trainable-stage BN's input (a conv output nothing else
    # keeps) is what FrozenBatchNorm2d does not save; the frozen stem and stage 1 save none
    assert any("frozen-bn" in n for n in d2.notes)


def test_default_stack_changes_nothing():
    d = {"model": "meta-llama/Llama-2-7b-hf", "task": "qlora", "batch_size": 1,
         "seq_len": 512, "gpu": A100}
    a, b = _est(d, None), _est(d, "pytorch")
    assert a.to_dict() == b.to_dict() and "stack" not in a.to_dict()
    mm = {"model": "mmdet/faster-rcnn_r50_fpn", "task": "train", "batch_size": 2, "gpu": A100}
    assert _est(mm, None).peak_allocated_bytes == _est(mm, "mmdet").peak_allocated_bytes


def test_lora_on_the_output_projection():
    """lora.targets with lm_head (PEFT), output (torchtune), embed_out (GPT-NeoX): r (h + V)
    adapter parameters once. Llama-2-7b, r 8: 8 * (4096 + 32000) = 288,768 params, bf16
    adapters 577,536 B, AdamW states 2 x 577,536 = 1,155,072 B."""
    d = {"model": "meta-llama/Llama-2-7b-hf", "task": "lora", "batch_size": 1, "seq_len": 512,
         "gpu": A100}
    base = _est(d, None)
    for head in ("lm_head", "output", "embed_out"):
        e = _est({**d, "lora": {"targets": ["q_proj", "v_proj", head]}}, None)
        assert e.components["weights"] - base.components["weights"] == 577_536
        assert e.components["optimizer_states"] - base.components["optimizer_states"] == \
            1_155_072
        assert any("output projection" in n for n in e.notes)


def test_torchtitan_fsdp2_own_units_from_2025_07():
    """Llama-3 8B, FSDP over 8 GPUs: before PR #1094 the root unit (embeddings + norm + output)
    stays gathered in 16 bit; after it the embeddings are a unit of their own, resharded after
    forward, and only [norm, output] stays: 128256 x 4096 x 2 B = 1,050,673,152 bytes less
    at forward end and in backward."""
    d = {"model": "meta-llama/Meta-Llama-3-8B", "task": "train", "batch_size": 1,
         "seq_len": 8192, "precision": "bf16-mixed", "parallel": {"gpus": 8, "zero": 3},
         "options": ["compile"], "gpu": H100}
    old, new = _est(d, "torchtitan@2025-06"), _est(d, "torchtitan@2025-07")
    for ph in ("forward", "backward"):
        assert old.footprint.phases[ph]["temporary"] - new.footprint.phases[ph]["temporary"] \
            == 128256 * 4096 * 2 == 1_050_673_152
    assert "#1094" in {m["name"]: m["source"] for m in
                       new.to_dict()["stack"]["mechanisms"]}["fsdp2-own-units"]


def test_torchtitan_loss_parallel_holds_a_fourth_fp32_buffer():
    """Llama-3 8B, TP 8 with sequence and loss parallelism, 1 x 8192 tokens: torch's
    loss_parallel backward ((zeros_like(x) + exp(x)) * grad beside x) holds four fp32
    T x V/8 buffers, the eager loss three: one more, 4 * 8192 * 128256 / 8 = 525,336,576 B."""
    d = {"model": "meta-llama/Meta-Llama-3-8B", "task": "train", "batch_size": 1,
         "seq_len": 8192, "precision": "bf16-mixed", "parallel": {"gpus": 8, "tensor": 8},
         "options": ["loss-parallel", "sequence-parallel"], "gpu": H100}
    plain, titan = _est(d, None), _est(d, "torchtitan@2025-06")
    assert mech.loss_parallel_bytes(8192, 128256 // 8) == 16 * 8192 * 16032
    assert titan.footprint.phases["backward"]["activations"] - \
        plain.footprint.phases["backward"]["activations"] == 4 * 8192 * 128256 // 8 \
        == 525_336_576


def test_hf_qlora_computes_in_fp32_by_default():
    """transformers' BitsAndBytesConfig leaves bnb_4bit_compute_dtype fp32: a 4-bit linear's
    backward holds its weight dequantised to fp32 with fp32 input and output. Llama-2-7b,
    1 x 512 tokens, gate/up/down 4096 x 11008: 4 * 4096 * 11008 + 4 * 512 * (4096 + 11008) =
    211,288,064 B. A block's backward then holds (2 * 2 * 11008 / 4096 + 2 * 2) * 512 * 4096 =
    30,932,992 + 211,288,064 = 242,221,056 B, above the loss's 3 x 4 x 512 x 32000 =
    196,608,000 B, so backward activations grow by 45,613,056 B. Unsloth passes its dtype and
    double quantisation (llama.py BitsAndBytesConfig): no change there."""
    d = {"model": "meta-llama/Llama-2-7b-hf", "task": "qlora", "batch_size": 1,
         "seq_len": 512, "gpu": A100}
    hf, plain, us = _est(d, "hf@2024-08"), _est(d, None), _est(d, "unsloth")
    assert mech.fp32_dequant_bytes(4096, 11008, 512) == 211_288_064
    # the block's backward runs after the head's and the final norm's, whose saved tensors
    # (fp32 copy 4 + cast-back 2 + head input 2 B x 512 x 4096 = 16,777,216 B) are gone by
    # then (stage_activations head_side, H15): 242,221,056 - 16,777,216 against the loss's
    assert hf.footprint.phases["backward"]["activations"] - \
        plain.footprint.phases["backward"]["activations"] == 242_221_056 - 16_777_216 - 196_608_000
    assert us.components["weights"] == plain.components["weights"]


def test_litgpt_fused_qkv_views_and_zero_pad():
    """litgpt, 1 x 512 tokens, 16-bit. Llama-2-7b (32 key/value heads = query heads): the saved
    v view keeps qkv's q and k parts (2 x (4096 + 4096) B per token) and a LoRA on q and v
    zero-pads its T x (4096 + 4096) output with index_copy_, which keeps it (2 x 8192 B per
    token): 32 x 8 x 512 x 4096 = 536,870,912 B; adapting q, k and v needs no zero pad:
    268,435,456 B. Llama-3-8B (8 key/value heads, repeat_interleave copies v): only the zero
    pad, 32 x 2 x 512 x (4096 + 1024) = 167,772,160 B."""
    d = {"model": "meta-llama/Llama-2-7b-hf", "task": "lora", "batch_size": 1, "seq_len": 512,
         "gpu": A100}

    def fwd(stack, **kw):
        return _est({**d, **kw}, stack).footprint.phases["forward"]["activations"]
    assert fwd("litgpt") - fwd(None) == 536_870_912
    qkv = {"lora": {"targets": ["q_proj", "k_proj", "v_proj"]}}
    assert fwd("litgpt", **qkv) - fwd(None, **qkv) == 268_435_456
    l3 = {"model": "meta-llama/Meta-Llama-3-8B"}
    assert fwd("litgpt", **l3) - fwd(None, **l3) == 167_772_160


def test_torchtitan_cudnn_attention_recomputed_on_sm100_2025_05_to_12():
    """Llama-3 8B FSDP8, selective checkpointing, 1 x 8192 tokens on a B200 (compute
    capability 10.0): from PR #1196 (2025-05) cuDNN attention runs and, until PR #2095
    (2025-12) added it to the save list, its output (8192 x 4096 x 2 B) and fp32 log-sum-exp
    (8192 x 32 x 4 B) are recomputed, not kept, in each of 32 layers:
    32 * (2 * 8192 * 4096 + 4 * 32 * 8192) = 2,181,038,080 B. Not on an H100 (9.0)."""
    d = {"model": "meta-llama/Meta-Llama-3-8B", "task": "train", "batch_size": 1,
         "seq_len": 8192, "precision": "bf16-mixed", "parallel": {"gpus": 8, "zero": 3},
         "checkpointing": "selective", "gpu": "nvidia-b200-sxm"}

    def fwd(stack, **kw):
        return _est({**d, **kw}, stack).footprint.phases["forward"]["activations"]
    assert fwd("torchtitan@2025-04") - fwd("torchtitan@2025-06") == 2_181_038_080
    assert fwd("torchtitan@2025-12") == fwd("torchtitan@2025-04")
    assert fwd("torchtitan@2025-06", gpu=H100) == fwd("torchtitan@2025-04", gpu=H100)


def test_int8_lora_notes_the_outlier_bound():
    """LoRA on an LLM.int8 base (hf): the saved outlier columns are data-dependent, so the
    estimate gives their bound, not bytes: every column of every int8 linear's input, p = 2
    B each. Llama-3.1-8B: q, k, v (3 x 4096), o (4096), gate, up (2 x 4096), down (14336):
    2 x 38,912 = 77,824 B per token per block. No bytes added; the default stack says nothing."""
    d = {"model": "meta-llama/Llama-3.1-8B", "task": "lora", "precision": "int8",
         "batch_size": 1, "seq_len": 4096, "gpu": H100}
    hf = _est(d, "hf")
    note = [n for n in hf.notes if n.startswith("LLM.int8 outlier columns")]
    assert len(note) == 1 and "77,824 B per token per block" in note[0]
    assert mech.int8_outlier_bound(2, [4096] * 6 + [14336]) == 77_824
    assert not any("outlier columns" in n for n in _est(d, None).notes)
