from vramplan.scenario.keys import EXTRA_KEYS
from vramplan.workloads.graphics.video import seed_check, video_bytes


def test_nv12_and_p010_surfaces():
    v = EXTRA_KEYS["video"]({"mode": "decode", "codec": "hevc", "surfaces": 4})
    assert video_bytes(v, 2160, 3840)["video_surfaces"] == 4 * 3840 * 2160 * 3 // 2
    v = EXTRA_KEYS["video"]({"mode": "decode", "format": "p010", "surfaces": 4})
    assert video_bytes(v, 2160, 3840)["video_surfaces"] == 4 * 3840 * 2160 * 3


def test_transcode_counts_both_sessions_and_seed_claim():
    v = EXTRA_KEYS["video"]({"mode": "transcode", "streams": 3})
    enc = video_bytes(EXTRA_KEYS["video"]({"mode": "encode", "streams": 3}), 2160, 3840)
    tr = video_bytes(v, 2160, 3840)
    assert sum(tr.values()) > sum(enc.values())
    chk = seed_check(v, 2160, 3840, sum(tr.values()))
    assert chk["rule_of_thumb"]["bytes_per_session"] > 5 * chk["surface_model_bytes_per_session"]
