"""Transformers (decoders, encoders, encoder-decoders) as a workload family: the tasks each
kind handles. Encoders do not generate; the serving engine (vLLM-like KV pool) is modelled
for decoders only. The catalog config decides one scenario key: the precision of a checkpoint that ships
quantised (inference tasks; `shipped_defaults`). The LoRA target names and the modules each adapts
(`lora_modules`) are here, so that the scenario validation refuses names that adapt nothing."""
from __future__ import annotations

from ...vocab import TRANSFORMER_FAMILIES
from ..family import Family

TASKS = {
    "decoder": ("train", "lora", "qlora", "forward", "generate", "serve", "load"),
    "encoder": ("train", "lora", "qlora", "forward", "load"),
    "encoder-decoder": ("train", "lora", "qlora", "forward", "generate", "load"),
}
assert tuple(TASKS) == TRANSFORMER_FAMILIES

# ---- LoRA targets (moved from lora.py: the scenario validation reads them) -------------------

# Modules LoRA target names map to (HF Llama, GPT-2, BERT, T5, Falcon/NeoX/BLOOM names).
LORA_GROUPS = {
    "qkv": {"q_proj", "k_proj", "v_proj", "q", "k", "v", "query", "key", "value", "c_attn",
            "query_key_value", "qkv_proj", "wq", "wk", "wv", "qkv"},
    "o": {"o_proj", "o", "out_proj", "output_proj", "wo_attn", "attn.c_proj", "dense"},
    "up": {"gate_proj", "up_proj", "w1", "w3", "c_fc", "fc1", "wi", "wi_0", "wi_1",
           "dense_h_to_4h", "intermediate.dense", "gate_up_proj"},
    "down": {"down_proj", "w2", "fc2", "wo", "mlp.c_proj", "c_proj", "dense_4h_to_h",
             "output.dense"},
}


def lora_modules(arch, targets) -> tuple[dict, list[tuple[int, int]]]:
    """Which linear groups carry adapters, and the (in, out) of each adapted matrix per layer."""
    t = {x.lower() for x in targets}
    allin = bool(t & {"all-linear", "all_linear", "all"})
    keep = {g: allin or bool(t & names) for g, names in LORA_GROUPS.items()}
    h, q, kv = arch.hidden, arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    f = arch.moe_ffn if arch.is_moe else arch.ffn
    dims = {"q": (h, q), "k": (h, kv), "v": (h, kv), "o": (q, h),
            "gate": (h, f), "up": (h, f), "down": (f, h)}
    names = {"q": {"q_proj", "q", "query", "wq"}, "k": {"k_proj", "k", "key", "wk"},
             "v": {"v_proj", "v", "value", "wv"}, "o": LORA_GROUPS["o"],
             "gate": {"gate_proj", "w1", "wi_0"}, "up": {"up_proj", "w3", "c_fc", "fc1", "wi",
                                                        "wi_1", "dense_h_to_4h"},
             "down": LORA_GROUPS["down"]}
    fused = {"c_attn", "query_key_value", "qkv_proj", "qkv"}
    mats = []
    for m, (i, o) in dims.items():
        if m == "gate" and not arch.gated_mlp:
            continue
        if allin or t & names[m] or (m in "qkv" and t & fused):
            mats.append((i, o))
    return keep, mats


ALL_LINEAR = ("all-linear", "all_linear", "all")

# The output projection under each framework's name: PEFT / transformers `lm_head` (target
# "lm_head"; PEFT's "all-linear" leaves it out, peft/tuners/tuners_utils.py
# _maybe_include_all_linear_layers), torchtune `output` (`apply_lora_to_output`,
# torchtune/models/llama3/_component_builders.py lora_llama3), litgpt `lm_head` (`lora_head`,
# litgpt/lora.py Config), GPT-NeoX `embed_out`, Megatron-LM / ChatGLM `output_layer`.
HEAD_NAMES = ("lm_head", "output", "embed_out", "output_layer")


def lora_head(arch, targets) -> tuple[int, int] | None:
    """(in, out) = (hidden, vocab) of the output projection when a target adapts it (once per
    model, not per layer); None otherwise and for encoders (no LM head)."""
    if arch.kind == "encoder" or not {str(x).lower() for x in targets} & set(HEAD_NAMES):
        return None
    return arch.hidden, arch.vocab


def lora_target_names(arch) -> tuple[str, ...]:
    """The `lora.targets` names that adapt at least one module of this architecture (what
    `lora_modules` matches), sorted, then `all-linear`. A new adapted module (such as the
    output projection, `lm_head`) is added to `lora_modules` and so appears here."""
    names = set().union(*LORA_GROUPS.values())
    names |= {n for n in HEAD_NAMES if lora_head(arch, [n])}
    return tuple(sorted(n for n in names if lora_modules(arch, [n])[1] or lora_head(arch, [n]))) \
        + ("all-linear",)


def lora_target_check(spec, targets) -> tuple[list, tuple]:
    """(the targets that adapt no module of `spec`'s architecture, the valid names); names
    are matched case-insensitively, as `lora_modules` does."""
    arch = spec.arch
    bad = [t for t in targets
           if str(t).lower() not in ALL_LINEAR and not lora_modules(arch, [str(t)])[1]
           and lora_head(arch, [str(t)]) is None]
    return bad, lora_target_names(arch) if bad else ()


# inference tasks a checkpoint saved quantised runs as shipped (training converts it)
SHIPPED_FORMAT_TASKS = ("forward", "generate", "serve", "load")


def shipped_defaults(task: str, spec) -> dict:
    """A catalog model that ships quantised (config.json `quantization_config`, e.g. gpt-oss's
    MXFP4) defaults to its shipped format for inference; any other precision is a conversion
    (the estimate's notes say so). {} for every other model and task."""
    if spec is None or not spec.is_transformer:
        return {}
    out = whisper_window(task, spec.arch) if spec.config.get("model_type") == "whisper" else {}
    if task not in SHIPPED_FORMAT_TASKS:
        return out
    wf = spec.arch.weight_format
    return {**out, "precision": wf.precision} if wf is not None else out


def whisper_window(task: str, arch) -> dict:
    """Whisper's encoder reads one 30-second window, 1500 positions, whatever the audio
    (catalog/whisper.py): its seq_len; training labels up to max_target_positions (448)."""
    if not arch.extra.get("whisper") or task == "load":
        return {}
    out = {"seq_len": int(arch.max_positions)}
    if task in ("train", "lora", "qlora", "forward"):
        out["target_len"] = int(arch.extra["target_positions"])
    return out


FAMILY = Family(name="transformer", families=TRANSFORMER_FAMILIES, tasks=TASKS,
                lora_targets=lora_target_check, defaults=shipped_defaults)
