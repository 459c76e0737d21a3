"""Scientific arrays (task "array"): named arrays with shapes and dtypes plus the work buffers
of the operations on them, against the seed articles' "working set x 1.5" rule of thumb.

Memory = sum over arrays of count x prod(shape) x dtype bytes, times `copies`, plus:
- FFT (cuFFT) of the largest array: the plan's work area is about the size of the transform
  (cuFFT docs: workspace up to the size of the signal for power-of-2/3/5/7 sizes, more for
  large prime factors), and an out-of-place transform also holds its complex output
  (R2C: the last axis becomes n/2 + 1 complex values);
- Krylov solvers over a vector the size of the largest array: CG keeps ~4 vectors (x is the
  array itself; r, p, Ap, and z when preconditioned), BiCGSTAB ~7, GMRES(m) m + 1 basis vectors
  plus an (m + 1) x m Hessenberg matrix.
Allocator 'driver': CuPy / raw CUDA codes allocate directly or through a pool that keeps freed
blocks; reserved == allocated is assumed (set a pool limit to make it true).
"""
from __future__ import annotations

import math

from ...scenario.extra import ARRAY_DTYPES
from ...units import counted
from ..base import Footprint, extra_of

SOLVER_VECTORS = {"none": 0, "cg": 4, "bicgstab": 7}


def array_bytes(a: dict) -> int:
    return a.get("count", 1) * math.prod(a["shape"]) * ARRAY_DTYPES[a["dtype"]]


def work_buffer_bytes(wb: dict, shape: list[int], dtype: str) -> dict[str, int]:
    """Work buffers of FFT and solver over an array of `shape` (elements of `dtype`)."""
    out: dict[str, int] = {}
    n = math.prod(shape)
    if wb["fft"] != "none":
        cbytes = ARRAY_DTYPES[wb["fft_dtype"]]
        real = not dtype.startswith("complex")
        m = n // shape[-1] * (shape[-1] // 2 + 1) if real else n
        out["fft_workspace"] = m * cbytes
        if wb["fft"] == "out-of-place":
            out["fft_output"] = m * cbytes
    if wb["solver"] != "none":
        vb = ARRAY_DTYPES[wb["solver_dtype"]]
        if wb["solver"] == "gmres":
            m = wb["restart"]
            out["solver_vectors"] = (m + 1) * n * vb + (m + 1) * m * vb
        else:
            out["solver_vectors"] = SOLVER_VECTORS[wb["solver"]] * n * vb
    return out


def footprint(scenario, spec, device) -> Footprint:
    ex = extra_of(scenario, "array")
    arrays = ex["arrays"]
    copies = ex.get("copies", 1)
    data = sum(array_bytes(a) for a in arrays) * copies
    comps = {"arrays": int(data)}
    largest = max(arrays, key=array_bytes) if arrays else None
    if largest is not None:
        comps.update(work_buffer_bytes(ex["work_buffers"], largest["shape"], largest["dtype"]))
    total = sum(comps.values())
    bw = {"bytes_per_pass": int(2 * total),
          "rule_of_thumb": {"memory_bytes": int(1.5 * data),
                            "rule": "dataset size x 1.5 (the seed's 'consider intermediate "
                                    "results')",
                            "explicit_bytes": int(total),
                            "why_different": "the 1.5 factor is a guess at intermediates; the "
                                             "explicit sum counts each work buffer: an "
                                             "out-of-place FFT doubles its array and more, "
                                             "GMRES(30) holds 31 vectors, CG 4"}}
    notes = [f"{counted(len(arrays), 'array')} x {counted(copies, 'copy', 'copies')}; work "
             "buffers over the largest array"]
    big = max([array_bytes(a) // a.get("count", 1) for a in arrays] +
              [v for k, v in comps.items() if k != "arrays"] + [0])
    return Footprint(components=comps, peak_phase="compute", largest_allocation=int(big),
                     allocator="driver", bandwidth=bw, notes=notes,
                     batch_capacity=1)  # batch_size does not apply: one frame / array set
