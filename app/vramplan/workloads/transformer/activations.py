"""Saved activations of one transformer block, derived term by term from the kernels used.

Units: bytes per token per hidden unit ("sbh" coefficients) for the linear terms and bytes per
attention-score element (batch x heads x s x s) for the eager score term. With p = 2, dropout,
no fp32 upcasts and eager attention this reproduces Korthikanti et al. 2022, sbh(34 + 5as/h);
with p = 4 it gives sbh(66 + 9as/h) (DESIGN.md). Each term names the tensor autograd keeps.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...catalog import hf_config
from . import moe_buffers

# OPT eager clamps masked scores with torch.max(scores, finfo.min): maximum() saves its 16-bit
# input, one more score-sized tensor (transformers OPTAttention, 4.2x-4.4x).
_SCORE_CLAMP = {"opt"}


@dataclass(frozen=True)
class Kernels:
    """What decides the saved bytes: dtypes, attention kernel, dropout, fusion."""
    p: int            # activation bytes (2 or 4)
    mixed: bool       # autocast: norms and softmax in fp32, fp32 residual stream
    attention: str    # eager | sdpa | flash
    dropout: bool     # training with the model's dropout active
    compile: bool
    float8: bool = False
    legacy: bool = False   # torch < 1.11: (log_)softmax keeps its input too (pytorch#64000)
    dense_moe: bool = True   # transformers' Llama 4 MoE: every token through every expert
    # (False: the stack routes top-k, stack mechanism topk-moe-routing; moe_buffers)


def upcasts_softmax(arch) -> bool:
    """Eager attention runs softmax in fp32 for 16-bit inputs: `TransformerArch.softmax_upcast`
    (a bare model_type: its HF class's behaviour, catalog.hf_config.upcasts_softmax)."""
    if isinstance(arch, str):
        return hf_config.upcasts_softmax(arch)
    return arch.softmax_upcast


def dropout_flags(arch, training: bool) -> tuple[bool, bool]:
    """(hidden dropout, attention dropout) active in a step: `TransformerArch.dropout`, the one
    decision the tracer's modules read too. A bare model_type is taken with its HF config
    class's dropout (catalog.hf_config.default_dropout): what a config that names none gets."""
    if isinstance(arch, str):
        hid, att = hf_config.default_dropout(arch) if training else (0.0, 0.0)
    else:
        hid, att = arch.dropout(training)
    return hid > 0, att > 0


# activations whose backward reads their output, not their input (PyTorch
# tools/autograd/derivatives.yaml: relu -> threshold_backward(grad, result, 0); gelu, silu and
# gelu_new/tanh forms read `self`): a non-gated MLP then saves one f-wide tensor, not two
_OUTPUT_SAVING = {"relu"}
# HF T5 / mT5 apply the hidden dropout inside the MLP too, between the activation (or the gated
# product) and wo (T5DenseActDense / T5DenseGatedActDense): one more f-wide 1-byte mask
_INNER_DROPOUT = {"t5", "mt5"}


def inner_dropout(arch) -> bool:
    """Whether the model drops inside its MLP, between the activation and the down projection."""
    return getattr(arch, "model_type", "") in _INNER_DROPOUT


# transformers' `gelu_new` (NewGELUActivation, GPT-2 / T5 v1.1 / Phi) is Python arithmetic,
# 0.5*x*(1+tanh(c*(x+0.044715*x**3))): besides x (pow's input) autograd keeps tanh's output and
# both factors of the last product (derivatives.yaml: tanh -> tanh_backward(grad, result); mul ->
# grad * other, grad * self), three more f-wide tensors than a fused GELU, which keeps x only.
# Under CUDA autocast pow runs in fp32, so x's saved copy, tanh and 1 + tanh are fp32 and
# 0.5 * x stays 16-bit: 4 + 4 + 2 + 4 bytes against the fused GELU's 2, again +3 x 4.
# Traced: tests/test_trace_real_modules.py (transformers GPT-2, gelu_new vs gelu_pytorch_tanh)
_COMPOSITE_GELU = {"gelu_new"}


def composite_gelu_bytes(arch, k: Kernels) -> float:
    """Extra bytes per MLP-width element a composite (Python arithmetic) GELU keeps; 0 when
    compiled (inductor fuses the chain and saves its input only) or for fused activations."""
    if getattr(arch, "activation", "") not in _COMPOSITE_GELU or k.compile:
        return 0.0
    return 3 * (4 if (k.mixed or k.p == 4) else k.p)


def saves_output(arch) -> bool:
    """Whether the MLP activation's backward reads its output (shared with the next linear's
    saved input), so fc1's output is not kept as well."""
    return getattr(arch, "activation", "") in _OUTPUT_SAVING


def _widths(arch) -> tuple[float, float, float]:
    """(q width, k/v width, active MLP width) relative to hidden."""
    h = arch.hidden
    qr = arch.heads * arch.head_dim / h
    kvr = arch.kv_heads * arch.head_dim / h
    if arch.mla:
        m = arch.mla
        qr = arch.heads * (m["qk_nope_head_dim"] + m["qk_rope_head_dim"]) / h
        kvr = qr
    f = arch.ffn / h
    if arch.is_moe:
        f = (arch.experts_per_token + arch.shared_experts) * arch.moe_ffn / h
        f += arch.shared_expert_ffn / h
    return qr, kvr, f


def score_bytes_saved(arch, k: Kernels) -> float:
    """Eager attention, training: bytes kept per score element. Softmax output in its dtype,
    the 1-byte dropout mask, the dropped (or cast) probabilities the PV matmul saves, and OPT's
    clamp input. Flash / SDPA: 0 (scores are recomputed in the backward kernel)."""
    if k.attention != "eager":
        return 0.0
    _, attn_drop = dropout_flags(arch, True) if k.dropout else (False, False)
    sdt = 4 if (k.mixed or k.p == 4 or upcasts_softmax(arch)) else k.p
    b = sdt + (1 if attn_drop else 0)
    if attn_drop or sdt != k.p:
        b += k.p
    if arch.model_type in _SCORE_CLAMP:
        b += k.p
    b += softcap_scores_saved(arch, k.p)
    if k.legacy:   # the softmax input: autocast's fp32 copy, else the scores' own dtype
        b += 4 if (k.mixed or k.p == 4) else k.p
    return b


def softcap_scores_saved(arch, p: int) -> int:
    """Bytes per score element attention logit soft-capping keeps (catalog/softcap.py): in
    transformers' eager_attention_forward (Gemma 2 / 3) `attn_weights / softcap` and `*
    softcap` are scalar ops that save no tensor; `torch.tanh` saves its output (derivatives.yaml:
    tanh -> tanh_backward(grad, result)), one more score tensor in the scores' dtype (the
    matmul's: 16-bit under autocast)."""
    return p if getattr(arch, "attn_softcap", 0.0) else 0


def softcap_logits_saved(arch, p: int) -> int:
    """Bytes per logit (token x vocabulary) final logit soft-capping keeps for backward:
    Gemma2ForCausalLM.forward's `torch.tanh(logits / cap)` saves its output in the lm_head
    output's dtype until the loss's backward reaches it (the division and the `* cap` save
    nothing)."""
    return p if getattr(arch, "final_softcap", 0.0) else 0


def score_bytes_inference(arch, p: int, mixed: bool) -> float:
    """Eager attention under no_grad: one layer's scores (input dtype) and the softmax output
    (fp32 where the model upcasts) are alive together."""
    sdt = 4 if (mixed or p == 4 or upcasts_softmax(arch)) else p
    return (4 if p == 4 else p) + sdt


# Gemma's RMSNorm (transformers 5.23 GemmaRMSNorm / Gemma2RMSNorm / Gemma3RMSNorm.forward:
# `output = self._norm(x.float()); output = output * (1.0 + self.weight.float()); return
# output.type_as(x)`) multiplies the fp32 normed tensor by the fp32 weight and casts after: its
# mul keeps the normed tensor in fp32 under any precision (Llama-style norms cast it first).
# GptOssRMSNorm.forward does the same (`(self.weight * hidden_states).to(input_dtype)` on the
# fp32 normed tensor): 8 B per element, counted with saved-tensor hooks on a bf16 input (Qwen3's
# Llama-style norm: 6).
_FP32_NORMED = {"gemma", "gemma2", "gemma3_text", "gemma3", "gpt_oss"}


def _norm_saved(arch, k: Kernels, lora_inputs, r: int, p: int) -> float:
    """Saved bytes per element of one norm (layer_coeffs)."""
    if k.compile:
        return r                           # fused: input + rstd, output recomputed
    if arch.norm == "rmsnorm":             # HF/torchtune RMSNorm: x.float() and the cast
        if lora_inputs is not None:        # normed tensor feed the weight multiply; a
            return 4                       # frozen weight (LoRA) needs no normed tensor:
        if arch.model_type in _FP32_NORMED:   # mul saves only the other factor's grad input
            return 4 + 4
        return 4 + (4 if k.mixed else p)
    return r                               # fused layer_norm saves its input


def extra_norms_saved(arch, k: Kernels, lora_inputs=None) -> float:
    """Bytes per token per hidden unit the norms beyond a block's two keep: Gemma 2 / 3's
    post_attention_layernorm and post_feedforward_layernorm (Gemma2DecoderLayer /
    Gemma3DecoderLayer.forward norm the attention and MLP outputs before each residual add:
    `TransformerArch.norms_per_layer` 4). Each takes a 16-bit projection output, so its
    x.float() is a new fp32 copy (4 B), and keeps the fp32 normed tensor (_norm_saved)."""
    extra = max(0, getattr(arch, "norms_per_layer", 2) - 2)
    if not extra or arch.kind != "decoder":
        return 0.0
    r = 4 if (k.mixed or k.p == 4) else k.p
    return extra * _norm_saved(arch, k, lora_inputs, r, k.p)


def _attention_saved(c: float, arch, k: Kernels, keep: dict, p: int, lin_mixed, qr, kvr
                     ) -> float:
    """c plus what the attention core and o_proj's input save (layer_coeffs; added in the
    walk's order, so the float sum is the same)."""
    if k.attention == "eager":
        kv_eff = qr if arch.kv_heads < arch.heads else kvr   # HF repeat_kv before matmul
        c += p * (qr + 2 * kv_eff)             # q, k for QK^T, v for PV
        c += lin_mixed * qr if keep["o"] else 0   # context (contiguous copy) into o_proj
    else:
        kv_eff = kvr if k.attention == "flash" else (qr if arch.kv_heads < arch.heads else kvr)
        c += p * (qr + 2 * kv_eff)             # q, k, v saved by the fused kernel
        c += p * qr                            # kernel output (needed by its backward)
        c += 4 * arch.heads / arch.hidden      # logsumexp, fp32 per head and token
        if not k.compile and keep["o"]:
            c += lin_mixed * qr                # transpose().contiguous() copy into o_proj
    return c


def _mlp_saved(c: float, arch, k: Kernels, keep: dict, p: int, f, hid_drop: bool) -> float:
    """c plus what the MLP's activation function and down projection's input save
    (layer_coeffs; added in the walk's order)."""
    if arch.gated_mlp:
        c += p * f * (3 if k.compile else 4)   # gate, act(gate), up, product (act recomputed
        if not keep["down"]:                   # when compiled); down input = product
            c -= p * f
    elif saves_output(arch):
        c += p * f                             # ReLU saves its output, which is fc2's input:
        # one tensor (derivatives.yaml: relu -> threshold_backward(grad, result))
        if hid_drop and inner_dropout(arch) and keep["down"]:
            c += p * f                         # unless a dropout sits between: fc2 saves the
            # dropped copy, a second f-wide tensor
    else:
        c += p * f * (1 if k.compile else 2)   # fc1 out (gelu input), gelu out (fc2 input)
        if not keep["down"] and not k.compile:
            c -= p * f
    return c


def layer_coeffs(arch, k: Kernels, lora_inputs: dict | None = None) -> tuple[float, float]:
    """(sbh coefficient, score coefficient) of the activations one block saves for backward.

    `lora_inputs` (LoRA/QLoRA on a frozen base) says which linear inputs are kept: a frozen
    linear needs only its weight for the input gradient, so its input is saved only when an
    adapter on it needs it. Norm, activation-function and attention tensors stay (the gradient
    flows through them)."""
    p, r = k.p, (4 if (k.mixed or k.p == 4) else k.p)
    hid_drop, _ = dropout_flags(arch, True) if k.dropout else (False, False)
    qr, kvr, f = _widths(arch)
    keep = lora_inputs or {"qkv": True, "o": True, "up": True, "down": True}
    lin = (1.0 if k.float8 else p)   # float8 linears save fp8 inputs (+ tiny scales)
    lin_mixed = 2 if k.mixed else lin

    c = 0.0
    # attention block
    c += _norm_saved(arch, k, lora_inputs, r, p)
    c += lin_mixed if keep["qkv"] else 0       # q/k/v input (16-bit autocast copy under AMP)
    c = _attention_saved(c, arch, k, keep, p, lin_mixed, qr, kvr)
    c += 1 if hid_drop else 0                  # dropout mask after attention
    # MLP block
    c += _norm_saved(arch, k, lora_inputs, r, p)
    c += lin_mixed if keep["up"] else 0        # fc1 / gate+up input
    c = _mlp_saved(c, arch, k, keep, p, f, hid_drop)
    c += composite_gelu_bytes(arch, k) * f     # gelu_new's tanh and product factors
    if hid_drop and inner_dropout(arch):
        c += f                                 # the inner dropout's 1-byte mask (the dropped
        # copy replaces the down input the walk counts above)
    c += extra_norms_saved(arch, k, lora_inputs)   # Gemma 2 / 3's post-norms
    if arch.is_moe:
        c += 2 * p * arch.experts_per_token    # token dispatch and combine copies
        c += moe_buffers.dense_routing_saved(arch, p, k.compile, keep["down"],
                                             k.dense_moe)   # Llama 4 under transformers
        c += moe_buffers.clamped_swiglu_saved(arch, p, k.compile)   # gpt-oss's gate
    c += 1 if hid_drop else 0                  # dropout mask after MLP
    return c, score_bytes_saved(arch, k)


def mlp_coeff(arch, k: Kernels, lora_inputs: dict | None = None) -> float:
    """The MLP module's share of layer_coeffs (its saved input, activation-function and
    down-projection tensors), bytes per token per hidden unit; the pre-MLP norm is not in it.
    Unsloth's tiled MLP keeps p in its place (stack_hooks)."""
    p = k.p
    hid_drop, _ = dropout_flags(arch, True) if k.dropout else (False, False)
    f = _widths(arch)[2]
    keep = lora_inputs or {"qkv": True, "o": True, "up": True, "down": True}
    lin_mixed = 2 if k.mixed else (1.0 if k.float8 else p)
    c = (lin_mixed if keep["up"] else 0) + _mlp_saved(0.0, arch, k, keep, p, f, hid_drop)
    c += composite_gelu_bytes(arch, k) * f
    return c + (f if hid_drop and inner_dropout(arch) else 0)


def selective_terms(arch, k: Kernels) -> tuple[float, float, float]:
    """Op-level selective recomputation (torchtitan 'op' SAC, torchtitan/distributed/
    activation_checkpoint.py: `_op_sac_save_list` holds aten.mm, the SDPA / flash kernels and
    `_c10d_functional.reduce_scatter_tensor`; the policy "saves output of all compute ops,
    except every second mm"), per token per hidden unit, split by how tensor parallelism
    divides them (sharding.tp_selective):
    (block input, the checkpoint's own saved input; saved outputs of the column-parallel
    matmuls (every other one of q, k, v | gate, up) with the attention kernel output and its
    fp32 logsumexp; saved outputs of row-parallel matmuls (o_proj, down): the mm order is q, k,
    v, o, gate, up, down, so the 1st, 3rd, 5th and 7th are kept: q, v, gate and down, or q, v,
    fc1 without a gated MLP). Norms, activations and scores are recomputed."""
    qr, kvr, f = _widths(arch)
    r = 4 if k.mixed else k.p
    outs = [qr, kvr, kvr, 1.0] + ([f, f, 1.0] if arch.gated_mlp else [f, 1.0])
    row = {3, len(outs) - 1}                   # o_proj and down / fc2: row-parallel
    saved = range(0, len(outs), 2)
    col = k.p * sum(outs[i] for i in saved if i not in row) + k.p * qr + 4 * arch.heads / arch.hidden
    return r, col, k.p * sum(outs[i] for i in saved if i in row)


def selective_coeff(arch, k: Kernels) -> float:
    """sbh coefficient op-level selective recomputation keeps per block on one GPU (the sum of
    selective_terms: block input + saved matmul outputs + attention output)."""
    qr, kvr, f = _widths(arch)
    r = 4 if k.mixed else k.p
    outs = [qr, kvr, kvr, 1.0] + ([f, f, 1.0] if arch.gated_mlp else [f, 1.0])
    return r + k.p * sum(outs[0::2]) + k.p * qr + 4 * arch.heads / arch.hidden


def inference_coeff(arch, p: int) -> float:
    """Forward under no_grad: the widest moment of one block (MLP: gate/up outputs, the product
    and the residual), bytes per token per hidden unit. Earlier blocks' tensors are freed."""
    qr, kvr, f = _widths(arch)
    mlp = p * f * (3 if arch.gated_mlp else 2) + 2 * p
    attn = p * (2 * qr + 2 * kvr) + 2 * p
    return max(mlp, attn)
