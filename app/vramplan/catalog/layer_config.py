"""Per-layer facts of a config.json: layer kinds, window, the linear / Mamba2 mixer, the
model-type extras the parameter count needs, and the shipped weight format.

Layer kinds, from each config class's defaults (transformers 4.5x):
* `layer_types` when the config lists it: "full_attention" / "attention" -> full,
  "sliding_attention" -> sliding (window `sliding_window`), "chunked_attention" -> chunked
  (window `attention_chunk_size`), "linear_attention" -> linear, "mamba" -> mamba.
* gemma2 (Gemma2Config): sliding where `(i + 1) % 2`; gemma3_text (Gemma3TextConfig): sliding
  where `(i + 1) % sliding_window_pattern` (default 6), full otherwise.
* qwen3_next (Qwen3NextConfig): linear where `(i + 1) % full_attention_interval` (default 4).
* llama4_text (Llama4TextConfig): `no_rope_layers[i]` 1 (RoPE) -> chunked, 0 (NoPE) -> full;
  default every `no_rope_layer_interval` (4)th layer NoPE.
* nemotron_h (NemotronHConfig, models/nemotron_h): `hybrid_override_pattern`, one character per
  block: "M" Mamba2, "*" attention (full), "-" an MLP-only block (no token mixer); its MoE
  blocks ("E") are not read.
* falcon_h1 (FalconH1Config, models/falcon_h1): `layers_block_type` is "hybrid" for every layer
  (its `layer_types`): attention and a Mamba2 mixer in parallel -> parallel_hybrid
  (catalog/mixers.py). Its Mamba2 width is `mamba_d_ssm` (else `mamba_expand * hidden_size`),
  `mamba_d_head` "auto" is that width // `mamba_n_heads`; the gated RMSNorm exists only with
  `mamba_rms_norm` (default False); out_proj's bias is `projectors_bias`. The muP multipliers
  (`*_multiplier(s)`) scale activations and have no memory of their own.
Other model types (Mistral's single `sliding_window` included) keep every layer full.
"""
from __future__ import annotations

from ..errors import ScenarioError
from .weight_formats import weight_format

_NAMES = {"full_attention": "full", "attention": "full", "sliding_attention": "sliding",
          "chunked_attention": "chunked", "linear_attention": "linear", "mamba": "mamba"}


def _bad(msg: str) -> ScenarioError:
    return ScenarioError("architecture", msg)


def _kinds(r, mt: str, layers: int) -> tuple:
    given = r.cfg.get("layer_types")
    if given is not None:
        if not isinstance(given, list) or len(given) != layers:
            raise _bad(f"'layer_types' must list one type per layer ({layers}), got {given!r}"[:200])
        out = []
        for t in given:
            if t not in _NAMES:
                raise _bad(f"'layer_types' has '{t}'; vramplan reads {', '.join(_NAMES)}")
            out.append(_NAMES[t])
        return tuple(out)
    if mt in ("gemma2", "gemma3_text"):
        n = 2 if mt == "gemma2" else r.int("sliding_window_pattern", default=6)
        return tuple("sliding" if (i + 1) % n else "full" for i in range(layers))
    if mt == "qwen3_next":
        n = r.int("full_attention_interval", default=4)
        return tuple("linear" if (i + 1) % n else "full" for i in range(layers))
    if mt == "falcon_h1":
        return ("parallel_hybrid",) * layers
    if mt == "nemotron_h":
        pattern = r.cfg.get("hybrid_override_pattern")
        kinds = {"M": "mamba", "*": "full", "-": "mlp"}
        if not isinstance(pattern, str) or len(pattern) != layers or set(pattern) - set(kinds):
            raise _bad(f"'hybrid_override_pattern' must give one of M, *, - per layer "
                       f"({layers}), got {pattern!r}"[:200])
        return tuple(kinds[c] for c in pattern)
    if mt == "llama4_text":
        nope = r.cfg.get("no_rope_layers") or [
            int((i + 1) % r.int("no_rope_layer_interval", default=4) != 0) for i in range(layers)]
        if not isinstance(nope, list) or len(nope) != layers:
            raise _bad(f"'no_rope_layers' must list 0 / 1 per layer ({layers})")
        return tuple("chunked" if x else "full" for x in nope)
    return ()


