"""The analytic denoiser activation of the SD 1.5 U-Net agrees with what the same architecture
holds when it runs (issue 4: ResNet-50, ViT-B/16 and the SD 1.5 U-Net at three resolutions).

The U-Net is rebuilt here at its real widths as a compact torch module in diffusers' layer order
(UNet2DConditionModel of SD v1: block_out_channels 320/640/1280/1280, layers_per_block 2,
8 heads, cross-attention dim 768, GroupNorm 32, CrossAttnDownBlock2D x3 + DownBlock2D, a mid
block with attention, mirrored up blocks that concatenate the skips, a timestep embedding;
ResnetBlock2D, Transformer2DModel with a 1x1 conv proj_in, BasicTransformerBlock with GEGLU,
AttnProcessor (eager: baddbmm + softmax over head_to_batch_dim copies) and AttnProcessor2_0
(SDPA)). One no-grad forward runs in fp32 on the CPU, as the denoise loop runs it; a
TorchDispatchMode records every storage an op creates and watches it die (weakref), so the
peak of live bytes created during the forward is exact at op granularity. The inputs (latents,
text embeddings) are added, the weights are not. That is compared with
`diffusion_parts.unet_step`, the function the diffusion workload's denoise phase uses.
"""
import math
import weakref

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from vramplan.catalog import get_model  # noqa: E402
from vramplan.workloads.diffusion.parts import unet_step  # noqa: E402

CFG = get_model("stable-diffusion-v1-5/stable-diffusion-v1-5").config["components"]["unet"]
TEXT_TOKENS, TEXT_DIM = 77, CFG["cross_attention_dim"]


# ---- measuring -------------------------------------------------------------------------------

class LivePeak(TorchDispatchMode):
    """Peak bytes of storages created by ops while the mode is active and still referenced."""

    def __init__(self, existing=()):
        super().__init__()
        self.live = self.peak = 0
        self._seen = set()
        # storages that existed before (weights, inputs): views of them (w.t(), x.view) are free
        self._old = {t.untyped_storage().data_ptr() for t in existing}

    def _gone(self, key, n):
        self._seen.discard(key)
        self.live -= n

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if not isinstance(t, torch.Tensor):
                continue
            s = t.untyped_storage()
            key = s.data_ptr()
            if key in self._seen or key in self._old or s.nbytes() == 0:
                continue
            self._seen.add(key)
            self.live += s.nbytes()
            weakref.finalize(s, self._gone, key, s.nbytes())
        self.peak = max(self.peak, self.live)
        return out


# ---- SD 1.5 U-Net in diffusers' order ---------------------------------------------------------

def gn(c):
    return nn.GroupNorm(32, c, eps=1e-5)


