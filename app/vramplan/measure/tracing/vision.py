"""Compact torch implementations of the vision families, following torchvision where memory
depends on it: ViT (pre-LN, packed in_proj attention, class token, classification head), ResNet
(bottleneck or basic blocks, BatchNorm, in-place ReLU) and the segmentation U-Net (2-D or 3-D:
double conv-BN-ReLU, max-pool, transposed conv). Built from shape arguments alone.

torch is imported when this module is imported: import it lazily (measure/trace.py does).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .recompute import checkpoint


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
