"""Speed of one `estimate()` per workload family, as a ratio to the transformer baseline.

    python benchmarks/estimate_speed.py [--repeat N]

Each figure is the median wall time of one estimate (max batch search off, and on), after a
warm-up call (catalog, hardware database and layer graphs are cached by then). Printed in one
run so the ratios compare like with like on the same machine; the target is well under 10 ms
per estimate without the max-batch search.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

from vramplan.estimate import estimate  # noqa: E402

GPU = "nvidia-h100-sxm5-80gb"
CASES = {
    "transformer (decoder)": {"model": "meta-llama/Llama-3.1-8B", "task": "train",
                              "seq_len": 4096},
    "encoder": {"model": "bert-large-uncased", "task": "train", "seq_len": 512,
                "batch_size": 32},
    "encoder-decoder": {"model": "t5-large", "task": "train", "seq_len": 512},
    "cnn": {"model": "torchvision/resnet50", "task": "train", "batch_size": 64},
    "vit": {"model": "torchvision/vit_b_16", "task": "train", "batch_size": 64},
    "detection": {"model": "mmdet/faster-rcnn_r50_fpn", "task": "train", "batch_size": 2},
    "segmentation": {"model": "mmseg/pspnet_r50-d8", "task": "train", "batch_size": 4},
    "unet": {"model": "unet/unet-2d", "task": "train", "batch_size": 8},
    "diffusion": {"model": "stabilityai/stable-diffusion-xl-base-1.0", "task": "denoise"},
    "render": {"task": "render", "resolution": [2160, 3840]},
    "volume": {"task": "volume", "resolution": [256, 256, 256]},
    "array": {"task": "array", "arrays": [{"name": "a", "shape": [4096, 4096]}]},
}


def timed(d: dict, with_max_batch: bool, repeat: int) -> float:
    d = {"gpu": GPU, **d}
    estimate(d, with_max_batch=with_max_batch)
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        estimate(d, with_max_batch=with_max_batch)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    a = ap.parse_args()
    rows = [(name, timed(d, False, a.repeat), timed(d, True, max(3, a.repeat // 5)))
            for name, d in CASES.items()]
    base = rows[0][1]
    print(f"{'family':24s} {'estimate ms':>12s} {'ratio':>7s} {'with max batch ms':>18s}")
    for name, t, tm in rows:
        print(f"{name:24s} {t * 1e3:12.2f} {t / base:7.2f} {tm * 1e3:18.1f}")


if __name__ == "__main__":
    main()
