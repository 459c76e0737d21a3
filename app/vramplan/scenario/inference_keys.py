"""Readers of the inference keys `speculative`, `offload_layers` and `offload_experts` (rows of
the key table, `keys.py`; the mechanisms are workloads/transformer/speculative.py and
offload_inference.py).

`speculative` follows vLLM's `speculative_config` (vllm/config/speculative.py): `method` one of
draft_model (a smaller model of the same tokenizer, `model` its catalog id), eagle / eagle3
(a one-layer EAGLE head; `model` optional: the head's own config is not in the catalog, so
its shape is the target's, see speculative.py), mtp (the target's own multi-token-prediction
layers: DeepSeek-V3 / R1 `num_nextn_predict_layers`, GLM-4.5, Qwen3-Next
`mtp_num_hidden_layers`) and ngram (prompt lookup: no weights); `num_speculative_tokens` the
tokens proposed per step (vLLM requires it except for mtp, where it defaults to the model's
MTP layers).
"""
from __future__ import annotations

from typing import Any

from ..errors import ScenarioError, VramplanError
from ..readers import read_choice, read_int, read_obj

SPEC_METHODS = ("draft_model", "eagle", "eagle3", "mtp", "ngram")
MAX_SPEC_TOKENS = 64


def read_speculative(v: Any) -> dict | None:
    """{"method", "model", "num_speculative_tokens"} normalised (None: no speculation)."""
    if v is None:
        return None
    d = read_obj("speculative", v, ("method", "model", "num_speculative_tokens"),
                 required=("method",))
    method = read_choice("speculative.method", d["method"], SPEC_METHODS, fold_case=True)
    out: dict = {"method": method}
    model = d.get("model")
    if method == "draft_model":
        if model is None:
            raise ScenarioError("speculative.model", "method 'draft_model' needs the draft's "
                                "catalog id (e.g. meta-llama/Llama-3.2-1B)")
        from ..catalog import get_model   # the catalog resolves the id (UnknownIdError lists)
        try:
            spec = get_model(model)
        except VramplanError as exc:   # an unknown or ambiguous id, named under this key
            raise ScenarioError("speculative.model", str(exc)) from None
        if spec.family != "decoder":
            raise ScenarioError("speculative.model", f"'{spec.id}' is a {spec.family} model; "
                                "a draft model must be a decoder")
        out["model"] = spec.id
    elif model is not None:
        raise ScenarioError("speculative.model", f"applies to method 'draft_model' only "
                            f"(method '{method}')")
    n = d.get("num_speculative_tokens")
    if n is None and method != "mtp":
        raise ScenarioError("speculative.num_speculative_tokens", "is required for method "
                            f"'{method}' (vLLM's speculative_config requires it; mtp defaults "
                            "to the model's MTP layers)")
    if n is not None:
        out["num_speculative_tokens"] = read_int("speculative.num_speculative_tokens", n, 1,
                                                 MAX_SPEC_TOKENS, whole_floats=True)
    return out


def check_offload_experts(arch, n: int) -> None:
    """`offload_experts` N against the model (the catalog architecture): the model must route
    to experts and have N MoE layers (llama.cpp --n-cpu-moe N keeps the first N MoE layers'
    experts in host memory). The scenario pass (build.py) and the estimate
    (workloads/transformer/offload_inference._check) both refuse through this one rule."""
    if not n:
        return
    if arch is None or not getattr(arch, "is_moe", False):
        kind = getattr(arch, "model_type", None) or "this model"
        raise ScenarioError("offload_experts", f"'{kind}' has no routed experts; use "
                            "offload_layers")
    if n > arch.moe_layers:
        raise ScenarioError("offload_experts", f"{n} exceeds the model's {arch.moe_layers} MoE "
                            "layers")
