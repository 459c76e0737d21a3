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
    assert 0.3 * 2**30 < lazy < 1.3 * 2**30
    assert eager > 0.9 * 2**30
