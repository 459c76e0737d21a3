"""The nested objects of a scenario: `lora`, `parallel` (the layout type of
`vramplan.parallel`) and `serving`. Plain data; their defaults are the key table's
(`lora.rank`, `serving.kv_cache_dtype`, ...) and `build.py` reads them."""
from __future__ import annotations

from dataclasses import dataclass

from ..parallel import ParallelConfig
from .keys import key

__all__ = ["LoraConfig", "ParallelConfig", "ServingConfig"]


@dataclass(frozen=True)
class LoraConfig:
    """LoRA adapters: rank r, scaling alpha, the module names adapted, adapter-input dropout
    (PEFT keeps a dropped copy of each adapted input when dropout > 0)."""
    rank: int = key("lora.rank").default
    alpha: float = key("lora.alpha").default
    targets: tuple[str, ...] = tuple(key("lora.targets").default)
    dropout: float = key("lora.dropout").default

    def to_dict(self) -> dict:
        return {"rank": self.rank, "alpha": self.alpha, "targets": list(self.targets),
                "dropout": self.dropout}


@dataclass(frozen=True)
class ServingConfig:
    """A serving engine (vLLM-like) that pre-allocates a KV pool: the pool is
    gpu_memory_utilization x GPU memory less weights, activations and overheads."""
    gpu_memory_utilization: float = key("serving.gpu_memory_utilization").default
    max_num_seqs: int = 256
    max_model_len: int = 4096
    max_num_batched_tokens: int = 8192
    kv_cache_dtype: str = key("serving.kv_cache_dtype").default
    cuda_graphs: bool = key("serving.cuda_graphs").default

    KEYS = ("gpu_memory_utilization", "max_num_seqs", "max_model_len", "max_num_batched_tokens",
            "kv_cache_dtype", "cuda_graphs")

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.KEYS}
