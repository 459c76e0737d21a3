"""AutoencoderKLCogVideoX.decode walked op by op: the live bytes of diffusers 0.30.x's CogVideoX
decoder (src/diffusers/models/autoencoders/autoencoder_kl_cogvideox.py at v0.30.2, the same
decode as main on 2024-09-02, af6c0fb766; upsampling.py CogVideoXUpsample3D), no autograd.

What the walk follows (each an allocation the code makes; a module's input stays alive while
it runs, its caller holds it):
- `_decode` runs the decoder on 2 latent frames at a time, the first chunk taking the odd one
  (13 latent frames: 3, 2, 2, 2, 2, 2), keeps every chunk's output and concatenates them at the
  end.
- CogVideoXCausalConv3d.forward: for a time kernel k > 1 it concatenates its cache (the last
  k - 1 input frames of the previous chunk, or the first frame repeated) in front of the input
  along time; it then drops its old cache and keeps `inputs[:, :, -k + 1:].clone()` as the
  new one, on the GPU, until its next call. For k = 1 that slice is `[:, :, 0:]`: the spatial
  norms' conv_y / conv_b (kernel 1) keep a copy of their whole input. `F.pad` then copies the
  input with its spatial border (also with zero padding: constant_pad_nd clones), and the
  convolution writes its output.
- CogVideoXSpatialNorm3D: zq (the latent) interpolated to the feature's size (the first frame
  and the rest separately, then concatenated, when the frame count is odd: both parts stay
  bound to locals until it returns), GroupNorm(f), conv_y(zq), conv_b(zq), norm * y + b.
- CogVideoXResnetBlock3D: norm1, SiLU, conv1 (k = 3), norm2, SiLU, conv2, a 1 x 1 shortcut
  when the widths differ, the sum.
- CogVideoXUpsample3D: with compress_time (the first log2(temporal compression) upsamplers)
  nearest x2 in time and space (an odd frame count: the first frame in space only, the rest
  in time and space, concatenated), otherwise per frame in space (from a (b t, c, h, w) copy);
  the 2-D conv takes a (b t, c, h, w) layout (a copy after the 3-D interpolation, a view of
  the per-frame result) and writes its output.
- CogVideoXSafeConv3d cuts an input over 2 GiB (counted at 2 bytes per element) into
  int(GiB / 2) + 1 time chunks, each after the first prefixed with k - 1 frames, and
  concatenates the outputs.
cuDNN workspaces are not counted (the tracer does not see them either).

`returned=True` is the decoder from diffusers 0.31 on ("[refactor] remove conv_cache from
CogVideoX VAE", PR #9524, bd4df2856a, 2024-09-28; v0.31.0 2024-10-22; read at v0.42.1): each
CausalConv3d returns its cache instead of keeping it, `_decode` passes the previous chunk's
cache dict to the next decoder call and rebinds it only when that call returns, so the
previous chunk's caches stay alive through the whole next chunk; the convs pad inside
(`const_padding_conv3d`), no F.pad copy; the spatial norm computes conv_y and conv_b first
and keeps both bound until it returns.

Checked against the tracer on diffusers 0.30.2 (benchmarks/trace_fidelity_modules.py J17-vae
--diffusers-path): see docs/accuracy.md.
"""
from __future__ import annotations

import math

GiB = 2**30


class _Live:
    """Live bytes and their peak over a walk."""

    def __init__(self) -> None:
        self.cur = 0
        self.peak = 0
        self.largest = 0

    def alloc(self, n: int) -> int:
        self.cur += n
        self.peak = max(self.peak, self.cur)
        self.largest = max(self.largest, n)
        return n

    def free(self, *ns: int) -> None:
        self.cur -= sum(ns)


