"""Transformers (decoders, encoders, encoder-decoders) as a workload family: the tasks each
kind handles. Encoders do not generate; the serving engine (vLLM-like KV pool) is modelled
for decoders only. The catalog config decides no scenario key (sequence lengths are the task's
defaults), so there is no defaults hook."""
from __future__ import annotations

from ...vocab import TRANSFORMER_FAMILIES
from ..family import Family

TASKS = {
    "decoder": ("train", "lora", "qlora", "forward", "generate", "serve", "load"),
    "encoder": ("train", "lora", "qlora", "forward", "load"),
    "encoder-decoder": ("train", "lora", "qlora", "forward", "generate", "load"),
}
assert tuple(TASKS) == TRANSFORMER_FAMILIES

FAMILY = Family(name="transformer", families=TRANSFORMER_FAMILIES, tasks=TASKS)
