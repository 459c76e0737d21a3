"""Make CPU kernels allocate as CUDA kernels do (`--kernels cuda`).

A trace on device 'cpu' runs CPU kernels. These differences change memory (DESIGN.md, checked with
torch 2.13); each is emulated by rewriting one call in a TorchFunctionMode:

1. SDPA with dropout: the CPU falls back to the math path (materialised s x s scores and a float
   mask); CUDA stays in the fused flash / memory-efficient kernel (dropout from a Philox seed, no
   mask). Emulated by calling the fused CPU kernel with dropout_p=0 (same saved tensors: out, lse).
   SDPA the CPU runs on the math path and CUDA on the memory-efficient kernel (a value head
   unlike the query head, as MLA's; a float mask that requires grad, as T5's position bias):
   `sdpa.MemEfficientSDPA`, which saves and allocates what that kernel does (its docstring).
2. Dropout masks: CPU `dropout` is `x * bernoulli(empty_like(x)) / (1-p)` and saves a mask in the
   input's dtype; CUDA calls `native_dropout` and saves a 1-byte bool mask. Emulated by calling
   `torch.native_dropout` (it has a CPU kernel with the CUDA memory behaviour).
3. Autocast op lists: CUDA autocast runs softmax / log_softmax / sum / cumsum / prod with an fp32
   output and casts the inputs of layer_norm, group_norm, pow, rsqrt, exp, log, the losses, ... to
   fp32; CPU autocast does neither. Emulated inside an active CPU autocast region.
4. Optimizers default to `foreach` on CUDA (whole-list temporaries, e.g. a copy of every
   `exp_avg_sq` in Adam), to a per-tensor loop on CPU; see `optimizer_kwargs`.
5. torchvision's `roi_align`: without its C++ ops it runs a Python fallback that keeps every
   bilinear sample for backward; CUDA's kernel keeps the rois only (`roi_align.py`).
6. Mamba2 and Gated DeltaNet layers (transformers' hub-kernel functions): the CPU runs their
   torch fallbacks; CUDA runs mamba_ssm's combined scan and fla's chunked delta rule with
   causal-conv1d (`linear_mixers.py`).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .linear_mixers import Patched as LinearMixersPatched
from .roi_align import Patched as RoIAlignPatched
from .sdpa import mem_efficient_sdpa, needs_mem_efficient

LOW = (torch.float16, torch.bfloat16)
_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
              "enable_gqa")

# CUDA autocast "fp32_set_opt_dtype" ops: run with dtype=float32 (output fp32)
_SET_DTYPE = {"softmax", "log_softmax", "sum", "cumsum", "prod", "_softmax"}
# CUDA autocast "fp32" ops: inputs cast to fp32 (torch/csrc/autocast: the CUDA fp32 list) that the
# CPU list does not already hold
_FP32 = {"layer_norm", "group_norm", "pow", "__pow__", "__rpow__", "rsqrt", "exp", "expm1", "log",
         "log10", "log2", "log1p", "reciprocal", "acos", "asin", "cosh", "sinh", "tan", "erfinv",
         "softplus", "logsumexp", "renorm", "dist", "frobenius_norm", "nuclear_norm",
         "cosine_similarity", "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
         "upsample_bilinear2d", "upsample_linear1d", "upsample_trilinear3d", "upsample_bicubic2d"}


def _to32(x):
    if isinstance(x, torch.Tensor) and x.dtype in LOW:
        return x.float()
    if isinstance(x, (list, tuple)):
        return type(x)(_to32(v) for v in x)
    return x


class CudaKernels(TorchFunctionMode):
    """Rewrite the calls whose CPU kernel allocates differently from the CUDA one."""

    def __init__(self, dropout=True, sdpa=True, autocast=True):
        super().__init__()
        self.dropout, self.sdpa, self.autocast = dropout, sdpa, autocast
        self.rewrites: dict[str, int] = {}

    def _count(self, what):
        self.rewrites[what] = self.rewrites.get(what, 0) + 1

    def __enter__(self):
        # torchvision's roi_align is Python, not a torch function: swapped while active
        self._roi_align = RoIAlignPatched(self._count).__enter__()
        self._mixers = LinearMixersPatched(self._count).__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._roi_align.__exit__(*exc)
            self._mixers.__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if self.dropout and func is F.dropout:
            x = args[0] if args else kwargs.get("input")
            p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
            train = args[2] if len(args) > 2 else kwargs.get("training", True)
            inplace = args[3] if len(args) > 3 else kwargs.get("inplace", False)
            if train and 0 < p < 1 and x.numel() > 0 and not inplace:
                self._count("dropout->native_dropout")
                return torch.native_dropout(x, p, True)[0]
            return func(*args, **kwargs)
        if self.sdpa and func is F.scaled_dot_product_attention:
            return self._sdpa(func, args, kwargs)
        if self.autocast and torch.is_autocast_enabled("cpu"):
            name = getattr(func, "__name__", "")
            # F.softmax / log_softmax pass dtype=None through __torch_function__: unset too
            if name in _SET_DTYPE and kwargs.get("dtype") is None:
                x = args[0] if args else kwargs.get("input")
                if isinstance(x, torch.Tensor) and x.dtype in LOW:
                    self._count(f"autocast-fp32:{name}")
                    if name == "sum" and len(args) == 1 and not kwargs:
                        return func(x, dtype=torch.float32)
                    kwargs["dtype"] = torch.float32
                    return func(*args, **kwargs)
            elif name in _FP32:
                if any(isinstance(a, torch.Tensor) and a.dtype in LOW for a in args):
                    self._count(f"autocast-fp32:{name}")
                    with torch.autocast("cpu", enabled=False):
                        return func(*_to32(args), **{k: _to32(v) for k, v in kwargs.items()})
        return func(*args, **kwargs)

    def _sdpa(self, func, args, kwargs):
        call = dict(zip(_SDPA_ARGS, args), **kwargs)
        if call.get("dropout_p", 0.0) > 0:
            self._count("sdpa-dropout->fused")
            call["dropout_p"] = 0.0
        q, k, v = call.pop("query"), call.pop("key"), call.pop("value")
        mask = call.get("attn_mask")
        if call.get("enable_gqa") or not needs_mem_efficient(q, k, v, mask):
            return func(q, k, v, **call)
        self._count("sdpa-v-head->mem-efficient" if v.shape[-1] != q.shape[-1]
                    else "sdpa-bias-grad->mem-efficient")
        if torch.is_autocast_enabled(q.device.type):   # CUDA autocast: SDPA in 16 bits
            dt = torch.get_autocast_dtype(q.device.type)
            q, k, v, mask = (t.to(dt) if isinstance(t, torch.Tensor) and t.is_floating_point()
                             and t.dtype not in (dt, torch.float64) else t
                             for t in (q, k, v, mask))
        return mem_efficient_sdpa(q, k, v, mask, call.get("is_causal", False),
                                  call.get("scale"))


class NoKernels:
    """Null context for `--kernels cpu`."""
    rewrites: dict = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def kernel_mode(kernels: str):
    return CudaKernels() if kernels == "cuda" else NoKernels()


def optimizer_kwargs(kernels: str, name: str) -> dict:
    """The implementation flag CUDA would pick by default: foreach for every torch optimizer."""
    if kernels == "cuda" and name in ("adamw", "adam", "sgd", "sgd-momentum", "adafactor"):
        return {"foreach": True}
    return {}
