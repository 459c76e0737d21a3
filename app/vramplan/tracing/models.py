"""Compact torch implementations of the catalog families, built from plain config dicts.

Nothing is downloaded: each builder makes the module from the shape keys alone. They follow the
reference implementations where memory depends on it (Hugging Face transformers for the
transformers, torchvision for ResNet and ViT):

- decoder, Llama style (RMSNorm, RoPE, grouped-query attention, SwiGLU, no bias) and GPT-2 / OPT /
  BigCode style (LayerNorm, learned positions, GELU or ReLU, biases, dropout);
- encoder (BERT: post-LN, token types, pooler; a 2-way classification head for training);
- ViT (torchvision: pre-LN, packed in_proj attention, class token, classification head);
- ResNet (torchvision bottleneck or basic blocks, BatchNorm, in-place ReLU);
- U-Net (the segmentation U-Net, 2-D or 3-D: double conv-BN-ReLU, max-pool, transposed conv).

Attention kernels: `eager` materialises the score matrix as HF's eager path does (fp32 softmax,
float additive mask for Llama; `where` with a bool mask for GPT-2); `sdpa` calls
`F.scaled_dot_product_attention` after repeating K/V heads (HF's sdpa path); `flash` calls it with
`enable_gqa=True` (no K/V copies, as flash-attention kernels do). Causal-LM loss follows HF's
`ForCausalLMLoss`: `logits.float()`, labels shifted by padding (no copy of the logits).

torch is imported when this module is imported: import it lazily (vramplan.trace does).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint as _checkpoint

from ..errors import ScenarioError

RECOMPUTE_CONTEXT = None
"""set by the runner: a factory of the context (kernel emulation) the recomputation runs in;
TorchFunctionModes are not active inside autograd's backward, where checkpoint recomputes"""


def checkpoint(fn, *args, use_reentrant=False):
    import contextlib
    make = RECOMPUTE_CONTEXT
    if make is None:
        return _checkpoint(fn, *args, use_reentrant=use_reentrant)
    return _checkpoint(fn, *args, use_reentrant=use_reentrant,
                       context_fn=lambda: (contextlib.nullcontext(), make()))

FAMILIES = ("decoder", "encoder", "vit", "cnn", "unet")
"""the catalog families trace can build (decoder: Llama / Mistral / Qwen2 / GPT-2 / OPT / BigCode
style; encoder: BERT / RoBERTa style; cnn: ResNet; vit; unet)"""


# ----------------------------------------------------------------------------- config


@dataclass
class TArch:
    """The transformer shape the builders need (duck-compatible with catalog.TransformerArch)."""
    model_type: str = "llama"
    kind: str = "decoder"
    layers: int = 2
    hidden: int = 64
    heads: int = 4
    kv_heads: int = 4
    head_dim: int = 16
    ffn: int = 256
    gated_mlp: bool = True
    vocab: int = 128
    tied_embeddings: bool = False
    max_positions: int = 2048
    learned_positions: bool = False
    type_vocab: int = 0
    norm: str = "rmsnorm"
    bias: bool = False
    activation: str = "silu"
    dropout: float = 0.0
    attn_dropout: float = 0.0
    num_experts: int = 0


def _get(cfg: dict, *keys, default=None):
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    return default


