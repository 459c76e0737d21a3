"""Transformer activation mechanisms read from the architecture, each with a value one can check
by hand: train-mode dropout masks from the config's probabilities (1 byte per element), and an
MLP activation whose backward reads its output (ReLU) keeping one f-wide tensor instead of two."""
from dataclasses import replace

from vramplan.catalog import get_model
from vramplan.estimate import estimate
from vramplan.workloads.transformer.activations import Kernels, layer_coeffs

# a small GPT-2-class config (HF GPT2Config keys): 4 layers, hidden 256, 4 heads, FFN 1024
GPT2 = {"model_type": "gpt2", "n_layer": 4, "n_embd": 256, "n_head": 4, "vocab_size": 1000,
        "n_positions": 512}


def _train(arch: dict, attention="sdpa") -> dict:
    return {"architecture": arch, "task": "train", "batch_size": 2, "seq_len": 128,
            "precision": "bf16", "optimizer": "sgd", "attention": attention,
            "checkpointing": "none", "gpu": "nvidia-a100-sxm4-80gb"}


def test_hidden_dropout_masks_are_one_byte_per_element():
    on = estimate(_train(dict(GPT2, resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1)),
                  with_max_batch=False)
    off = estimate(_train(dict(GPT2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)),
                   with_max_batch=False)
    # two hidden masks per block (after attention, after the MLP) and one on the embedding
    # output, 1 B x b x s x h each; under sdpa the attention-probability dropout keeps no mask
    # (the fused kernel keeps its RNG state only)
    masks = (2 * 4 + 1) * 1 * 2 * 128 * 256
    assert on.components["activations"] - off.components["activations"] == masks == 589824
    assert any("train-mode dropout from the config" in n for n in on.notes)
    assert any("no dropout masks kept" in n for n in off.notes)


def test_attention_dropout_alone_keeps_score_masks_under_eager():
    """A config with only attention dropout (hidden 0) still keeps the eager score masks:
    1 B per score element b x heads x s x s, plus the dropped probabilities (2 B) PV saves."""
    att = estimate(_train(dict(GPT2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.1), "eager"),
                   with_max_batch=False)
    none = estimate(_train(dict(GPT2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0), "eager"),
                    with_max_batch=False)
    scores = 2 * 4 * 128 * 128        # b x heads x s x s per layer
    # GPT-2 keeps bf16 softmax (no upcast): mask 1 B + dropped probabilities 2 B per element,
    # in all 4 layers; the backward temporaries do not depend on dropout
    assert att.components["activations"] - none.components["activations"] == \
        4 * scores * (1 + 2) == 1572864


def test_relu_mlp_saves_one_ffn_wide_tensor():
    """OPT's ReLU: threshold_backward reads the output, which fc2 saves anyway, so the block
    keeps p x f bytes per token-hidden unit for the MLP interior instead of 2 p x f (GELU)."""
    arch = get_model("facebook/opt-350m").arch
    k = Kernels(p=2, mixed=False, attention="sdpa", dropout=True, compile=False)
    relu, _ = layer_coeffs(arch, k)
    gelu, _ = layer_coeffs(replace(arch, activation="gelu"), k)
    assert arch.ffn / arch.hidden == 4
    assert gelu - relu == 2 * 4 == 8
    # the whole OPT-350m block: norms 2+2, q/k/v input 2, q/k/v 6, sdpa out 2, o input 2,
    # lse 4 x 16 / 1024, two masks 1+1, fc1 input 2, relu out 8 -> 28 + 1/16
    assert relu == 28 + 4 * 16 / 1024


def test_config_dropout_decides_not_the_model_type():
    """OPT with dropout 0 in its config (HF OPTConfig defaults to 0.1) keeps no masks."""
    arch = get_model("facebook/opt-350m").arch
    k = Kernels(p=2, mixed=False, attention="sdpa", dropout=True, compile=False)
    with_drop, _ = layer_coeffs(arch, k)
    no_drop, _ = layer_coeffs(replace(arch, hidden_dropout=0.0), k)
    assert with_drop - no_drop == 2


def _qwen(**kw) -> dict:
    d = {"model": "Qwen/Qwen2.5-0.5B", "task": "train", "batch_size": 1, "seq_len": 1024,
         "precision": "bf16", "optimizer": "adamw", "attention": "flash",
         "checkpointing": "none", "options": ["chunked-loss"], "gpu": "nvidia-a100-sxm4-80gb"}
    d.update(kw)
    return d


def test_output_projection_gradient_is_live_from_the_start_of_backward():
    """Backward starts at the loss, so the (tied) output projection's weight gradient, vocab x
    hidden in the parameter dtype, exists at the backward peak when gradients are freed
    between steps; with gradient accumulation all gradients are there anyway."""
    est = estimate(_qwen(), with_max_batch=False)
    arch = get_model("Qwen/Qwen2.5-0.5B").arch
    assert arch.tied_embeddings and (arch.vocab, arch.hidden) == (151936, 896)
    assert est.footprint.phases["backward"]["gradients"] == 2 * 151936 * 896 == 272269312
    acc = estimate(_qwen(gradient_accumulation=2), with_max_batch=False)
    assert acc.footprint.phases["backward"]["gradients"] == \
        acc.footprint.phases["optimizer-step"]["gradients"]


def test_t5_inner_dropout_keeps_a_mask_and_the_dropped_copy():
    """HF T5 (v1.0: ReLU, d_ff 4 x d_model) drops between the activation and wo: the ReLU output
    (saved by relu), the 1-byte mask and the dropped copy wo saves, 2 p f + f, instead of the
    one ReLU output p f a dropout-free config keeps."""
    arch = get_model("t5-small").arch
    assert (arch.activation, arch.gated_mlp, arch.ffn // arch.hidden) == ("relu", False, 4)
    k = Kernels(p=4, mixed=False, attention="eager", dropout=True, compile=False)
    with_drop, _ = layer_coeffs(arch, k)
    no_drop, _ = layer_coeffs(replace(arch, hidden_dropout=0.0, attention_dropout=0.0), k)
    # MLP interior 4 x 4 + 4 + 4 x 4 = 36 vs 16; plus the two hidden masks (2)
    assert with_drop - no_drop == (36 - 16) + 2 == 22
