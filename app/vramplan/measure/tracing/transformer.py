"""Compact torch transformers built from a `catalog.TransformerArch` (nothing is downloaded).

They follow the Hugging Face reference implementations where memory depends on it:

- decoder, Llama style (RMSNorm in fp32, RoPE, grouped-query attention, SwiGLU, no bias) and
  GPT-2 / OPT / BigCode style (LayerNorm, learned positions, GELU or ReLU, biases, dropout);
- encoder (BERT: post-LN, token types, pooler; a `labels`-way classification head for training).

The architecture decides what the kernels do: the MLP activation (`arch.activation`), dropout
(`arch.dropout(True)`: the probabilities the estimate reads too) and the softmax dtype of eager
attention (`arch.softmax_upcast`). Attention kernels: `eager` materialises the score matrix as
HF's eager path does (a float additive mask for Llama / BERT, `where` with a bool mask for GPT-2
/ BigCode); `sdpa` calls `F.scaled_dot_product_attention` after repeating K/V heads (HF's sdpa
path); `flash` calls it with `enable_gqa=True` (no K/V copies, as flash-attention kernels do).
Causal-LM loss follows HF's `ForCausalLMLoss`: `logits.float()`, labels shifted by padding (no
copy of the logits).

torch is imported when this module is imported: import it lazily (measure/trace.py does).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ...catalog.transformer_arch import TransformerArch
from .recompute import checkpoint, op_sac_checkpoint

GPT2_STYLE = ("gpt2", "gpt_bigcode")
"""model types whose eager attention masks with `torch.where` and a bool mask"""


def check_buildable(a: TransformerArch) -> None:
    """What these modules cannot build: refused with a message naming the model (the rules
    live in measure/buildable.py, which the page asks without torch)."""
    from ..buildable import check_arch
    check_arch(a)


class RMSNorm(nn.Module):
    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):  # as HF LlamaRMSNorm: compute in fp32, cast back
        dtype = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


def _act(name: str):
    if name in ("relu",):
        return F.relu
    if name == "gelu_new":   # transformers' NewGELUActivation: Python arithmetic, not fused
        return lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi)
                                                      * (x + 0.044715 * torch.pow(x, 3.0))))
    if name in ("gelu_pytorch_tanh", "gelu_fast", "gelu_tanh"):
        return lambda x: F.gelu(x, approximate="tanh")
    if name in ("silu", "swish"):
        return F.silu
    return F.gelu


class MLP(nn.Module):
    def __init__(self, a: TransformerArch):
        super().__init__()
        self.gated = a.gated_mlp
        if self.gated:
            self.gate_proj = nn.Linear(a.hidden, a.ffn, bias=a.bias)
        self.up_proj = nn.Linear(a.hidden, a.ffn, bias=a.bias)
        self.down_proj = nn.Linear(a.ffn, a.hidden, bias=a.bias)
        self.act = _act(a.activation)
        self.p = a.dropout(True)[0]

    def forward(self, x):
        h = self.act(self.gate_proj(x)) * self.up_proj(x) if self.gated else self.act(self.up_proj(x))
        return F.dropout(self.down_proj(h), self.p, self.training)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class AttnCore(nn.Module):
    """softmax(q k^T / sqrt(d) + mask) v."""

    def __init__(self, kernel: str, causal: bool, p: float, groups: int, where_mask: bool,
                 upcast: bool):
        super().__init__()
        self.kernel, self.causal, self.p, self.groups = kernel, causal, p, groups
        self.where_mask, self.upcast = where_mask, upcast

    def forward(self, q, k, v, mask=None):
        p = self.p if self.training else 0.0
        if self.kernel == "flash":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=None if self.causal else mask,
                                                  dropout_p=p, is_causal=self.causal and
                                                  q.shape[-2] == k.shape[-2],
                                                  enable_gqa=self.groups > 1)
        if self.groups > 1:  # HF repeat_kv: expand + reshape (a copy)
            b, h, s, d = k.shape
            k = k[:, :, None].expand(b, h, self.groups, s, d).reshape(b, h * self.groups, s, d)
            v = v[:, :, None].expand(b, h, self.groups, s, d).reshape(b, h * self.groups, s, d)
        if self.kernel == "sdpa":
            causal = self.causal and mask is None and q.shape[-2] == k.shape[-2]
            return F.scaled_dot_product_attention(q, k, v, attn_mask=None if causal else mask,
                                                  dropout_p=p, is_causal=causal)
        if self.where_mask:  # HF GPT-2 / BigCode eager: divide, where(bool mask)
            w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            if mask is not None:
                w = torch.where(mask, w, torch.finfo(w.dtype).min)
        else:  # HF Llama / BERT eager: scale, additive float mask
            w = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(q.shape[-1]))
            if mask is not None:
                w = w + mask
        if self.upcast:  # softmax in fp32, cast back (arch.softmax_upcast)
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        else:
            w = F.softmax(w, dim=-1)
        w = F.dropout(w, p, self.training)
        return torch.matmul(w, v)


class Attention(nn.Module):
    def __init__(self, a: TransformerArch, kernel: str, causal: bool):
        super().__init__()
        self.h, self.kv, self.d = a.heads, a.kv_heads, a.head_dim
        qkv_bias = a.bias or a.qkv_bias
        self.q_proj = nn.Linear(a.hidden, a.heads * a.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(a.hidden, a.kv_heads * a.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(a.hidden, a.kv_heads * a.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(a.heads * a.head_dim, a.hidden, bias=a.bias)
        hidden_p, attn_p = a.dropout(True)
        self.core = AttnCore(kernel, causal, attn_p, a.heads // a.kv_heads,
                             a.model_type in GPT2_STYLE, a.softmax_upcast)
        self.p = hidden_p

    def forward(self, x, rope=None, mask=None, cache=None, pos=0):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.h, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv, self.d).transpose(1, 2)
        if rope is not None:
            cos, sin = rope
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        if cache is not None:  # static cache (HF StaticCache): write in place, read the prefix
            ck, cv = cache
            ck[:, :, pos:pos + s] = k
            cv[:, :, pos:pos + s] = v
            k, v = ck[:, :, :pos + s], cv[:, :, :pos + s]
        o = self.core(q, k, v, mask)
        o = o.transpose(1, 2).reshape(b, s, self.h * self.d)
        return F.dropout(self.o_proj(o), self.p, self.training)


class Block(nn.Module):
    def __init__(self, a: TransformerArch, kernel: str, causal: bool, post_ln: bool = False):
        super().__init__()
        norm = (lambda: RMSNorm(a.hidden)) if a.norm == "rmsnorm" else (lambda: nn.LayerNorm(a.hidden))
        self.attn = Attention(a, kernel, causal)
        self.mlp = MLP(a)
        self.norm1, self.norm2 = norm(), norm()
        self.post_ln = post_ln

    def forward(self, x, rope=None, mask=None, cache=None, pos=0):
        if self.post_ln:  # BERT
            x = self.norm1(x + self.attn(x, rope, mask, cache, pos))
            return self.norm2(x + self.mlp(x))
        x = x + self.attn(self.norm1(x), rope, mask, cache, pos)
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    """Decoder (causal) or encoder stack with embeddings and an LM / MLM head."""

    def __init__(self, a: TransformerArch, kernel="eager", checkpointing="none", causal=True):
        super().__init__()
        self.a, self.full_ckpt = a, checkpointing == "full"
        self.op_sac = checkpointing == "selective"   # torchtitan's op-level SAC per block
        self.p = a.dropout(True)[0]
        self.offset = a.extra.get("position_offset", 0)     # OPT: 2
        self.embed_tokens = nn.Embedding(a.vocab, a.hidden)
        self.embed_positions = (nn.Embedding(a.max_positions + self.offset, a.hidden)
                                if a.learned_positions else None)
        self.token_type = nn.Embedding(a.type_vocab, a.hidden) if a.type_vocab else None
        self.embed_norm = nn.LayerNorm(a.hidden) if not causal else None
        self.layers = nn.ModuleList(
            Block(a, kernel, causal, post_ln=not causal)
            for _ in range(a.layers))
        self.norm = (RMSNorm(a.hidden) if a.norm == "rmsnorm" else nn.LayerNorm(a.hidden)) if causal else None
        if a.learned_positions or a.norm != "rmsnorm":
            self.register_buffer("inv_freq", None, persistent=False)
        else:
            theta = 10000.0
            self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, a.head_dim, 2).float()
                                                              / a.head_dim), persistent=False)
        self.causal = causal

    def rope(self, pos0: int, s: int, dtype):
        if self.inv_freq is None:
            return None
        t = torch.arange(pos0, pos0 + s, device=self.inv_freq.device).float()
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype)[None, None], emb.sin().to(dtype)[None, None]

    def forward(self, ids, caches=None, pos=0):
        b, s = ids.shape
        x = self.embed_tokens(ids)
        if self.embed_positions is not None:
            off = self.offset
            x = x + self.embed_positions(torch.arange(pos + off, pos + off + s, device=ids.device))
        if self.token_type is not None:
            x = x + self.token_type(torch.zeros_like(ids))
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        x = F.dropout(x, self.p, self.training)
        mask = None
        kernel = self.layers[0].attn.core.kernel if len(self.layers) else "eager"
        if self.causal and kernel == "eager":
            keys = pos + s
            tri = torch.ones(s, keys, dtype=torch.bool, device=ids.device).tril(pos)
            if self.layers[0].attn.core.where_mask:
                mask = tri[None, None]
            else:  # HF builds a float additive mask (b, 1, s, keys) in the compute dtype
                dev = ids.device.type
                dt = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else x.dtype
                mask = torch.zeros(b, 1, s, keys, dtype=dt, device=ids.device)
                mask = mask.masked_fill(~tri, torch.finfo(dt).min)
        elif self.causal and pos > 0 and s > 1:
            mask = torch.ones(s, pos + s, dtype=torch.bool, device=ids.device).tril(pos)
        rope = self.rope(pos, s, x.dtype)
        for i, layer in enumerate(self.layers):
            cache = caches[i] if caches is not None else None
            if self.full_ckpt and self.training and torch.is_grad_enabled():
                x = checkpoint(layer, x, rope, mask, None, 0, use_reentrant=False)
            elif self.op_sac and self.training and torch.is_grad_enabled():
                x = op_sac_checkpoint(layer, x, rope, mask, None, 0)
            else:
                x = layer(x, rope, mask, cache, pos)
        return self.norm(x) if self.norm is not None else x


class CausalLM(nn.Module):
    def __init__(self, a: TransformerArch, kernel="eager", checkpointing="none"):
        super().__init__()
        self.model = Transformer(a, kernel, checkpointing)
        self.lm_head = nn.Linear(a.hidden, a.vocab, bias=False)
        if a.tied_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, ids, caches=None, pos=0, last_only=False):
        h = self.model(ids, caches, pos)
        if last_only:
            h = h[:, -1:]
        return self.lm_head(h)


def causal_lm_loss(logits, labels):
    """HF ForCausalLMLoss: upcast, shift labels by padding, mean cross-entropy."""
    logits = logits.float()
    labels = F.pad(labels, (0, 1), value=-100)[..., 1:]
    return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)


class EncoderClassifier(nn.Module):
    """HF BertForSequenceClassification: BertModel (with pooler: dense + tanh on [CLS]), dropout,
    a `labels`-way classifier. `head=False`: BertModel's forward (hidden states + pooler)."""

    def __init__(self, a: TransformerArch, kernel="eager", checkpointing="none", head=True,
                 labels=2):
        super().__init__()
        self.bert = Transformer(a, kernel, checkpointing, causal=False)
        self.pooler = nn.Linear(a.hidden, a.hidden)
        self.classifier = nn.Linear(a.hidden, labels) if head else None
        self.p = a.dropout(True)[0]

    def forward(self, ids):
        h = self.bert(ids)
        pooled = torch.tanh(self.pooler(h[:, 0]))
        if self.classifier is None:
            return h, pooled
        return self.classifier(F.dropout(pooled, self.p, self.training))
