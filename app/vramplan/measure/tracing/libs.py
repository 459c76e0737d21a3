"""The tracing libraries: imported on demand, with one clear error when one is missing.

torchvision's PyPI wheels are built against CUDA torch: with the CPU torch pinned here their
C++ ops (`torchvision::nms`, `roi_align`, ...) do not load, and torchvision 0.28's import then
fails at its unguarded `register_fake("torchvision::nms")`. transformers, timm and diffusers
import torchvision when it is installed, so they fail with it. `ensure_torchvision` declares
the two op schemas that registration needs, so that the pure-Python parts (models, transforms)
import, and gives `nms` a CPU kernel in Python (for detection traced on real CPU tensors);
`roi_align` and the other ops take torchvision's own Python fallbacks (under `--kernels cuda`
`roi_align` takes `roi_align.py`'s emulation of the CUDA kernel instead).
"""
from __future__ import annotations

import importlib
import sys

import torch

from ...errors import UnavailableError

_TV_LIB = None
PIP = {"transformers": "transformers", "timm": "timm", "torchvision": "torchvision",
       "diffusers": "diffusers"}


def ensure_torchvision() -> bool:
    """Import torchvision (True), declaring its C++ op schemas if the compiled ops did not
    load (see the module docstring); False when torchvision is not installed."""
    global _TV_LIB
    try:
        import torchvision  # noqa: F401
        return True
    except ImportError:
        return False
    except RuntimeError as exc:
        if "torchvision::" not in str(exc):
            raise
    for k in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[k]
    _TV_LIB = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        _TV_LIB.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _TV_LIB.impl("nms", _nms, "CPU")
    import torchvision  # noqa: F401,F811
    import torchvision.ops.boxes as boxes
    boxes._assert_has_ops = lambda: None   # nms has a schema and a CPU kernel now (below)
    return True


def _nms(dets, scores, iou_threshold):
    """Greedy non-maximum suppression (torchvision's CPU kernel, in Python) for mode 'cpu':
    the indices kept, by decreasing score."""
    x1, y1, x2, y2 = dets.unbind(1)
    area = (x2 - x1) * (y2 - y1)
    dead = torch.zeros(dets.shape[0], dtype=torch.bool)
    keep = []
    for i in scores.argsort(descending=True).tolist():
        if dead[i]:
            continue
        keep.append(i)
        w = (torch.minimum(x2[i], x2) - torch.maximum(x1[i], x1)).clamp(min=0)
        h = (torch.minimum(y2[i], y2) - torch.maximum(y1[i], y1)).clamp(min=0)
        inter = w * h
        dead |= inter / (area[i] + area - inter) > iou_threshold
    return torch.tensor(keep, dtype=torch.long)


def require(name: str):
    """Import a tracing library or raise UnavailableError naming the extra to install."""
    ensure_torchvision()
    try:
        return importlib.import_module(name)
    except ImportError:
        raise UnavailableError(f"tracing this model needs {PIP.get(name, name)} "
                               f"(pip install 'vramplan[tracing]')") from None
