"""Encoder-decoder training (HF T5 / mT5, `T5ForConditionalGeneration`): the encoder stack at
seq_len tokens, the decoder stack at target_len tokens with a cross-attention block per layer.

Per decoder layer (transformers `T5Block`: self-attention, `T5LayerCrossAttention`, MLP):
* self-attention and the MLP are the walk of `activations.layer_coeffs` at target_len tokens
  (eager scores over target_len x target_len);
* cross-attention: its norm, the q projection's input, q, the attention output (SDPA kernel
  output and logsumexp, or the eager context copy), the o projection's input and the dropout
  mask at target_len tokens; k and v are projected from the encoder output, so each layer keeps
  its own k and v at seq_len tokens (`T5Attention.forward`: `self.k(current_states)` with
  `current_states = key_value_states`); eager scores are b x heads x target_len x seq_len with the
  same softmax / dropout terms as self-attention (`eager_attention_forward`);
* the encoder output (the final norm's output after dropout) is one tensor, the input every
  layer's k / v projection saves; under autocast each projection saves its own 16-bit cast of it
  (autocast caches casts of leaf parameters only), so a kept k / v input is a seq_len-token
  tensor per projection.
The LM head, its input and the loss are at target_len tokens (`labels` are decoder tokens).
T5's relative position bias is computed once per stack (layer 0's `compute_bias`, 1 x heads x
s x s, fp32) and passed to every later layer: under eager attention it is only added to the
scores (the add saves nothing), so no per-layer, per-sequence bias buffer is kept; under SDPA
each layer's contiguous mask copy (batch 1) is saved by the kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...vec import vmax
from .activations import Kernels, _widths, dropout_flags, score_bytes_saved
from .sharding import _norm_coeff


@dataclass(frozen=True)
class Stacks:
    enc_layer: float      # bytes one encoder block keeps (seq_len tokens)
    dec_layer: float      # bytes one decoder block keeps (target_len tokens + cross k/v)
    edges: float          # embeddings, final norms, the encoder output, the head input


def cross_coeffs(arch, k: Kernels, keep: dict | None = None) -> tuple[float, float, float]:
    """(bytes per decoder token per hidden unit, per encoder token per hidden unit, per cross
    score element) one decoder layer's cross-attention block keeps for backward."""
    lora = keep is not None
    keep = keep or {"qkv": True, "o": True, "up": True, "down": True}
    p = k.p
    lin = 1.0 if k.float8 else p
    lin_mixed = 2 if k.mixed else lin
    hid_drop, _ = dropout_flags(arch, True) if k.dropout else (False, False)
    qr, kvr, _ = _widths(arch)
    dec = _norm_coeff(arch, k)                 # the cross block's norm (a frozen RMSNorm
    if lora and arch.norm == "rmsnorm" and not k.compile:   # weight: its fp32 input only,
        dec = 4.0                              # as activations.layer_coeffs)
    dec += lin_mixed if keep["qkv"] else 0     # q projection input
    dec += p * qr                              # q (QK^T or the fused kernel)
    if k.attention != "eager":
        dec += p * qr + 4 * arch.heads / arch.hidden   # kernel output, logsumexp
    if keep["o"] and not (k.compile and k.attention != "eager"):
        dec += lin_mixed * qr                  # context copy into o
    dec += 1 if hid_drop else 0                # dropout mask after the block
    enc = 2 * p * kvr                          # this layer's k and v over the encoder tokens
    if keep["qkv"] and k.mixed:                # k's and v's own 16-bit casts of the encoder
        enc += lin_mixed * (1 if lora else 2)  # output (LoRA: the adapted one's, PEFT lora_A)
    return dec, enc, score_bytes_saved(arch, k)


