"""LoRA / QLoRA: which linear groups of a transformer block carry adapters, and their shapes."""
from __future__ import annotations

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
