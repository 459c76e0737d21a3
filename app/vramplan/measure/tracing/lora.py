"""LoRA for the traced modules: PEFT-like adapters on the targeted Linears, the base frozen.

torch is imported when this module is imported: import it lazily (measure/trace.py does).
"""
from __future__ import annotations

from torch import nn


class LoraLinear(nn.Module):
    """A frozen Linear plus a trainable low-rank update (PEFT's LoRA layer, dropout 0)."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, rank, bias=False)
        self.lora_B = nn.Linear(rank, base.out_features, bias=False)
        nn.init.zeros_(self.lora_B.weight)
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x)) * self.scale


_LORA_ALIASES = {"c_attn": ("q_proj", "k_proj", "v_proj"), "query": ("q_proj",), "key": ("k_proj",),
                 "value": ("v_proj",), "out_proj": ("o_proj",), "dense": ("o_proj",),
                 "c_proj": ("o_proj", "down_proj"), "c_fc": ("up_proj",), "fc1": ("up_proj",),
                 "fc2": ("down_proj",), "all-linear": ("q_proj", "k_proj", "v_proj", "o_proj",
                                                        "gate_proj", "up_proj", "down_proj")}


def apply_lora(model: nn.Module, rank=8, alpha=16, targets=("q_proj", "v_proj")) -> int:
    """Freeze `model`, wrap targeted Linears with LoRA adapters; returns how many were wrapped."""
    names = set()
    for t in targets:
        names.update(_LORA_ALIASES.get(t, (t,)))
    for p in model.parameters():
        p.requires_grad_(False)
    n = 0
    for mod in list(model.modules()):
        for child_name, child in list(mod.named_children()):
            if isinstance(child, nn.Linear) and child_name in names:
                setattr(mod, child_name, LoraLinear(child, rank, alpha))
                n += 1
    return n