def train_stacks(ctx, k: Kernels, keep: dict | None, c: float, sc_coef: float, tp: int,
                 sp: bool) -> Stacks:
    """One encoder block, one decoder block and the edge tensors of both stacks (bytes, per
    rank under `tp`-way tensor parallelism). `c` / `sc_coef` are the block walk's coefficients
    already divided for the layout (sharding.tp_layer); the cross block splits by heads like
    the rest of attention, its norm and mask stay whole unless sequence parallel."""
    a, b, s, t = ctx.arch, ctx.b, ctx.s, ctx.t
    h = a.hidden
    Te, Td = ctx.tokens(s) * h, ctx.tokens(t) * h
    cq, ckv, csc = cross_coeffs(a, k, keep)
    rep = _norm_coeff(a, k) + (1 if (k.dropout and dropout_flags(a, True)[0]) else 0)
    rep = min(rep, cq)
    tpd = max(1, tp)
    cq = (rep / tpd if sp else rep) + (cq - rep) / tpd
    heads = b * a.heads / max(1, ctx.L.context)
    # under autocast q, k and v each cast the fp32 norm output (T5LayerNorm returns fp32):
    # three 16-bit copies saved where the block walk counts one (LoRA: the adapters' inputs)
    if k.mixed and (keep is None or keep["qkv"]):
        c = c + (2 if keep is None else 1) * 2 / tpd
    enc = c * Te + sc_coef * heads * s * s
    dec = c * Td + sc_coef * heads * t * t + cq * Td + ckv * Te / tpd + csc * heads * t * s / tpd
    if k.attention != "eager":
        # SDPA gets the relative position bias as its float mask (transformers
        # create_position_bias_mask): a contiguous 1 x heads x q x k copy per self-attention
        # layer (the decoder's with the causal -inf), 16-bit under autocast, which the fused
        # kernel saves for its backward; cross-attention shares one zero bias (1 x heads x t x s)
        mb = 2 if k.mixed else k.p
        enc += mb * a.heads * s * s / tpd
        dec += mb * a.heads * t * t / tpd
    r = 4 if (k.mixed or k.p == 4) else k.p
    seq_div = tpd if sp else 1
    hid_drop = k.dropout and dropout_flags(a, True)[0]
    # per stack: the embedding output (first block input) and the final norm's input, each
    # with its dropout mask; the decoder's head input; the encoder output once (the tensor the
    # k / v projections share outside autocast)
    edges = (2 * r + (2 if hid_drop else 0)) * (Te + Td) / seq_div + k.p * Td
    if not k.mixed and (keep is None or keep["qkv"]):
        edges += k.p * Te
    if k.attention != "eager":
        edges += (2 if k.mixed else k.p) * a.heads * t * s / tpd
    return Stacks(enc_layer=enc, dec_layer=dec, edges=edges)


def forward_acts(ctx, layer_coeff: float, score_coeff: float, logits: float) -> tuple[float, float]:
    """A no_grad forward of T5ForConditionalGeneration (encoder_outputs then the decoder):
    (activation bytes at the widest moment, the largest tensor). The encoder pass holds its
    hidden stream and one block's widest tensors at seq_len; the decoder pass holds the encoder
    output beside its own stream at target_len, one block's tensors (its cross-attention k and
    v at seq_len, eager scores target x max(target, seq)) or the logits at target_len."""
    a, p, tp = ctx.arch, ctx.p, max(1, ctx.L.tensor)
    h, s, t = a.hidden, ctx.s, ctx.t
    Te, Td = ctx.tokens(s) * h, ctx.tokens(t) * h
    _, kvr, _ = _widths(a)
    heads = ctx.b * a.heads / tp
    enc_layer = layer_coeff * Te / tp
    enc_scores = score_coeff * heads * s * s
    dec_layer = layer_coeff * Td / tp + 2 * p * kvr * Te / tp
    dec_scores = score_coeff * heads * t * max(s, t)
    enc = 2 * p * Te + vmax(enc_layer, enc_scores)
    dec = p * Te + 2 * p * Td + vmax(dec_layer, dec_scores, logits)
    return vmax(enc, dec), vmax(enc_scores / max(1, a.layers), logits, enc_layer, dec_layer)
