"""The estimate's notes as a person reads them (issues 19.2 / 20.11, a browser walk of the
planner): one count takes the singular ('1 sequence', not '1 sequences'), a decode step's FLOPs
print in a unit that shows them ('7.5 GFLOP', not '0.0 TFLOP'), an inference plan never quotes
the LLM-training 40% MFU, and `report --lang zh` of gpt-oss-20b / Gemma 3 generate has no
English sentence left in the per-layer KV cache and shipped-weights notes."""
from __future__ import annotations

import re

import numpy as np
import pytest

from vramplan.estimate import estimate
from vramplan.i18n import translate_message
from vramplan.timing import efficiency_note
from vramplan.units import counted, format_flop

H100 = "nvidia-h100-sxm5-80gb"
OSS_GENERATE = {"model": "openai/gpt-oss-20b", "task": "generate", "batch_size": 1,
                "seq_len": 1024, "new_tokens": 256, "gpu": H100}
GEMMA_GENERATE = {"model": "google/gemma-3-12b-pt", "task": "generate", "batch_size": 1,
                  "seq_len": 1024, "new_tokens": 256, "gpu": H100}
OSS_SERVE = {"model": "openai/gpt-oss-20b", "task": "serve", "batch_size": 1, "gpu": H100,
             "serving": {"max_num_seqs": 1}}
GEMMA_FORWARD = {"model": "google/gemma-3-12b-pt", "task": "forward", "batch_size": 1,
                 "seq_len": 512, "gpu": H100}
LLAMA_TRAIN = {"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": 1,
               "seq_len": 512, "gpu": H100}


def _notes(plan: dict) -> list[str]:
    e = estimate(plan)
    return list((e if isinstance(e, dict) else e.to_dict())["notes"])


def _latin_words(text: str) -> list[str]:
    """Runs of three or more English words (as tests/test_report_zh.py reads a sentence)."""
    return re.findall(r"[A-Za-z]{3,}(?:[ ,;:()'-]+[A-Za-z]{3,}){2,}", text)


# ---- 1. one count, one noun ---------------------------------------------------------------

def test_counted_by_hand():
    assert counted(1, "sequence") == "1 sequence"
    assert counted(2, "sequence") == "2 sequences"
    assert counted(0, "token") == "0 tokens"
    assert counted(2048, "token") == "2,048 tokens"
    assert counted(np.int64(1), "token") == "1 token"
    assert counted(1.0, "request") == "1 request"
    assert counted(np.array([1, 4]), "sequence") == "1..4 (2 values) sequences"


@pytest.mark.parametrize("plan", [OSS_GENERATE, OSS_SERVE])
def test_batch_of_one_reads_singular(plan):
    """Batch 1 of an MoE model: one sequence, one token per step, one request; before, the
    notes said '(1 sequences, ...)', '1 tokens per step' and 'batch_size 1 requests'."""
    text = "\n".join(_notes(plan))
    assert not re.search(r"(?<![\d.,])1 (tokens|sequences|requests)\b", text), text
    assert "with 1 token per step" in text
    if plan["task"] == "generate":
        assert "(1 sequence, one token each)" in text
    else:
        assert "of batch_size's 1 request the engine runs 1" in text
        assert "holds 1 sequence of 131,072 tokens" in text


def test_singular_notes_still_read_chinese():
    """zh has no plural: '1 sequence' is looked up under the catalogue's plural text."""
    for n in _notes(OSS_GENERATE) + _notes(OSS_SERVE):
        if n.startswith(("generate bandwidth", "MoE bandwidth", "serve: 'batch'")):
            zh = translate_message(n, "zh")
            assert zh != n and not _latin_words(zh), zh
    moe = translate_message("MoE bandwidth: with 1 token per step, 4.00 of 32 experts per layer "
                            "are reached (uniform routing assumed: E x (1 - (1 - k/E)^tokens), "
                            "k = 4); only those experts' weights are read", "zh")
    assert moe.startswith("MoE 带宽：每步 1 个 token")


# ---- 2. FLOPs in a unit that shows them -----------------------------------------------------

def test_format_flop_by_hand():
    assert format_flop(4.2e14) == "420.0 TFLOP"
    assert format_flop(1e12) == "1.0 TFLOP"
    assert format_flop(2.5e11) == "250.0 GFLOP"        # below 1 TFLOP: GFLOP
    assert format_flop(9.9e10) == "99.0 GFLOP"
    assert format_flop(1.1e8) == "110.0 MFLOP"
    assert format_flop(7.5e9) == "7.5 GFLOP"
    assert format_flop(3e6) == "3.0 MFLOP"
    assert format_flop(None) == "–"


def test_decode_step_roofline_shows_its_flops():
    """gpt-oss-20b decodes one token at about 2 x 3.6B active parameters = 7.2 GFLOP (+ the
    attention over the context): the note read '0.0 TFLOP' before."""
    roof = next(n for n in _notes(OSS_GENERATE) if n.startswith("roofline:"))
    m = re.match(r"roofline: ([\d.,]+) GFLOP and", roof)
    assert m and 7.0 <= float(m.group(1)) <= 9.0, roof
    assert "0.0 TFLOP" not in roof


# ---- 3. an inference plan quotes no training MFU ----------------------------------------