class Resnet(nn.Module):            # diffusers ResnetBlock2D (SiLU, not in place; dropout 0)
    def __init__(self, cin, cout, temb=1280):
        super().__init__()
        self.norm1, self.conv1 = gn(cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.time_emb_proj = nn.Linear(temb, cout)
        self.norm2, self.conv2 = gn(cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.conv_shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, input_tensor, temb):
        h = self.norm1(input_tensor)
        h = F.silu(h)
        h = self.conv1(h)
        t = self.time_emb_proj(F.silu(temb))[:, :, None, None]
        h = h + t
        h = self.norm2(h)
        h = F.silu(h)
        h = self.conv2(h)
        if self.conv_shortcut is not None:
            input_tensor = self.conv_shortcut(input_tensor)
        return (input_tensor + h) / 1.0


class Attention(nn.Module):
    def __init__(self, q_dim, heads, kv_dim=None, sdpa=True):
        super().__init__()
        kv_dim = kv_dim or q_dim
        self.heads, self.sdpa, self.scale = heads, sdpa, (q_dim // heads) ** -0.5
        self.to_q = nn.Linear(q_dim, q_dim, bias=False)
        self.to_k = nn.Linear(kv_dim, q_dim, bias=False)
        self.to_v = nn.Linear(kv_dim, q_dim, bias=False)
        self.to_out = nn.Linear(q_dim, q_dim)

    def head_to_batch_dim(self, t):
        b, n, d = t.shape
        h = self.heads
        return t.reshape(b, n, h, d // h).permute(0, 2, 1, 3).reshape(b * h, n, d // h)

    def batch_to_head_dim(self, t):
        bh, n, dh = t.shape
        h = self.heads
        return t.reshape(bh // h, h, n, dh).permute(0, 2, 1, 3).reshape(bh // h, n, dh * h)

    def forward(self, x, ehs=None):
        ehs = x if ehs is None else ehs
        b = x.shape[0]
        if self.sdpa:               # AttnProcessor2_0
            q, k, v = self.to_q(x), self.to_k(ehs), self.to_v(ehs)
            dh = q.shape[-1] // self.heads
            q = q.view(b, -1, self.heads, dh).transpose(1, 2)
            k = k.view(b, -1, self.heads, dh).transpose(1, 2)
            v = v.view(b, -1, self.heads, dh).transpose(1, 2)
            o = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=False)
            o = o.transpose(1, 2).reshape(b, -1, self.heads * dh)
            o = o.to(q.dtype)
            return self.to_out(o)
        q = self.to_q(x)            # AttnProcessor
        k, v = self.to_k(ehs), self.to_v(ehs)
        q, k, v = self.head_to_batch_dim(q), self.head_to_batch_dim(k), self.head_to_batch_dim(v)
        base = torch.empty(q.shape[0], q.shape[1], k.shape[1], dtype=q.dtype)
        scores = torch.baddbmm(base, q, k.transpose(-1, -2), beta=0, alpha=self.scale)
        del base
        probs = scores.softmax(dim=-1)
        del scores
        probs = probs.to(q.dtype)
        o = torch.bmm(probs, v)
        del probs
        o = self.batch_to_head_dim(o)
        return self.to_out(o)


class FeedForward(nn.Module):       # GEGLU
    def __init__(self, c):
        super().__init__()
        self.proj, self.out = nn.Linear(c, 8 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        hidden, gate = self.proj(x).chunk(2, dim=-1)
        return self.out(hidden * F.gelu(gate))


class BasicTransformerBlock(nn.Module):
    def __init__(self, c, heads, sdpa):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(c), nn.LayerNorm(c), nn.LayerNorm(c)
        self.attn1 = Attention(c, heads, sdpa=sdpa)
        self.attn2 = Attention(c, heads, TEXT_DIM, sdpa=sdpa)
        self.ff = FeedForward(c)

    def forward(self, x, ehs):
        n = self.norm1(x)
        x = self.attn1(n) + x
        n = self.norm2(x)
        x = self.attn2(n, ehs) + x
        n = self.norm3(x)
        return self.ff(n) + x


class Transformer2D(nn.Module):    # use_linear_projection False: 1x1 conv proj_in / proj_out
    def __init__(self, c, heads, sdpa):
        super().__init__()
        self.norm = nn.GroupNorm(32, c, eps=1e-6)
        self.proj_in, self.proj_out = nn.Conv2d(c, c, 1), nn.Conv2d(c, c, 1)
        self.block = BasicTransformerBlock(c, heads, sdpa)

    def forward(self, x, ehs):
        b, c, h, w = x.shape
        residual = x
        x = self.norm(x)
        x = self.proj_in(x)
        x = x.permute(0, 2, 3, 1).reshape(b, h * w, c)
        x = self.block(x, ehs)
        x = x.reshape(b, h, w, c).permute(0, 3, 1, 2).contiguous()
        x = self.proj_out(x)
        return x + residual


class Down(nn.Module):
    def __init__(self, cin, cout, attn, down, heads, sdpa):
        super().__init__()
        self.resnets = nn.ModuleList([Resnet(cin if i == 0 else cout, cout) for i in range(2)])
        self.attns = nn.ModuleList([Transformer2D(cout, heads, sdpa) for _ in range(2)]) \
            if attn else None
        self.down = nn.Conv2d(cout, cout, 3, stride=2, padding=1) if down else None

    def forward(self, x, temb, ehs):
        outs = ()
        for i, r in enumerate(self.resnets):
            x = r(x, temb)
            if self.attns is not None:
                x = self.attns[i](x, ehs)
            outs += (x,)
        if self.down is not None:
            x = self.down(x)
            outs += (x,)
        return x, outs


class Up(nn.Module):
    def __init__(self, cin, cprev, cout, attn, up, heads, sdpa):
        super().__init__()
        self.resnets = nn.ModuleList([
            Resnet((cprev if i == 0 else cout) + (cin if i == 2 else cout), cout)
            for i in range(3)])
        self.attns = nn.ModuleList([Transformer2D(cout, heads, sdpa) for _ in range(3)]) \
            if attn else None
        self.up = nn.Conv2d(cout, cout, 3, padding=1) if up else None

    def forward(self, x, skips, temb, ehs):
        for i, r in enumerate(self.resnets):
            res = skips[-1]
            skips = skips[:-1]
            x = torch.cat([x, res], dim=1)
            x = r(x, temb)
            if self.attns is not None:
                x = self.attns[i](x, ehs)
        if self.up is not None:
            x = F.interpolate(x, scale_factor=2.0, mode="nearest")
            x = self.up(x)
        return x


class UNetSD15(nn.Module):
    def __init__(self, sdpa, chans=tuple(CFG["block_out_channels"]), heads=8):
        super().__init__()
        c0, temb = chans[0], 4 * chans[0]
        self.c0 = c0
        self.lin1, self.lin2 = nn.Linear(c0, temb), nn.Linear(temb, temb)
        self.conv_in = nn.Conv2d(4, c0, 3, padding=1)
        attn = CFG["attention_levels"]
        self.downs = nn.ModuleList()
        cin = c0
        for i, c in enumerate(chans):
            self.downs.append(Down(cin, c, attn[i], i < len(chans) - 1, heads, sdpa))
            cin = c
        self.mid_r1, self.mid_r2 = Resnet(chans[-1], chans[-1]), Resnet(chans[-1], chans[-1])
        self.mid_attn = Transformer2D(chans[-1], heads, sdpa)
        rev, rattn = list(reversed(chans)), list(reversed(attn))
        self.ups = nn.ModuleList()
        prev = rev[0]
        for i, c in enumerate(rev):
            self.ups.append(Up(rev[min(i + 1, len(rev) - 1)], prev, c, rattn[i],
                               i < len(rev) - 1, heads, sdpa))
            prev = c
        self.norm_out, self.conv_out = gn(c0), nn.Conv2d(c0, 4, 3, padding=1)

    def forward(self, sample, timestep, ehs):
        half = self.c0 // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        args = timestep[:, None].float() * freqs[None]
        t = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)   # flip_sin_to_cos
        temb = self.lin2(F.silu(self.lin1(t)))
        x = self.conv_in(sample)
        skips = (x,)
        for d in self.downs:
            x, outs = d(x, temb, ehs)
            skips += outs
        x = self.mid_r1(x, temb)
        x = self.mid_attn(x, ehs)
        x = self.mid_r2(x, temb)
        for u in self.ups:
            n = len(u.resnets)
            res, skips = skips[-n:], skips[:-n]
            x = u(x, res, temb, ehs)
        x = self.norm_out(x)
        x = F.silu(x)
        return self.conv_out(x)


# ---- the comparison --------------------------------------------------------------------------

pytestmark = pytest.mark.usefixtures("torch_two_threads")


@pytest.fixture(scope="module")
def unet():
    """The real-width U-Net, built on the meta device and materialised with constant weights
    (what a forward holds does not depend on the weight values; random init of 860M fp32
    parameters would take most of the test's time)."""
    with torch.device("meta"):
        model = UNetSD15(sdpa=True)
    model = model.to_empty(device="cpu").eval()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(1e-3)
    return model


def set_attention(model, attention):
    for m in model.modules():
        if isinstance(m, Attention):
            m.sdpa = attention != "eager"


def measured_peak(model, lat, batch=1):
    torch.manual_seed(0)
    sample = torch.randn(batch, 4, lat, lat)
    ehs = torch.randn(batch, TEXT_TOKENS, TEXT_DIM)
    t = torch.full((batch,), 500, dtype=torch.long)
    mode = LivePeak([*model.parameters(), *model.buffers(), sample, ehs, t])
    with torch.no_grad(), mode:
        out = model(sample, t, ehs)
    assert out.shape == sample.shape
    inputs = sample.nbytes + ehs.nbytes + t.nbytes
    return mode.peak + inputs


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("px", [256, 384, 512])
def test_sd15_unet_activation_peak(unet, attention, px):
    lat = px // 8
    set_attention(unet, attention)
    measured = measured_peak(unet, lat)
    est, _ = unet_step(CFG, 1, lat, lat, TEXT_TOKENS, 4, attention == "eager")
    err = (est - measured) / measured
    assert abs(err) < 0.05, (px, attention, est, measured, f"{err:+.1%}")
