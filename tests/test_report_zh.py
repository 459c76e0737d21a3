"""`report --lang zh` speaks Chinese in the strings a reader sees (issue 19.5 / 19.2): every
estimate note the golden table holds has a zh entry (35 kinds had none: the pre-Ampere stack,
the pipeline's stages, the serve refusals, the capability warnings, ...), the serving plan's
proposals too, lists are joined the Chinese way, and option labels keep their acronyms
('Tiled MLP', not 'Tiled mlp')."""
from __future__ import annotations

import json
import re
from pathlib import Path

from vramplan.i18n import gettext, translate_message
from vramplan.report import report

GOLDEN = Path(__file__).parent / "golden" / "estimates.jsonl"


def _latin_words(text: str) -> list[str]:
    """Runs of three or more English words: what a translated sentence should not hold
    (identifiers, code and values are single words or symbols)."""
    return re.findall(r"[A-Za-z]{3,}(?:[ ,;:()'-]+[A-Za-z]{3,}){2,}", text)


def test_every_golden_note_has_chinese():
    notes = {n for line in GOLDEN.read_text(encoding="utf-8").splitlines()
             for n in json.loads(line)["estimate"].get("notes") or []}
    left = sorted(n for n in notes if translate_message(n, "zh") == n)
    assert not left, f"{len(left)} notes without a zh entry, e.g. {left[:3]}"
    for n in notes:                    # a pattern's values are filled, none left as {name}
        assert not re.search(r"\{\w+\}", translate_message(n, "zh")), n


def test_pipeline_and_capability_notes_read_chinese():
    pp = ("pipeline 4 (1F1B): each stage holds 20 blocks and min(pp - i, micro-batches) "
          "micro-batches in flight; stage 0 the embedding, the last stage the head, logits and "
          "loss; per_gpu is the worst stage, stage 0 (every stage: the ranks section)")
    assert translate_message(pp, "zh").startswith("流水线 4 段（1F1B）：每段持有 20 个块")
    cap = ("bf16-mixed on nvidia-t4 (compute capability 7.5): no bf16 tensor cores before "
           "compute capability 8.0 (Transformer Engine support matrix); PyTorch runs bf16 "
           "matmuls emulated, far slower than fp16, and torch < 1.10 refuses. fp16 / fp16-mixed "
           "hold the same memory and use the tensor cores (the default precision on this GPU).")
    zh = translate_message(cap, "zh")
    assert zh.startswith("bf16-mixed 在 nvidia-t4（计算能力 7.5）上：") and not _latin_words(zh)


def test_report_zh_has_no_english_sentences():
    """The 70B pipeline plan and the 70B serve plan vLLM refuses to start: before, the
    pipeline note, the serve note and the serving proposals' titles stayed English."""
    plans = [
        {"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 1, "seq_len": 8192,
         "precision": "bf16-mixed", "gradient_accumulation": 8, "checkpointing": "selective",
         "parallel": {"gpus": 64, "tensor": 8, "pipeline": 4}, "options": ["sequence-parallel"],
         "gpu": "nvidia-h100-sxm5-80gb"},
        {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
         "parallel": {"gpus": 2, "tensor": 2}, "gpu": "nvidia-h100-sxm5-80gb"},
        {"model": "gpt2", "task": "train", "batch_size": 2, "seq_len": 256, "precision": "fp32",
         "gpu": "nvidia-t4"}]
    for plan in plans:
        md = report(plan, fmt="md", lang="zh")
        body = md.split("## 来源")[0]               # sources quote titles as published
        for line in body.splitlines():
            if line.startswith(("- **", "#", "**", "此方案的链接")):
                continue                             # how-to code, titles with model names
            text = re.sub(r"`[^`]*`", "", line)
            assert not _latin_words(text), (plan["task"], line[:160])


def test_room_to_grow_is_joined_the_chinese_way():
    md = report({"model": "gpt2", "task": "train", "batch_size": 2, "seq_len": 256,
                 "precision": "fp32", "gpu": "nvidia-t4"}, fmt="md", lang="zh")
    grow = next(ln for ln in md.splitlines() if ln.startswith("此 GPU 上还可增大"))
    assert "、" in grow and ", " not in grow and "批量最多" in grow


def test_tiled_mlp_label():
    from vramplan.ui.state.text import label_of
    assert label_of("tiled-mlp") == "Tiled MLP"        # was 'Tiled mlp'
    assert gettext("Tiled MLP", "zh") == "分块 MLP"


def test_html_report_charts_speak_chinese():
    """The savings chart's bars named each change in English (the tables above in Chinese),
    and the cost words' compile note, the serve chart's axis and title stayed English."""
    import html as h
    train = report({"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": 4,
                    "seq_len": 4096, "precision": "bf16-mixed", "gpu": "nvidia-rtx-4090"},
                   fmt="html", lang="zh")
    text = h.unescape(re.sub(r"<[^>]+>", " ", train.split("来源")[0]))
    assert "selective activation checkpointing" not in text
    assert "compile time once per job" not in text and "选择性激活检查点" in text
    serve = report({"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
                    "parallel": {"gpus": 2, "tensor": 2}, "gpu": "nvidia-h100-sxm5-80gb"},
                   fmt="html", lang="zh")
    assert "KV pool (tokens the engine holds)" not in h.unescape(serve)
    assert "KV 池（引擎容纳的 token 数）" in h.unescape(serve)
