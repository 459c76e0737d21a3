"""A small layer-graph engine: what a vision network holds in memory, op by op.

A builder (``vision_nets``) walks a network's layers on a `Graph`, which keeps symbolic tensors
(per-sample shape and dtype) and, for each op, the tensors autograd saves for backward, with the
mechanism PyTorch uses:

* conv / linear / matmul save their inputs; BatchNorm / LayerNorm / GroupNorm save their input;
* in-place ReLU returns the same storage and saves its output; GELU / SiLU / sigmoid save input
  (or output) as their backward formula needs; max-pool saves input and int64 indices;
  residual adds, concatenation, resizes and average pools save nothing;
* mixed precision (autocast) casts conv / linear / matmul inputs to 16 bit (a new tensor when the
  input is fp32) and keeps 16-bit copies of their weights; softmax / log_softmax / layer_norm run
  in fp32; adds promote to the wider dtype;
* a tensor only enters autograd when something upstream requires grad (frozen stages and
  inference save nothing).

`Graph.curves()` then replays liveness (`liveness.py`): the forward pass (a tensor lives from its producer
to its last consumer, or until backward when saved), the backward pass in reverse (a saved tensor
is freed after the backward of its earliest saver; the gradient of a tensor lives from the
backward of its last consumer to that of its producer; parameter gradients appear op by op) and
reports the live activation bytes at the top of each phase. Storages are counted once, so views
and in-place results are not double counted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .liveness import DTYPE_BYTES, Curves, liveness  # noqa: F401 (Curves: the result type)


@dataclass(eq=False)
class T:
    """A symbolic tensor: per-sample shape (channels first, or tokens x features)."""

    shape: tuple
    dtype: str
    batched: bool = True
    requires_grad: bool = False
    storage: int = -1
    producer: int = -1
    consumers: list = field(default_factory=list)
    savers: list = field(default_factory=list)

    @property
    def numel(self) -> int:
        return int(math.prod(self.shape))

    def nbytes(self, batch: int) -> int:
        return self.numel * DTYPE_BYTES[self.dtype] * (batch if self.batched else 1)

    @property
    def c(self) -> int:
        return self.shape[0]

    @property
    def spatial(self) -> tuple:
        return self.shape[1:]


@dataclass
class Op:
    name: str
    inputs: list
    output: T | None
    params: int = 0
    trainable: bool = True
    kind: str = ""
    macs: int = 0          # multiply-adds of the forward, per sample (flops.py)


def _tup(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class Graph:
    """Records ops of one network. `dt`: activation dtype of pure-precision runs; `amp`: the
    16-bit dtype autocast computes conv/linear/matmul in (None without autocast);
    `training`: whether autograd records (False for inference)."""

    def __init__(self, dt: str = "f32", amp: str | None = None, training: bool = True):
        self.dt, self.amp, self.training = dt, amp, training
        self.ops: list[Op] = []
        self.tensors: list[T] = []
        self.frozen = False          # builders set this around frozen stages
        self.frozen_bn = False       # BN layers are FrozenBatchNorm2d (detectron2, torchvision det.)
        self.batch1 = False          # batch of one: some layout copies are no-ops
        self.param_split: dict[str, int] = {"matmul": 0, "norm": 0, "other": 0}
        self.frozen_params = 0
        self.buffers = 0             # BN running statistics (not parameters, still weights)
        self.largest_param = 0       # elements of the biggest single parameter op
        self.transient = 0           # a one-off workspace at the loss (bytes, not per sample)
        self.loss_fp32 = False       # losses see fp32 logits (autocast, mmcv force_fp32)
        self.softmax_saves_input = False   # torch < 1.11 (pytorch#64000, fixed by #65242)
        self._storage = 0
        self.blocks: list[tuple[int, int]] = []   # [start, end) op ranges a checkpoint can wrap
        self._bstart = 0
        self._curves: dict = {}      # curves() by (outputs, checkpoint, graph size)
        self.held: dict[int, int] = {}   # inference: storage -> last op a Python reference
        # in the framework's module code keeps it to (hold; liveness._storages)

    # --- bookkeeping -------------------------------------------------------------------------
    def _new(self, shape, dtype=None, batched=True, like: T | None = None) -> T:
        t = T(tuple(int(s) for s in shape), dtype or self.dt, batched)
        if like is not None:
            t.storage = like.storage
        else:
            self._storage += 1
            t.storage = self._storage
        self.tensors.append(t)
        return t

    def begin_block(self) -> None:
        """Mark the start of a block (the unit activation checkpointing wraps)."""
        self._bstart = len(self.ops)

    def end_block(self) -> None:
        self.blocks.append((self._bstart, len(self.ops)))

    def hold(self, t: T, to_end: bool = False) -> None:
        """Inference: `t` stays alive to the last op recorded so far (or to the end of the
        forward), as a caller's local variable keeps a module's input until the call returns.
        Training graphs ignore it (autograd's saved tensors decide there)."""
        if not self.training:
            until = 10 ** 9 if to_end else len(self.ops) - 1
            self.held[t.storage] = max(self.held.get(t.storage, -1), until)

    def input(self, shape, dtype=None) -> T:
        t = self._new(shape, dtype)
        t.producer = -1
        return t

    def _op(self, name, inputs, out_shape=None, *, out_dtype=None, params=0, saves=(),
            group="other", inplace_of: T | None = None, kind="", macs=0) -> T | None:
        idx = len(self.ops)
        trainable = params > 0 and not self.frozen
        rg = self.training and (trainable or any(t.requires_grad for t in inputs))
        out = None
        if out_shape is not None:
            out = self._new(out_shape, out_dtype, like=inplace_of)
            out.producer, out.requires_grad = idx, rg
        for t in inputs:
            t.consumers.append(idx)
        if rg:
            for t in saves:
                t.savers.append(idx)
        if params:
            self.largest_param = max(self.largest_param, params)
            if self.frozen:
                self.frozen_params += params
            self.param_split[group] += params
        self.ops.append(Op(name, list(inputs), out, params, trainable, kind, int(macs)))
        return out

    @property
    def params(self) -> int:
        return sum(self.param_split.values())

    # --- precision helpers -------------------------------------------------------------------
    def _lowp(self, x: T) -> T:
        """Autocast cast of a matmul input to 16 bit (a new tensor unless already 16-bit)."""
        if self.amp and x.dtype == "f32":
            return self._op("cast", [x], x.shape, out_dtype=self.amp)
        return x

    def _fp32(self, x: T) -> T:
        """Autocast runs softmax / layer_norm / losses in fp32: a cast copy of 16-bit inputs."""
        if self.amp and x.dtype != "f32":
            return self._op("cast", [x], x.shape, out_dtype="f32")
        return x

    def _weight_copy(self, n: int, group="matmul"):
        """Autocast keeps a 16-bit copy of each conv/linear weight (saved for backward)."""
        if not self.amp or n == 0:
            return []
        w = self._new((n,), self.amp, batched=False)
        w.producer = len(self.ops)
        return [w]

    # --- convolutional ops -------------------------------------------------------------------
    def conv(self, x: T, cout: int, k=3, stride=1, pad=None, dil=1, groups=1, bias=False,
             name="conv", transpose=False) -> T:
        nd = len(x.spatial)
        k, s, d = _tup(k, nd), _tup(stride, nd), _tup(dil, nd)
        p = _tup(pad if pad is not None else tuple(dd * (kk - 1) // 2 for kk, dd in zip(k, d)), nd)
        if transpose:
            sp = tuple((h - 1) * ss - 2 * pp + dd * (kk - 1) + 1
                       for h, kk, ss, pp, dd in zip(x.spatial, k, s, p, d))
        else:
            sp = tuple((h + 2 * pp - dd * (kk - 1) - 1) // ss + 1
                       for h, kk, ss, pp, dd in zip(x.spatial, k, s, p, d))
        taps = cout * (x.c // groups) * math.prod(k)
        n = taps + (cout if bias else 0)
        xi = self._lowp(x)
        wc = self._weight_copy(n) if not self.frozen else []
        # every weight tap meets every output position (a transposed conv: every input one)
        pos = math.prod(x.spatial if transpose else sp)
        return self._op(name, [xi] + wc, (cout,) + sp, out_dtype=xi.dtype, params=n,
                        saves=[xi] + wc, group="matmul", kind="conv", macs=taps * pos)

    def bn(self, x: T, name="bn", eval_mode=False, affine=True) -> T:
        """BatchNorm (also SyncBN): saves its input; per-channel stats are negligible."""
        if self.frozen_bn:   # FrozenBatchNorm2d: x * scale + bias from 4 buffers, nothing saved
            self.buffers += 4 * x.c
            return self._op(name, [x], x.shape, out_dtype=x.dtype, group="norm", kind="bn")
        self.buffers += 2 * x.c
        return self._op(name, [x], x.shape, out_dtype=x.dtype, params=2 * x.c if affine else 0,
                        saves=[x], group="norm", kind="bn")

    def gn(self, x: T, name="gn") -> T:
        xi = self._fp32(x) if self.amp else x
        return self._op(name, [xi], x.shape, out_dtype=xi.dtype, params=2 * x.c, saves=[xi],
                        group="norm", kind="norm")

    def relu(self, x: T, inplace=True) -> T:
        """ReLU: in place (torchvision, mmcv) it rewrites x's storage and saves the result."""
        out = self._op("relu", [x], x.shape, out_dtype=x.dtype, inplace_of=x if inplace else None)
        if self.training and out.requires_grad:
            out.savers.append(len(self.ops) - 1)
        return out

    def act(self, x: T, kind="gelu") -> T:
        """GELU / SiLU / sigmoid / tanh / hardswish (not in place): saves the input (sigmoid,
        tanh: the output)."""
        out = self._op(kind, [x], x.shape, out_dtype=x.dtype, saves=[x] if kind not in
                       ("sigmoid", "tanh") else [], kind="act")
        if kind in ("sigmoid", "tanh") and out.requires_grad:
            out.savers.append(len(self.ops) - 1)
        return out

    def maxpool(self, x: T, k=3, stride=2, pad=1) -> T:
        nd = len(x.spatial)
        k, s, p = _tup(k, nd), _tup(stride, nd), _tup(pad, nd)
        sp = tuple((h + 2 * pp - kk) // ss + 1 for h, kk, ss, pp in zip(x.spatial, k, s, p))
        out = self._op("maxpool", [x], (x.c,) + sp, out_dtype=x.dtype, saves=[x])
        if out.requires_grad:  # int64 indices, the output's size
            idx = self._new(out.shape, "i64")
            idx.producer = out.producer
            idx.savers.append(out.producer)
        return out

    def pool(self, x: T, size) -> T:
        """Average / adaptive average pooling to `size` (per spatial dim): saves nothing."""
        sp = _tup(size, len(x.spatial))
        return self._op("avgpool", [x], (x.c,) + sp, out_dtype=x.dtype)

    def resize(self, x: T, size) -> T:
        """Bilinear / nearest interpolation: backward needs only the sizes."""
        sp = _tup(size, len(x.spatial))
        return self._op("resize", [x], (x.c,) + sp, out_dtype=x.dtype)

    def add(self, a: T, b: T, inplace=False) -> T:
        dt = "f32" if "f32" in (a.dtype, b.dtype) else a.dtype
        return self._op("add", [a, b], a.shape, out_dtype=dt,
                        inplace_of=a if inplace and a.dtype == dt else None)

    def mul(self, a: T, b: T) -> T:
        """Elementwise product of two activations (SE gating, layer scale): saves both."""
        shape = a.shape if a.numel >= b.numel else b.shape
        dt = "f32" if "f32" in (a.dtype, b.dtype) else a.dtype
        return self._op("mul", [a, b], shape, out_dtype=dt, saves=[a, b])

    def scale(self, x: T, learnable=True) -> T:
        """x * gamma with a per-channel parameter (layer scale): saves x for gamma's grad."""
        c = x.shape[-1]
        return self._op("scale", [x], x.shape, out_dtype=x.dtype, params=c if learnable else 0,
                        saves=[x] if learnable else [])

    def cat(self, xs: list, dim=0) -> T:
        shape = list(xs[0].shape)
        shape[dim] = sum(t.shape[dim] for t in xs)
        dt = "f32" if any(t.dtype == "f32" for t in xs) else xs[0].dtype
        return self._op("cat", list(xs), shape, out_dtype=dt)

    def copy(self, x: T, shape=None, name="copy") -> T:
        """A layout change that materialises (permute().contiguous(), roll, window partition)."""
        return self._op(name, [x], shape or x.shape, out_dtype=x.dtype)

    def view(self, x: T, shape) -> T:
        """A view: same storage, no memory."""
        return self._op("view", [x], shape, out_dtype=x.dtype, inplace_of=x)

    def dropout(self, x: T, p: float, feature=False) -> T:
        """Dropout with p > 0 in training: a new output and a saved 1-byte mask (CUDA);
        p == 0 or eval returns the input itself. `feature`: Dropout2d (per-channel noise)."""
        if p <= 0 or not self.training:
            return x
        out = self._op("dropout", [x], x.shape, out_dtype=x.dtype)
        if out.requires_grad:
            m = self._new(x.shape[:1] if feature else x.shape, "u8" if not feature else x.dtype)
            m.producer = out.producer
            m.savers.append(out.producer)
        return out

    def drop_path(self, x: T, p: float) -> T:
        """Stochastic depth as timm / mmcv write it, `x.div(keep) * mask`: the product saves
        the scaled x (a full-size tensor) and the per-sample mask."""
        if p <= 0 or not self.training:
            return x
        y = self._op("div", [x], x.shape, out_dtype=x.dtype)
        return self._op("droppath", [y], x.shape, out_dtype=x.dtype, saves=[y])

    # --- token ops ---------------------------------------------------------------------------
    def linear(self, x: T, out: int, bias=True, name="linear") -> T:
        n = x.shape[-1] * out + (out if bias else 0)
        xi = self._lowp(x)
        wc = self._weight_copy(n) if not self.frozen else []
        rows = math.prod(x.shape[:-1])
        return self._op(name, [xi] + wc, x.shape[:-1] + (out,), out_dtype=xi.dtype, params=n,
                        saves=[xi] + wc, group="matmul", kind="linear",
                        macs=rows * x.shape[-1] * out)

    def ln(self, x: T, name="ln", affine=True) -> T:
        """LayerNorm over the last dim: saves its input (fp32 under autocast)."""
        xi = self._fp32(x)
        return self._op(name, [xi], x.shape, out_dtype=xi.dtype,
                        params=2 * x.shape[-1] if affine else 0, saves=[xi], group="norm",
                        kind="norm")

    def matmul(self, a: T, b: T, out_shape, name="bmm", contract: int | None = None) -> T:
        """A batched matmul; `contract`: the length summed over per output element (the head
        width for attention scores, the keys per query for probs @ v), default a's last dim."""
        ai, bi = self._lowp(a), self._lowp(b)
        k = a.shape[-1] if contract is None else contract
        return self._op(name, [ai, bi], out_shape, out_dtype=ai.dtype, saves=[ai, bi],
                        kind="matmul", macs=math.prod(out_shape) * int(k))

    def softmax(self, x: T) -> T:
        xi = self._fp32(x) if self.amp else x
        out = self._op("softmax", [xi], x.shape, out_dtype=xi.dtype)
        if out.requires_grad:
            out.savers.append(out.producer)
            if self.softmax_saves_input:   # the old backward formula referenced `self` too
                xi.savers.append(out.producer)
        return out

    def sdpa(self, q: T, k: T, v: T, heads: int, out_shape=None, keys: int | None = None) -> T:
        """Fused attention (flash / memory-efficient): saves q, k, v, the output and a
        per-row fp32 log-sum-exp; never the n x n scores. `keys`: the keys each query attends
        to (a window's tokens under windowed attention; default all of k's rows): QK^T and
        PV are queries x keys x width multiply-adds each (width: the output's, q may be a packed
        qkv view)."""
        qi, ki, vi = self._lowp(q), self._lowp(k), self._lowp(v)
        shape = out_shape or qi.shape
        nk = k.shape[0] if keys is None else keys
        macs = 2 * shape[0] * nk * shape[-1]     # q / k / v / out all `width` wide
        out = self._op("sdpa", [qi, ki, vi], shape, out_dtype=qi.dtype,
                       saves=[qi, ki, vi], kind="attention", macs=macs)
        if out.requires_grad:
            out.savers.append(out.producer)
            lse = self._new((heads, q.shape[0]), "f32")
            lse.producer = out.producer
            lse.savers.append(out.producer)
        return out

    def param(self, n: int, group="other"):
        """A parameter used without an op of its own (class token, position embedding)."""
        self.param_split[group] += n
        if self.frozen:
            self.frozen_params += n

    def custom(self, name, inputs, out_shape, saves=(), out_dtype=None, params=0) -> T:
        return self._op(name, inputs, out_shape, out_dtype=out_dtype or self.dt, params=params,
                        saves=saves)

    # --- analysis (liveness.py) ---------------------------------------------------------------
    def curves(self, outputs: list | None = None, checkpoint: bool = False) -> "Curves":
        """Liveness curves over the step, split in per-sample and batch-independent bytes.
        Computed once per outputs / checkpoint while the graph has the same ops (a graph is
        walked once and cached by the footprint; the curves do not depend on the batch)."""
        key = (tuple(id(t) for t in outputs or ()), bool(checkpoint), len(self.ops),
               len(self.tensors))
        if key not in self._curves:
            self._curves[key] = liveness(self, outputs, checkpoint)
        return self._curves[key]
