"""Tanh soft-capping of attention scores and of the final logits, read from config.json.

transformers 5.23.0 applies it in two places, for the model types whose modules read the keys:

* `models/gemma2/modeling_gemma2.py` `eager_attention_forward(..., softcap=
  config.attn_logit_softcapping)`: `attn_weights = attn_weights / softcap; attn_weights =
  torch.tanh(attn_weights); attn_weights = attn_weights * softcap` before the mask and the
  softmax (Gemma3Attention the same, `models/gemma3/modeling_gemma3.py`).
* `Gemma2ForCausalLM.forward` / `Gemma3ForCausalLM.forward`: `logits = logits /
  final_logit_softcapping; logits = torch.tanh(logits); logits = logits * final_logit_softcapping`.

Gemma2Config defaults both (`attn_logit_softcapping` 50.0, `final_logit_softcapping` 30.0);
Gemma3TextConfig defaults both to None (no capping). A config value of null turns it off.
What the capping keeps for backward is workloads/transformer/activations.py's.
"""
from __future__ import annotations

import math

from ..errors import ScenarioError

# model_type -> (attn_logit_softcapping, final_logit_softcapping) its config class defaults to
DEFAULTS: dict[str, tuple[float, float]] = {"gemma2": (50.0, 30.0), "gemma3_text": (0.0, 0.0)}


def _value(cfg: dict, key: str, default: float) -> float:
    if key not in cfg:
        return default
    v = cfg[key]
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ScenarioError("architecture", f"'{key}' must be a positive number or null, got {v!r}")
    return float(v)


def softcap_facts(cfg: dict, model_type: str) -> dict:
    """TransformerArch kwargs `attn_softcap` and `final_softcap` (0.0: none) of a config; only
    the model types whose transformers modules apply the keys read them."""
    if model_type not in DEFAULTS:
        return {}
    attn0, final0 = DEFAULTS[model_type]
    return {"attn_softcap": _value(cfg, "attn_logit_softcapping", attn0),
            "final_softcap": _value(cfg, "final_logit_softcapping", final0)}