@pytest.mark.parametrize("plan", [OSS_GENERATE, GEMMA_GENERATE, OSS_SERVE, GEMMA_FORWARD])
def test_inference_roofline_quotes_no_training_mfu(plan):
    roof = next(n for n in _notes(plan) if n.startswith("roofline:"))
    assert "40% of it" not in roof and "LLM training reaches" not in roof, roof
    assert "no measured FLOPs utilisation for LLM inference is known" in roof
    if ": memory-bound." in roof:         # a decode step: the memory floor is its floor
        assert "its floor is the memory floor" in roof


def test_decode_is_memory_bound_and_says_so():
    roof = next(n for n in _notes(OSS_GENERATE) if n.startswith("roofline:"))
    assert ": memory-bound." in roof and "its floor is the memory floor" in roof


def test_training_keeps_its_measured_mfu():
    roof = next(n for n in _notes(LLAMA_TRAIN) if n.startswith("roofline:"))
    assert "measured LLM training reaches about 40% of it" in roof
    assert efficiency_note("cnn", "memory").startswith("measured CNN training")
    assert "memory floor" not in efficiency_note("llm", "memory")


def test_vision_forward_quotes_no_training_figure():
    notes = _notes({"model": "torchvision/resnet50", "task": "forward", "batch_size": 8,
                    "gpu": H100})
    roof = next(n for n in notes if n.startswith("roofline:"))
    assert "CNN training" not in roof and "no measured FLOPs utilisation for inference" in roof


def test_inference_efficiency_notes_read_chinese():
    for plan in (OSS_GENERATE, GEMMA_FORWARD):
        roof = next(n for n in _notes(plan) if n.startswith("roofline:"))
        zh = translate_message(roof, "zh")
        assert zh.startswith("屋顶线模型") and "LLM 推理" in zh and not _latin_words(zh), zh


# ---- 4. the per-layer cache and shipped-weights notes in Chinese ------------------------------

@pytest.mark.parametrize("plan", [OSS_GENERATE, GEMMA_GENERATE])
def test_layer_and_weight_notes_read_chinese(plan):
    notes = [n for n in _notes(plan)
             if n.startswith(("per-layer KV cache", "weights as shipped"))]
    assert notes                                    # both models are hybrids
    for n in notes:
        zh = translate_message(n, "zh")
        assert zh != n and not _latin_words(zh), zh
        assert not re.search(r"\{\w+\}", zh), zh


def test_layer_note_parts_by_hand():
    zh = translate_message("per-layer KV cache: 12 full-attention layers grow by 2,048 B/token "
                           "each; 12 sliding-window layers keep at most 128 tokens", "zh")
    assert zh == "逐层 KV 缓存：12 个全注意力层每层每 token 增长 2,048 B；12 个滑动窗口层最多保留 128 个 token"
    shipped = translate_message("weights as shipped: MXFP4, e8m0 scale per 32 (4.25 bits per "
                                "weight with scales); kept in 16 bit: attention, router, "
                                "embeddings, lm_head, norms and biases", "zh")
    assert shipped == ("按发布格式存储的权重：MXFP4，每 32 个权重一个 e8m0 缩放因子（含缩放因子每个权重 "
                       "4.25 位）；保持 16 位的：注意力、路由器、嵌入层、lm_head、归一化层和偏置")


def test_one_new_token_reads_singular():
    """max_context's note at new_tokens 1: '1 new tokens' before; zh reads it all the same."""
    notes = _notes({**OSS_GENERATE, "new_tokens": 1})
    note = next(n for n in notes if n.startswith("max_context:"))
    assert "with 1 new token is " in note, note
    zh = translate_message(note, "zh")
    assert zh.startswith("max_context：") and "1 个新 token" in zh, zh


def test_page_details_print_flops_as_the_notes_do():
    """The page's bandwidth details printed FLOPs with its own SI formatter ('420 TFLOP'
    beside the note's '420.0 TFLOP'); it reads units.format_flop like the roofline note."""
    pytest.importorskip("ipywidgets")
    from vramplan.ui.widgets.details import fmt
    assert fmt("flops_per_step", 7.5e9) == "7.5 GFLOP"
    assert fmt("prefill_flops", 4.2e14) == "420.0 TFLOP"


@pytest.mark.parametrize("plan, want", [
    ({"task": "array", "gpu": "nvidia-rtx-2080-ti",
      "arrays": [{"dtype": "int64", "name": "x0", "shape": [100, 16]}]},
     "1 array x 1 copy; work buffers over the largest array"),
    ({"task": "volume", "gpu": H100, "batch_size": 2, "copies": 1,
      "resolution": [256, 256, 256]},
     "256x256x256 voxels x 1 ch float32 = 67,108,864 B per volume; 1 copy x batch 2"),
])
def test_model_free_notes_read_singular(plan, want):
    """256^3 voxels x 4 B = 67,108,864 B; before: '1 arrays x 1 copies', '1 copies x batch'."""
    notes = _notes(plan)
    assert want in notes, notes
    zh = translate_message(want, "zh")
    assert zh != want and not _latin_words(zh), zh


def test_render_note_reads_singular():
    notes = _notes({"task": "render", "gpu": H100, "swapchain_images": 1,
                    "render_targets": [{"name": "color", "format": "rgba8"}]})
    note = next(n for n in notes if n.startswith("render "))
    assert "1 target kind, 1 swapchain image;" in note, note
    zh = translate_message(note, "zh")
    assert zh != note and "1 种渲染目标" in zh, zh
