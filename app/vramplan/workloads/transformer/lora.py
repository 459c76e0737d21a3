"""LoRA / QLoRA: which linear groups of a transformer block carry adapters, and their shapes.

The tables and `lora_modules` live in `family.py` (the families stage), so that the scenario
validation, an earlier stage than the footprints, refuses target names that adapt nothing
(`lora_target_check`); this module keeps the names the footprints import."""
from __future__ import annotations

from .family import LORA_GROUPS, lora_modules, lora_target_names

__all__ = ["LORA_GROUPS", "lora_modules", "lora_target_names"]