def _falcon_h1_mamba(r) -> dict:
    """FalconH1Mixer's dims (FalconH1Config.__post_init__ / FalconH1Mixer.__init__)."""
    hidden, heads = r.int("hidden_size"), r.int("mamba_n_heads", default=128)
    inner = r.int("mamba_d_ssm", default=None) or r.int("mamba_expand", default=2) * hidden
    if inner % heads:
        raise _bad(f"'mamba_n_heads' ({heads}) must divide the Mamba2 width "
                   f"'mamba_d_ssm' ({inner})")
    head_dim = inner // heads if r.cfg.get("mamba_d_head", "auto") == "auto" \
        else r.int("mamba_d_head")
    if head_dim * heads != inner:
        raise _bad(f"'mamba_d_head' ({head_dim}) x 'mamba_n_heads' ({heads}) must equal "
                   f"'mamba_d_ssm' ({inner})")
    return {"type": "mamba", "heads": heads, "head_dim": head_dim,
            "state": r.int("mamba_d_state", default=256),
            "groups": r.int("mamba_n_groups", default=1),
            "kernel": r.int("mamba_d_conv", default=4),
            "conv_bias": r.bool("mamba_conv_bias", True),
            "proj_bias": r.bool("mamba_proj_bias", False),
            "out_bias": r.bool("projectors_bias", False),
            "gated_norm": r.bool("mamba_rms_norm", False)}


def _mixer(r, kinds: tuple) -> dict | None:
    if "parallel_hybrid" in kinds:
        return _falcon_h1_mamba(r)
    if "linear" in kinds:
        return {"type": "linear", "nk": r.int("linear_num_key_heads"),
                "nv": r.int("linear_num_value_heads"), "dk": r.int("linear_key_head_dim"),
                "dv": r.int("linear_value_head_dim"),
                "kernel": r.int("linear_conv_kernel_dim", default=4)}
    if "mamba" in kinds:   # Granite 4.0-H names (mamba_*), else Nemotron-H's
        hidden = r.int("hidden_size")
        heads = r.int("mamba_n_heads", "mamba_num_heads")
        expand = r.int("mamba_expand", "expand", default=2)
        return {"type": "mamba", "heads": heads,
                "head_dim": r.int("mamba_d_head", "mamba_head_dim",
                                  default=expand * hidden // heads),
                "state": r.int("mamba_d_state", "ssm_state_size", default=128),
                "groups": r.int("mamba_n_groups", "n_groups", default=1),
                "kernel": r.int("mamba_d_conv", "conv_kernel", default=4),
                "conv_bias": r.bool("mamba_conv_bias", r.bool("use_conv_bias", True)),
                "proj_bias": r.bool("mamba_proj_bias", r.bool("use_bias", False))}
    return None


def extras(r, mt: str) -> dict:
    """Model-type details the parameter count needs (each module cited)."""
    if mt == "gpt_oss":   # GptOssAttention: o_proj bias + sinks; GptOssExperts / TopKRouter biases
        return {"o_bias": r.bool("attention_bias", True), "attention_sinks": True,
                "expert_bias": True, "router_bias": True}
    if mt == "qwen3_next":  # Qwen3NextAttention: q_proj emits queries and an output gate
        return {"qk_norm": True, "attn_output_gate": r.bool("attn_output_gate", True)}
    if mt == "gemma3_text":  # Gemma3Attention: q_norm / k_norm over head_dim
        return {"qk_norm": True}
    if mt == "glm4_moe":  # Glm4MoeAttention: q_norm / k_norm when use_qk_norm (GLM-4.5, not
        # -Air); Glm4MoeTopkRouter: weight + e_score_correction_bias (transformers glm4_moe)
        return {"qk_norm": r.bool("use_qk_norm", False), "router_bias_correction": True}
    if mt == "falcon_h1":  # FalconH1Attention: o_proj biased like q / k / v (attention_bias)
        return {"o_bias": r.bool("attention_bias", False)}
    if mt == "granitemoehybrid":  # GraniteMoeSharedMLP has no gate
        return {"shared_gate": False}
    if mt in ("olmoe", "olmo2"):  # OlmoeAttention / Olmo2Attention: q_norm over all query
        # heads (heads x head_dim), k_norm over the key heads, not per head
        return {"qk_norm": True, "qk_norm_full": True}
    return {}


def layer_facts(r, mt: str, layers: int) -> dict:
    """dataclasses.replace kwargs for a TransformerArch read from `r` (a hf_config._Reader)."""
    kinds = _kinds(r, mt, layers)
    window = 0
    if "sliding" in kinds:
        window = r.int("sliding_window")
    elif "chunked" in kinds:
        window = r.int("attention_chunk_size")
    out = {"layer_kinds": kinds if any(k != "full" for k in kinds) else (),
           "window": window, "mixer": _mixer(r, kinds),
           "weight_format": weight_format(r.cfg.get("quantization_config"))}
    return out