class _Decoder:
    """One AutoencoderKLCogVideoX decoder; `caches` persists across chunks (module attributes)."""

    def __init__(self, cfg: dict, b: int, lat_hw: tuple[int, int], e: int,
                 returned: bool = False) -> None:
        self.b, self.e = b, e
        self.returned = returned                    # diffusers >= 0.31 (module docstring)
        self.lat_h, self.lat_w = lat_hw
        self.zc = int(cfg.get("latent_channels", 16))
        self.chs = list(reversed(cfg["block_out_channels"]))
        self.resnets = int(cfg.get("layers_per_block", 3)) + 1
        self.t_ups = int(round(math.log2(cfg.get("temporal_compression", 4))))
        self.caches: dict[str, int] = {}
        self.live = _Live()

    def size(self, c: int, f: int, h: int, w: int) -> int:
        return self.b * c * f * h * w * self.e

    def conv3d(self, name: str, k: int, cin: int, cout: int, f: int, h: int, w: int) -> int:
        """CogVideoXCausalConv3d.forward on a live (cin, f, h, w) input; returns its output."""
        lv = self.live
        x = lv.alloc(self.size(cin, f + k - 1, h, w)) if k > 1 else 0   # torch.cat(cache + in)
        lv.free(self.caches.pop(name, 0))
        self.caches[name] = lv.alloc(self.size(cin, k - 1 if k > 1 else f, h, w))
        pad = (k - 1) // 2
        fp = f + k - 1
        if self.returned:                           # the conv pads inside: no F.pad copy
            out = self._safe_conv(self.size(cin, fp, h, w), k, cin, cout, fp, f, h, w)
            lv.free(x)
            return out
        padded = lv.alloc(self.size(cin, fp, h + 2 * pad, w + 2 * pad))
        lv.free(x)
        out = self._safe_conv(padded, k, cin, cout, fp, f, h, w)
        lv.free(padded)
        return out

    def _safe_conv(self, padded: int, k: int, cin: int, cout: int, fp: int, f: int,
                   h: int, w: int) -> int:
        lv = self.live
        gb = padded // self.e * 2 / GiB
        if gb <= 2:
            return lv.alloc(self.size(cout, f, h, w))
        parts = int(gb / 2) + 1
        step = -(-fp // parts)
        sizes = [min(step, fp - i * step) for i in range(parts) if fp - i * step > 0]
        ins = [lv.alloc(padded * (s + (k - 1 if i else 0)) // fp) for i, s in enumerate(sizes) if i]
        outs = [lv.alloc(self.size(cout, s + (k - 1 if i else 0) - (k - 1), h, w))
                for i, s in enumerate(sizes)]
        out = lv.alloc(self.size(cout, f, h, w))
        lv.free(*ins, *outs)
        return out

    def spatial_norm(self, name: str, c: int, f: int, h: int, w: int, strided: bool = False) -> int:
        """CogVideoXSpatialNorm3D(f, zq): returns norm * conv_y(zq) + conv_b(zq). GroupNorm
        makes a contiguous copy of a strided input (aten group_norm: input.contiguous())."""
        lv = self.live
        parts = 0                                   # z_first, z_rest: locals until return
        if f > 1 and f % 2 == 1:
            parts = lv.alloc(self.size(self.zc, 1, h, w)) + lv.alloc(self.size(self.zc, f - 1, h, w))
        zq = lv.alloc(self.size(self.zc, f, h, w))
        if self.returned:                           # conv_y, conv_b first, bound to locals
            y = self.conv3d(name + ".conv_y", 1, self.zc, c, f, h, w)
            bias = self.conv3d(name + ".conv_b", 1, self.zc, c, f, h, w)
            norm = self._group_norm(c, f, h, w, strided)
            prod = lv.alloc(self.size(c, f, h, w))
            out = lv.alloc(self.size(c, f, h, w))
            lv.free(prod, y, bias, norm, zq, parts)
            return out
        norm = self._group_norm(c, f, h, w, strided)
        y = self.conv3d(name + ".conv_y", 1, self.zc, c, f, h, w)
        prod = lv.alloc(self.size(c, f, h, w))
        lv.free(y)
        bias = self.conv3d(name + ".conv_b", 1, self.zc, c, f, h, w)
        out = lv.alloc(self.size(c, f, h, w))
        lv.free(prod, bias, norm, zq, parts)
        return out

    def _group_norm(self, c: int, f: int, h: int, w: int, strided: bool) -> int:
        copy = self.live.alloc(self.size(c, f, h, w)) if strided else 0
        norm = self.live.alloc(self.size(c, f, h, w))
        self.live.free(copy)
        return norm

    def resnet(self, name: str, cin: int, cout: int, f: int, h: int, w: int,
               strided: bool = False) -> int:
        """CogVideoXResnetBlock3D on a live (cin, f, h, w) input (`strided`: an upsampler's
        permuted output); returns its output."""
        lv = self.live
        n1 = self.spatial_norm(name + ".norm1", cin, f, h, w, strided)
        a1 = lv.alloc(n1)                           # SiLU
        lv.free(n1)
        c1 = self.conv3d(name + ".conv1", 3, cin, cout, f, h, w)
        lv.free(a1)
        n2 = self.spatial_norm(name + ".norm2", cout, f, h, w)
        lv.free(c1)
        a2 = lv.alloc(n2)
        lv.free(n2)
        c2 = self.conv3d(name + ".conv2", 3, cout, cout, f, h, w)
        lv.free(a2)
        short = lv.alloc(self.size(cout, f, h, w)) if cin != cout else 0
        out = lv.alloc(self.size(cout, f, h, w))
        lv.free(c2, short)
        return out

    def upsample(self, c: int, f: int, h: int, w: int, compress: bool) -> tuple[int, int]:
        """CogVideoXUpsample3D on a live (c, f, h, w) input; returns (output, frames)."""
        lv = self.live
        if compress and f > 1 and f % 2 == 1:
            f2 = 1 + 2 * (f - 1)
            parts = lv.alloc(self.size(c, 1, 2 * h, 2 * w)) + \
                lv.alloc(self.size(c, 2 * (f - 1), 2 * h, 2 * w))
            up = lv.alloc(self.size(c, f2, 2 * h, 2 * w))
            lv.free(parts)
        elif compress:
            f2 = 2 * f if f > 1 else 1
            up = lv.alloc(self.size(c, f2, 2 * h, 2 * w))
        else:                                       # per frame: (b t, c, h, w) copy, x2
            f2 = f
            flat = lv.alloc(self.size(c, f, h, w))
            up = lv.alloc(self.size(c, f, 2 * h, 2 * w))
            lv.free(flat)
        if compress:                                # (b, c, t) -> (b t, c) for the 2-D conv:
            flat = lv.alloc(up)                     # a copy; the per-frame path is already
            lv.free(up)                             # laid out so (reshape of a permute back)
            up = flat
        out = lv.alloc(self.size(c, f2, 2 * h, 2 * w))
        lv.free(up)
        return out, f2

    def chunk(self, lat_f: int) -> int:
        """Decoder3D.forward on `lat_f` latent frames; returns the output video bytes. Each
        block's input stays bound in Decoder3D.forward while the block runs."""
        lv = self.live
        old, self.caches = (self.caches, {}) if self.returned else ({}, self.caches)
        h, w, f = self.lat_h, self.lat_w, lat_f
        block_in = self.conv3d("conv_in", 3, self.zc, self.chs[0], f, h, w)
        x = block_in
        for i in range(2):                          # mid block
            y = self.resnet(f"mid.{i}", self.chs[0], self.chs[0], f, h, w)
            lv.free(x if i else 0)
            x = y
        for lvl, cout in enumerate(self.chs):
            lv.free(block_in)                       # the previous block's input
            block_in = x
            cin = self.chs[lvl - 1] if lvl else self.chs[0]
            for r in range(self.resnets):
                y = self.resnet(f"up{lvl}.{r}", cin if r == 0 else cout, cout, f, h, w,
                                strided=lvl > 0 and r == 0)
                lv.free(x if r else 0)
                x = y
            if lvl < len(self.chs) - 1:
                y, f = self.upsample(cout, f, h, w, lvl < self.t_ups)
                lv.free(x)
                x, h, w = y, 2 * h, 2 * w
        lv.free(block_in)
        n = self.spatial_norm("norm_out", self.chs[-1], f, h, w)
        lv.free(x)
        a = lv.alloc(n)
        lv.free(n)
        out = self.conv3d("conv_out", 3, self.chs[-1], 3, f, h, w)
        lv.free(a, *old.values())                   # >= 0.31: _decode rebinds conv_cache
        return out


def cogvideox_decode(cfg: dict, b: int, frames: int, out_h: int, out_w: int,
                     e: int, returned: bool = False) -> tuple[int, int]:
    """(peak live bytes, largest tensor) of AutoencoderKLCogVideoX.decode for b videos of
    `frames` frames (diffusers 0.30.x), the chunks' outputs and their concatenation included.
    Hand check at 5 frames of 64 x 96 (one chunk of 2 latent frames, bf16): 178,286,592 B,
    what an eager CPU run of the 0.30.2 decoder holds at its peak (counted storage by storage)."""
    ds = int(cfg.get("downsample", 8))
    tc = int(cfg.get("temporal_compression", 4))
    fb = int(cfg.get("frame_batch", 2))
    lat_f = (frames - 1) // tc + 1
    n_chunks = max(lat_f // fb, 1)
    rem = lat_f % fb
    dec = _Decoder(cfg, b, (max(1, out_h // ds), max(1, out_w // ds)), e,
                   returned)
    kept = []
    for i in range(n_chunks):
        start = fb * i + (0 if i == 0 else rem)
        end = min(fb * (i + 1) + rem, lat_f)
        kept.append(dec.chunk(end - start))
    if not returned:                                # _clear_fake_context_parallel_cache
        dec.live.free(*dec.caches.values())
    dec.live.alloc(sum(kept))                       # torch.cat(dec, dim=2); >= 0.31 with the
    return dec.live.peak, dec.live.largest          # last chunk's caches still bound
