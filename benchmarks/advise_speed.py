"""Speed of `estimate(..., with_max_batch=True)` plus the advisor's recommendations for the
default scenario of every workload family (goal: <= 50 ms each), and of a whole
`advise()` (recommendations, the fit solver or room to grow, the table of every GPU).

    python benchmarks/advise_speed.py [--repeat N]

Each figure is the median wall time after a warm-up call (catalog, layer graphs and the
sweep engine's caches are filled by then), in one run so the figures compare like with like.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

from vramplan.advisor import advise, recommendations  # noqa: E402
from vramplan.estimate import estimate  # noqa: E402

GPU = "nvidia-h100-sxm5-80gb"
# the default scenario of each family: the model alone (its default task and sizes)
CASES = {
    "decoder": {"model": "meta-llama/Llama-3.1-8B"},
    "encoder": {"model": "bert-large-uncased"},
    "encoder-decoder": {"model": "t5-large"},
    "cnn": {"model": "torchvision/resnet50"},
    "vit": {"model": "torchvision/vit_b_16"},
    "detection": {"model": "mmdet/faster-rcnn_r50_fpn"},
    "segmentation": {"model": "mmseg/pspnet_r50-d8"},
    "unet": {"model": "unet/unet-2d"},
    "diffusion": {"model": "stabilityai/stable-diffusion-xl-base-1.0"},
    "serve (decoder)": {"model": "meta-llama/Llama-3.1-8B", "task": "serve"},
    "render": {"task": "render"},
    "volume": {"task": "volume"},
    "array": {"task": "array", "arrays": [{"name": "a", "shape": [8192, 8192]}]},
}


def timed(fn, repeat: int) -> float:
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    print(f"on {GPU}; median of {a.repeat}\n")
    print(f"{'family':18s} {'estimate+max batch ms':>22s} {'+ recommendations ms':>21s} "
          f"{'recs':>5s} {'goal':>5s} {'advise() ms':>12s}")
    worst = 0.0
    for name, d in CASES.items():
        d = {"gpu": GPU, **d}

        def est_and_recs():
            e = estimate(d)
            return e, recommendations(d, est=e)

        t_est = timed(lambda: estimate(d), a.repeat)
        t_both = timed(est_and_recs, a.repeat)
        n = len(est_and_recs()[1])
        t_adv = timed(lambda: advise(d), max(1, a.repeat // 3))
        worst = max(worst, t_both)
        print(f"{name:18s} {t_est * 1e3:22.1f} {t_both * 1e3:21.1f} {n:5d} "
              f"{'ok' if t_both <= 0.05 else 'over':>5s} {t_adv * 1e3:12.1f}")
    print(f"\nslowest estimate + recommendations: {worst * 1e3:.1f} ms (goal 50 ms)")


if __name__ == "__main__":
    main()
