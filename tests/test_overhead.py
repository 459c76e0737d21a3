from vramplan import overhead
from vramplan.hardware import get_gpu

MiB = 2**20


def test_allocator_rounding():
    assert overhead.round_request(1) == 512
    assert overhead.round_request(513) == 1024
    assert overhead.segment_size(1000) == 2 * MiB          # small pool
    assert overhead.segment_size(1 * MiB + 1) == 20 * MiB  # 1-10 MiB: 20 MiB segments
    assert overhead.segment_size(10 * MiB) == 10 * MiB
    assert overhead.segment_size(11 * MiB) == 12 * MiB     # large: rounded to 2 MiB


def test_context_lazy_vs_legacy():
    a100, v100 = get_gpu("nvidia-a100-sxm4-80gb"), get_gpu("nvidia-v100-sxm2-16gb")
    lazy = overhead.cuda_context_bytes(a100)
    eager = overhead.cuda_context_bytes(v100)
    # driver/runtime 200 MiB + a 1 KiB stack per resident thread (SMs x max threads per SM,
    # hwdb generations.toml) + kernel images: lazy 150 MiB + cuBLAS 512 MiB, eager 700 MiB
    assert (a100.compute_units, a100.max_threads_per_sm) == (108, 2048)
    assert lazy == (200 + 108 * 2048 // 1024 + 150 + 512) * MiB == 1078 * MiB
    assert (v100.compute_units, v100.max_threads_per_sm) == (80, 2048)
    assert eager == (200 + 80 * 2048 // 1024 + 700) * MiB == 1060 * MiB