def transformer_arch(config: dict, kind: str | None = None) -> TArch:
    """Normalise a Hugging Face config dict; uses vramplan.catalog.transformer_arch when present."""
    cfg = dict(config)
    mt = str(cfg.get("model_type", "")).lower()
    try:  # the catalog's normaliser is authoritative for shapes when it exists
        from ..catalog.transformer_arch import arch_from_config
        a = arch_from_config(cfg)
        base = dict(model_type=a.model_type, kind=a.kind, layers=a.layers, hidden=a.hidden,
                    heads=a.heads, kv_heads=a.kv_heads, head_dim=a.head_dim, ffn=a.ffn,
                    gated_mlp=a.gated_mlp, vocab=a.vocab, tied_embeddings=a.tied_embeddings,
                    max_positions=a.max_positions, learned_positions=a.learned_positions,
                    type_vocab=a.type_vocab, norm=a.norm, bias=a.bias,
                    num_experts=getattr(a, "num_experts", 0) or 0)
        if getattr(a, "mla", None):
            raise ScenarioError("model", "trace cannot build multi-head latent attention (MLA)")
    except ImportError:
        base = _local_arch(cfg, mt)
    if kind:
        base["kind"] = kind
    mt = base["model_type"] or mt
    act = str(_get(cfg, "hidden_act", "activation_function", "hidden_activation",
                   default="silu" if base["gated_mlp"] else "gelu_new")).lower()
    if mt == "opt":
        act = "relu"
    # HF config defaults where a config leaves dropout out: GPT-2 / BigCode / BERT / OPT 0.1
    d0 = 0.1 if mt in ("gpt2", "gpt_bigcode", "bert", "roberta", "opt") else 0.0
    a0 = 0.1 if mt in ("gpt2", "gpt_bigcode", "bert", "roberta") else 0.0
    drop = float(_get(cfg, "resid_pdrop", "hidden_dropout_prob", "dropout", "hidden_dropout",
                      default=d0) or 0.0)
    adrop = float(_get(cfg, "attn_pdrop", "attention_probs_dropout_prob", "attention_dropout",
                       default=a0) or 0.0)
    return TArch(activation=act, dropout=drop, attn_dropout=adrop, **base)


