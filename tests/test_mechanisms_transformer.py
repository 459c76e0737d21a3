"""Transformer activation mechanisms read from the architecture, each with a value one can check
by hand: train-mode dropout masks from the config's probabilities (1 byte per element), and an
MLP activation whose backward reads its output (ReLU) keeping one f-wide tensor instead of two;
where the training peak sits: under full checkpointing the loss's backward runs before any block
is recomputed, and optimizer-in-backward steps one parameter at a time."""
from dataclasses import replace

import pytest

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


# GPT-2-class without dropout for the phase tests below: hidden 256, 4 blocks, vocab 50000
GPT2_BIG_VOCAB = dict(GPT2, vocab_size=50000, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def test_full_checkpointing_loss_backward_runs_before_any_recompute():
    """torch.utils.checkpoint recomputes a block when its backward starts, which is after the
    loss's and the head's backward: the backward's top beside the loss buffers is the kept block
    inputs and the head's inputs only, not one recomputed block."""
    sc = dict(_train(GPT2_BIG_VOCAB), checkpointing="full")
    fp = estimate(sc, with_max_batch=False).footprint
    T, h, V = 2 * 128, 256, 50000
    sbh = T * h
    kept = 4 * 2 * sbh                 # four bf16 block inputs
    # final-norm input, head input (the embedding output is the first kept block input)
    edges = (2 + 2) * sbh
    # GPT-2 keeps bf16 logits (no upcast): log_softmax out, its gradient, the input gradient and
    # the returned logits, 4 x 2 B x T x V; the head's weight gradient (2 B x V x h, tied) is
    # counted as a gradient beside them
    loss = 4 * 2 * T * V - 2 * V * h
    assert fp.phases["backward"]["activations"] == kept + edges + loss == 77_586_432
    assert fp.phases["backward"]["gradients"] == 2 * V * h


def test_optimizer_in_backward_step_temporary_is_one_parameter():
    """Optimizer in backward is one optimizer per parameter (torchtune, PyTorch's tutorial):
    foreach AdamW's exp_avg_sq temporary covers one tensor, the largest, not all of them."""
    sc = dict(_train(GPT2_BIG_VOCAB), optimizer="adamw", options=["optimizer-in-backward"])
    fp = estimate(sc, with_max_batch=False).footprint
    # largest parameter: the (tied) embedding, 50000 x 256, in bf16
    assert fp.phases["backward-end"]["temporary"] == 2 * 50000 * 256 == 25_600_000
    plain = estimate(dict(sc, options=[]), with_max_batch=False).footprint
    # one optimizer over all parameters: the temporary covers every one, 2 B x 16,090,624
    # (embedding 50000 x 256, positions 512 x 256, 4 blocks x 789,760, final norm 512)
    n = 50000 * 256 + 512 * 256 + 4 * 789_760 + 512
    assert plain.phases["optimizer-step"]["temporary"] == 2 * n == 32_181_248


@pytest.mark.slow
def test_full_checkpointing_backward_agrees_with_the_trace():
    """Llama-3.2-1B, pure bf16, full checkpointing, b4 x 1024, SGD: the peak is the loss's
    backward (fp32 CE buffers over 128256 vocab) beside the kept block inputs. The trace
    (fake tensors, torch.utils.checkpoint) gives 8.49 GiB; counting a recomputed block beside
    the loss buffers gave 8.92 GiB (+5.2 %)."""
    pytest.importorskip("torch")
    from vramplan.measure import trace as T
    sc = {"model": "meta-llama/Llama-3.2-1B", "task": "train", "batch_size": 4, "seq_len": 1024,
          "precision": "bf16", "optimizer": "sgd", "attention": "sdpa", "checkpointing": "full",
          "gpu": "nvidia-a100-sxm4-80gb"}
    t = T.trace(sc, timeline=False)
    e = estimate(sc, with_max_batch=False)
    assert t.to_dict()["trace"]["peak_phase"] == e.footprint.peak_phase == "backward"
    assert abs(e.peak_allocated_bytes / t.peak_allocated_bytes - 1) < 0.02


def test_gelu_new_keeps_three_more_ffn_wide_tensors():
    """transformers' gelu_new is Python arithmetic: tanh's output and both factors of the last
    product are kept besides x, three more f-wide tensors than a fused GELU; under autocast pow
    runs in fp32 (x's copy, tanh, 1 + tanh fp32; 0.5 x 16-bit: 14 B against the fused 2 B)."""
    arch = get_model("gpt2").arch
    assert arch.activation == "gelu_new" and arch.ffn / arch.hidden == 4
    fused = replace(arch, activation="gelu_pytorch_tanh")
    for p, mixed, extra in ((2, False, 3 * 2 * 4), (4, False, 3 * 4 * 4), (2, True, 3 * 4 * 4)):
        k = Kernels(p=p, mixed=mixed, attention="sdpa", dropout=False, compile=False)
        assert layer_coeffs(arch, k)[0] - layer_coeffs(fused, k)[0] == extra
    k = Kernels(p=2, mixed=False, attention="sdpa", dropout=False, compile=True)
    assert layer_coeffs(arch, k)[0] == layer_coeffs(fused, k)[0]   # inductor fuses the chain


def test_gelu_new_matches_the_transformers_trace_difference():
    """The scenario of tests/test_trace_real_modules.py's gelu_new test (GPT-2, 2 layers, n_embd
    128, 8 x 128 tokens, fp32): the trace of transformers' module keeps 2 x 3 fp32 tensors of
    tokens x 4h more with gelu_new than with gelu_pytorch_tanh; so does the estimate."""
    gpt2 = {"model_type": "gpt2", "n_embd": 128, "n_head": 4, "n_layer": 2, "n_positions": 128,
            "vocab_size": 1024, "activation_function": "gelu_new"}
    sc = {"architecture": gpt2, "task": "train", "batch_size": 8, "seq_len": 128,
          "precision": "fp32", "optimizer": "adamw", "attention": "sdpa",
          "gpu": "nvidia-a100-sxm4-80gb"}
    new = estimate(sc, with_max_batch=False).footprint
    old = estimate(dict(sc, architecture=dict(gpt2, activation_function="gelu_pytorch_tanh")),
                   with_max_batch=False).footprint
    assert new.peak_phase == old.peak_phase == "backward"
    tensor = 8 * 128 * 512 * 4
    assert new.components["activations"] - old.components["activations"] == 2 * 3 * tensor


def test_cross_attention_terms_by_hand():
    """HF T5's cross-attention block per decoder layer (t5-small: d_model 512, 8 heads x 64,
    bf16-mixed, dropout 0.1): at the decoder tokens its T5LayerNorm (fp32 input 4 + fp32 normed
    4), q's 16-bit input 2, q 2, the o input 2 and the dropout mask 1; SDPA adds its output 2 and
    the fp32 logsumexp 4 x 8 / 512 per hidden unit. At the encoder tokens each layer keeps its k
    and v (2 x 2) and k's and v's own 16-bit casts of the fp32 encoder output (2 x 2)."""
    from vramplan.workloads.transformer.encdec import cross_coeffs
    a = get_model("t5-small").arch
    k = Kernels(p=2, mixed=True, attention="sdpa", dropout=True, compile=False)
    assert cross_coeffs(a, k) == (8 + 2 + 2 + 2 + 4 * 8 / 512 + 2 + 1, 4 + 4, 0.0)
    # eager: no kernel output / lse; the b x heads x target x seq scores keep the fp32 softmax
    # output 4, the 1-byte dropout mask and the 16-bit probabilities PV reads 2
    ke = replace(k, attention="eager")
    assert cross_coeffs(a, ke) == (8 + 2 + 2 + 2 + 1, 8, 4 + 1 + 2)
    # LoRA on q, v: the frozen norm weight leaves the norm its fp32 input (4), no o input, and
    # only v's adapter casts the encoder output again
    keep = {"qkv": True, "o": False, "up": False, "down": False}
    assert cross_coeffs(a, ke, keep) == (4 + 2 + 2 + 1, 4 + 2, 7)


def test_decoder_runs_at_target_len():
    """T0-3B LoRA, batch 8, 100 encoder tokens, fp32, eager: the decoder blocks, the logits and
    the loss follow target_len (before 2026-12-01 all three gave 19.06 GiB)."""
    base = {"model": "bigscience/T0_3B", "task": "lora", "batch_size": 8, "seq_len": 100,
            "precision": "fp32", "attention": "eager", "lora": {"rank": 8, "targets": ["q", "v"]},
            "gpu": "nvidia-a100-sxm4-80gb"}
    got = [estimate(dict(base, target_len=t), with_max_batch=False) for t in (100, 16, 8)]
    act = [e.components["activations"] for e in got]
    assert act[0] > act[1] > act[2]
    # the logits' loss buffers alone (3 fp32 buffers of b x t x vocab 32128) shrink by
    # 3 x 4 x 8 x 84 x 32128 between 100 and 16 target tokens
    assert act[0] - act[1] > 3 * 4 * 8 * 84 * 32128
    assert any("decoder blocks at target_len (16)" in n for n in got[1].notes)


def test_lora_rmsnorm_keeps_no_normed_tensor():
    """RMSNorm's last step is `weight * normed` (HF T5LayerNorm / LlamaRMSNorm, torchtune): mul
    saves each factor for the other's gradient, so with the weight frozen (LoRA) the normed
    tensor (fp32 under autocast, 4 B) is not kept, only the fp32 input the variance reads.
    Two norms per block: 2 x 4 B per token and hidden unit (traced: t5-small LoRA, fp32 and
    bf16-mixed, tests/test_trace_real_modules.py)."""
    a = get_model("t5-small").arch
    k = Kernels(p=2, mixed=True, attention="sdpa", dropout=True, compile=False)
    every = {"qkv": True, "o": True, "up": True, "down": True}
    assert layer_coeffs(a, k)[0] - layer_coeffs(a, k, every)[0] == 2 * 4


def test_lora_on_a_full_precision_base_keeps_each_frozen_weight_cast():
    """bf16-mixed LoRA on an fp32 base: autocast caches only casts of weights that require
    grad, so each frozen linear casts its weight per call and saves the 16-bit copy for its
    input gradient: 2 B per block parameter at the end of forward. t5-small by hand: encoder
    6 x (4 x 512^2 + 2 x 512 x 2048), decoder 6 x (8 x 512^2 + 2 x 512 x 2048), the two
    relative-bias tables 2 x 32 x 8."""
    s = {"model": "t5-small", "task": "lora", "batch_size": 8, "seq_len": 512, "target_len": 16,
         "precision": "bf16-mixed", "optimizer": "adamw", "attention": "sdpa",
         "lora": {"rank": 8, "targets": ["q", "v"]}, "gpu": "nvidia-h100-sxm5-80gb"}
    e = estimate(s, with_max_batch=False)
    blocks = 6 * (4 * 512 ** 2 + 2 * 512 * 2048) + 6 * (8 * 512 ** 2 + 2 * 512 * 2048) + 2 * 32 * 8
    assert blocks == 44_040_704
    assert e.footprint.phases["forward"]["temporary"] == 2 * blocks
    # pure bf16 weights are used as they are: no casts
    pure = estimate(dict(s, precision="bf16"), with_max_batch=False)
    assert pure.footprint.phases["forward"]["temporary"] == 0


def test_encoder_decoder_flops_follow_target_len():
    """t5-small training, batch 8, 512 encoder / 16 decoder tokens: 6N + 3 attention per token,
    counted per encoder token. N: the encoder's 6 blocks (4 x 512^2 attention + 2 x 512 x 2048
    MLP), the cross k / v projections of 6 decoder layers (2 x 512^2), and for 16/512 of the
    tokens the decoder side (self q, k, v, o and cross q, o: 6 x 512^2, the MLP) and the head
    (32128 x 512). Attention: 2 x 1024 x (512 keys x 6 encoder layers + 16/512 x (16 + 512) keys
    x 6 decoder layers)."""
    e = estimate({"model": "t5-small", "task": "train", "batch_size": 8, "seq_len": 512,
                  "target_len": 16, "precision": "bf16-mixed", "optimizer": "adamw",
                  "gpu": "nvidia-h100-sxm5-80gb"}, with_max_batch=False)
    r = 16 / 512
    n = 6 * (4 * 512 ** 2 + 2 * 512 * 2048) + 6 * 2 * 512 ** 2 \
        + r * (6 * (6 * 512 ** 2 + 2 * 512 * 2048) + 32128 * 512)
    att = 2 * 1024 * (512 * 6 + r * (16 + 512) * 6)
    # the two relative-bias tables (2 x 32 x 8 parameters) are spread over the blocks: < 1e-5
    assert e.bandwidth["flops_per_step"] == pytest.approx(8 * 512 * (6 * n + 3 * att), rel=1e-5)