def _local_arch(cfg: dict, mt: str) -> dict:
    hidden = int(_get(cfg, "hidden_size", "n_embd", "d_model", "dim", default=0))
    heads = int(_get(cfg, "num_attention_heads", "n_head", "num_heads", default=0))
    layers = int(_get(cfg, "num_hidden_layers", "n_layer", "num_layers", default=0))
    if not (hidden and heads and layers):
        raise ScenarioError("architecture", "needs hidden_size, num_attention_heads and "
                                            "num_hidden_layers to build a transformer")
    kv = _get(cfg, "num_key_value_heads", "n_head_kv")
    if kv is None and cfg.get("multi_query"):
        kv = 1
    classic = mt in ("gpt2", "gpt_bigcode", "opt", "bert", "roberta", "vit", "gpt_neo", "gptj")
    enc = mt in ("bert", "roberta", "vit", "distilbert", "electra", "deberta")
    vocab = int(_get(cfg, "vocab_size", default=32000))
    return dict(
        model_type=mt or "llama", kind="encoder" if enc else "decoder", layers=layers,
        hidden=hidden, heads=heads, kv_heads=int(kv or heads),
        head_dim=int(_get(cfg, "head_dim", default=hidden // heads)),
        ffn=int(_get(cfg, "intermediate_size", "n_inner", "ffn_dim", default=4 * hidden) or 4 * hidden),
        gated_mlp=not classic, vocab=vocab,
        tied_embeddings=bool(cfg.get("tie_word_embeddings", classic)),
        max_positions=int(_get(cfg, "max_position_embeddings", "n_positions", default=2048)),
        learned_positions=classic, type_vocab=int(cfg.get("type_vocab_size", 0) or 0),
        norm="layernorm" if classic else "rmsnorm", bias=classic,
        num_experts=int(_get(cfg, "num_local_experts", "num_experts", "n_routed_experts",
                             default=0) or 0))


# ----------------------------------------------------------------------------- transformer parts


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
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_tanh"):
        return lambda x: F.gelu(x, approximate="tanh")
    if name in ("silu", "swish"):
        return F.silu
    return F.gelu


class MLP(nn.Module):
    def __init__(self, a: TArch):
        super().__init__()
        self.gated = a.gated_mlp
        if self.gated:
            self.gate_proj = nn.Linear(a.hidden, a.ffn, bias=a.bias)
        self.up_proj = nn.Linear(a.hidden, a.ffn, bias=a.bias)
        self.down_proj = nn.Linear(a.ffn, a.hidden, bias=a.bias)
        self.act = _act(a.activation)
        self.p = a.dropout

    def forward(self, x):
        h = self.act(self.gate_proj(x)) * self.up_proj(x) if self.gated else self.act(self.up_proj(x))
        return F.dropout(self.down_proj(h), self.p, self.training)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class AttnCore(nn.Module):
    """softmax(q k^T / sqrt(d) + mask) v: a module so selective checkpointing can wrap it."""

    def __init__(self, kernel: str, causal: bool, p: float, groups: int, style: str):
        super().__init__()
        self.kernel, self.causal, self.p, self.groups, self.style = kernel, causal, p, groups, style

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
        scale = 1.0 / math.sqrt(q.shape[-1])
        if self.style == "gpt2":  # HF GPT-2 eager: divide, where(bool mask), softmax in dtype
            w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            if mask is not None:
                w = torch.where(mask, w, torch.finfo(w.dtype).min)
            w = F.softmax(w, dim=-1)
        else:  # HF Llama / BERT eager: scale, additive float mask, softmax in fp32
            w = torch.matmul(q, k.transpose(2, 3)) * scale
            if mask is not None:
                w = w + mask
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        w = F.dropout(w, p, self.training)
        return torch.matmul(w, v)


class Attention(nn.Module):
    def __init__(self, a: TArch, kernel: str, causal: bool, selective: bool):
        super().__init__()
        self.h, self.kv, self.d = a.heads, a.kv_heads, a.head_dim
        self.q_proj = nn.Linear(a.hidden, a.heads * a.head_dim, bias=a.bias)
        self.k_proj = nn.Linear(a.hidden, a.kv_heads * a.head_dim, bias=a.bias)
        self.v_proj = nn.Linear(a.hidden, a.kv_heads * a.head_dim, bias=a.bias)
        self.o_proj = nn.Linear(a.heads * a.head_dim, a.hidden, bias=a.bias)
        style = "gpt2" if a.model_type in ("gpt2", "gpt_bigcode") else "llama"
        self.core = AttnCore(kernel, causal, a.attn_dropout, a.heads // a.kv_heads, style)
        self.p, self.selective = a.dropout, selective

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
        if self.selective and self.training and torch.is_grad_enabled():
            o = checkpoint(self.core, q, k, v, mask, use_reentrant=False)
        else:
            o = self.core(q, k, v, mask)
        o = o.transpose(1, 2).reshape(b, s, self.h * self.d)
        return F.dropout(self.o_proj(o), self.p, self.training)


class Block(nn.Module):
    def __init__(self, a: TArch, kernel: str, causal: bool, selective: bool, post_ln: bool = False):
        super().__init__()
        norm = (lambda: RMSNorm(a.hidden)) if a.norm == "rmsnorm" else (lambda: nn.LayerNorm(a.hidden))
        self.attn = Attention(a, kernel, causal, selective)
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

    def __init__(self, a: TArch, kernel="eager", checkpointing="none"):
        super().__init__()
        self.a, self.full_ckpt = a, checkpointing == "full"
        causal = a.kind != "encoder"
        self.embed_tokens = nn.Embedding(a.vocab, a.hidden)
        self.embed_positions = nn.Embedding(a.max_positions, a.hidden) if a.learned_positions else None
        self.token_type = nn.Embedding(a.type_vocab, a.hidden) if a.type_vocab else None
        self.embed_norm = nn.LayerNorm(a.hidden) if not causal else None
        self.layers = nn.ModuleList(
            Block(a, kernel, causal, checkpointing == "selective", post_ln=not causal)
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
            off = 2 if self.a.model_type == "opt" else 0
            x = x + self.embed_positions(torch.arange(pos + off, pos + off + s, device=ids.device))
        if self.token_type is not None:
            x = x + self.token_type(torch.zeros_like(ids))
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        x = F.dropout(x, self.a.dropout, self.training)
        mask = None
        kernel = self.layers[0].attn.core.kernel if len(self.layers) else "eager"
        if self.causal and kernel == "eager":
            keys = pos + s
            tri = torch.ones(s, keys, dtype=torch.bool, device=ids.device).tril(pos)
            if self.layers[0].attn.core.style == "gpt2":
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
            else:
                x = layer(x, rope, mask, cache, pos)
        return self.norm(x) if self.norm is not None else x


class CausalLM(nn.Module):
    def __init__(self, a: TArch, kernel="eager", checkpointing="none"):
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

    def __init__(self, a: TArch, kernel="eager", checkpointing="none", head=True, labels=2):
        super().__init__()
        self.bert = Transformer(a, kernel, checkpointing)
        self.pooler = nn.Linear(a.hidden, a.hidden)
        self.classifier = nn.Linear(a.hidden, labels) if head else None
        self.p = a.dropout

    def forward(self, ids):
        h = self.bert(ids)
        pooled = torch.tanh(self.pooler(h[:, 0]))
        if self.classifier is None:
            return h, pooled
        return self.classifier(F.dropout(pooled, self.p, self.training))


# ----------------------------------------------------------------------------- vision


class VitAttention(nn.Module):
    """torchvision ViT attention (nn.MultiheadAttention internals): packed in_proj, one
    contiguous q/k/v copy; eager: scale q, bmm, softmax, bmm; else SDPA."""

    def __init__(self, d, heads, kernel):
        super().__init__()
        self.in_proj = nn.Linear(d, 3 * d)
        self.out_proj = nn.Linear(d, d)
        self.h, self.kernel = heads, kernel

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.in_proj(x).unflatten(-1, (3, d)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
        q, k, v = (t.view(b, n, self.h, d // self.h).transpose(1, 2) for t in qkv)
        if self.kernel == "eager":
            q = q * (d // self.h) ** -0.5
            o = torch.matmul(F.softmax(torch.matmul(q, k.transpose(-2, -1)), dim=-1), v)
        else:
            o = F.scaled_dot_product_attention(q, k, v)
        return self.out_proj(o.transpose(1, 2).reshape(b, n, d))


class VitBlock(nn.Module):
    def __init__(self, d, heads, mlp, kernel):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d, eps=1e-6), nn.LayerNorm(d, eps=1e-6)
        self.self_attention = VitAttention(d, heads, kernel)
        self.mlp = nn.Sequential(nn.Linear(d, mlp), nn.GELU(), nn.Linear(mlp, d))

    def forward(self, x):
        x = x + self.self_attention(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class ViT(nn.Module):
    """torchvision VisionTransformer (dropout 0): patch conv, class token, pre-LN blocks."""

    def __init__(self, hidden=768, layers=12, heads=12, mlp=3072, image=224, patch=16, channels=3,
                 classes=1000, kernel="sdpa", checkpointing="none"):
        super().__init__()
        self.conv_proj = nn.Conv2d(channels, hidden, patch, stride=patch)
        n = (image // patch) ** 2
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden))
        self.pos_embedding = nn.Parameter(torch.zeros(1, n + 1, hidden))
        self.layers = nn.ModuleList(VitBlock(hidden, heads, mlp, kernel) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden, eps=1e-6)
        self.head = nn.Linear(hidden, classes)
        self.full_ckpt = checkpointing == "full"

    def forward(self, img):
        x = self.conv_proj(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embedding
        for layer in self.layers:
            if self.full_ckpt and self.training and torch.is_grad_enabled():
                x = checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
        return self.head(self.ln(x)[:, 0])


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride=1, down=None):
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu, self.downsample = nn.ReLU(inplace=True), down

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += idt
        return self.relu(out)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, width, stride=1, down=None):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width)
        self.relu, self.downsample = nn.ReLU(inplace=True), down

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += idt
        return self.relu(out)


class ResNet(nn.Module):
    """torchvision's ResNet (v1.5: stride on the 3x3 convolution)."""

    def __init__(self, depths=(3, 4, 6, 3), block="bottleneck", base=64, classes=1000, channels=3,
                 checkpointing="none"):
        super().__init__()
        blk = Bottleneck if block == "bottleneck" else BasicBlock
        self.conv1 = nn.Conv2d(channels, base, 7, 2, 3, bias=False)
        self.bn1, self.relu = nn.BatchNorm2d(base), nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin, stages = base, []
        for i, n in enumerate(depths):
            width, stride = base * 2 ** i, 1 if i == 0 else 2
            down = None
            if stride != 1 or cin != width * blk.expansion:
                down = nn.Sequential(nn.Conv2d(cin, width * blk.expansion, 1, stride, bias=False),
                                     nn.BatchNorm2d(width * blk.expansion))
            layers = [blk(cin, width, stride, down)]
            cin = width * blk.expansion
            layers += [blk(cin, width) for _ in range(n - 1)]
            stages.append(nn.Sequential(*layers))
        self.layers = nn.ModuleList(stages)
        self.fc = nn.Linear(cin, classes)
        self.full_ckpt = checkpointing == "full"

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for stage in self.layers:
            for b in stage:
                if self.full_ckpt and self.training and torch.is_grad_enabled():
                    x = checkpoint(b, x, use_reentrant=False)
                else:
                    x = b(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class UNet(nn.Module):
    """The segmentation U-Net (2-D or 3-D, padded convolutions): conv-BN-ReLU twice per level,
    max-pool down, transposed convolution up, skip concatenation, 1x1 output convolution."""

    def __init__(self, channels=(64, 128, 256, 512, 1024), in_ch=3, out_ch=2, dims=2,
                 checkpointing="none"):
        super().__init__()
        Conv = nn.Conv3d if dims == 3 else nn.Conv2d
        BN = nn.BatchNorm3d if dims == 3 else nn.BatchNorm2d
        Up = nn.ConvTranspose3d if dims == 3 else nn.ConvTranspose2d
        self.pool = nn.MaxPool3d(2) if dims == 3 else nn.MaxPool2d(2)

        def double(cin, c):
            return nn.Sequential(Conv(cin, c, 3, padding=1, bias=False), BN(c), nn.ReLU(inplace=True),
                                 Conv(c, c, 3, padding=1, bias=False), BN(c), nn.ReLU(inplace=True))
        self.down, cin = nn.ModuleList(), in_ch
        for c in channels:
            self.down.append(double(cin, c))
            cin = c
        self.ups, self.up = nn.ModuleList(), nn.ModuleList()
        for c in reversed(channels[:-1]):
            self.ups.append(Up(cin, c, 2, stride=2))
            self.up.append(double(2 * c, c))
            cin = c
        self.out = Conv(cin, out_ch, 1)
        self.full_ckpt = checkpointing == "full"

    def _run(self, blk, x):
        if self.full_ckpt and self.training and torch.is_grad_enabled():
            return checkpoint(blk, x, use_reentrant=False)
        return blk(x)

    def forward(self, x):
        skips = []
        for i, blk in enumerate(self.down):
            x = self._run(blk, self.pool(x) if i else x)
            skips.append(x)
        for up, blk, skip in zip(self.ups, self.up, reversed(skips[:-1])):
            x = self._run(blk, torch.cat([skip, up(x)], dim=1))
        return self.out(x)


# ----------------------------------------------------------------------------- LoRA


class LoraLinear(nn.Module):
    """A frozen Linear plus a trainable low-rank update (PEFT's LoRA layer, dropout 0)."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, rank, bias=False)
        self.lora_B = nn.Linear(rank, base.out_features, bias=False)
        nn.init.zeros_(self.lora_B.weight)
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x)) * self.scale


_LORA_ALIASES = {"c_attn": ("q_proj", "k_proj", "v_proj"), "query": ("q_proj",), "key": ("k_proj",),
                 "value": ("v_proj",), "out_proj": ("o_proj",), "dense": ("o_proj",),
                 "c_proj": ("o_proj", "down_proj"), "c_fc": ("up_proj",), "fc1": ("up_proj",),
                 "fc2": ("down_proj",), "all-linear": ("q_proj", "k_proj", "v_proj", "o_proj",
                                                        "gate_proj", "up_proj", "down_proj")}


def apply_lora(model: nn.Module, rank=8, alpha=16, targets=("q_proj", "v_proj")) -> int:
    """Freeze `model`, wrap targeted Linears with LoRA adapters; returns how many were wrapped."""
    names = set()
    for t in targets:
        names.update(_LORA_ALIASES.get(t, (t,)))
    for p in model.parameters():
        p.requires_grad_(False)
    n = 0
    for mod in list(model.modules()):
        for child_name, child in list(mod.named_children()):
            if isinstance(child, nn.Linear) and child_name in names:
                setattr(mod, child_name, LoraLinear(child, rank, alpha))
                n += 1
    return n
