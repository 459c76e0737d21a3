"""The CogVideoX VAE decode walked op by op (workloads/diffusion/cogvideox_vae.py): diffusers
0.30.x's AutoencoderKLCogVideoX.decode, the release the published CogVideoX-5b case (J17) ran."""
import json
from pathlib import Path

from vramplan.estimate import estimate
from vramplan.workloads.diffusion.cogvideox_vae import _Decoder, cogvideox_decode

COG5B = {"latent_channels": 16, "block_out_channels": [128, 256, 256, 512],
         "layers_per_block": 3, "downsample": 8, "temporal_compression": 4, "frame_batch": 2}
CASES = Path(__file__).parent / "data" / "public_cases.jsonl"


def _dec(h=4, w=4):
    return _Decoder({"latent_channels": 16, "block_out_channels": [32]}, 1, (h, w), 2)


def test_kernel_one_conv_keeps_its_whole_input():
    # CogVideoXCausalConv3d keeps inputs[:, :, -k + 1:].clone(): for k = 1 that is [0:], all
    # f frames. 16 ch x 8 frames x 4 x 4 x 2 B = 4,096 B kept, F.pad's copy 4,096 B,
    # the 32-channel output 8,192 B; after the call the cache and the output stay.
    d = _dec()
    out = d.conv3d("c", 1, 16, 32, 8, 4, 4)
    assert d.caches == {"c": 4096}
    assert out == 8192
    assert d.live.peak == 4096 + 4096 + 8192
    assert d.live.cur == 4096 + 8192


def test_kernel_three_conv_keeps_two_frames_and_frees_its_old_cache():
    # k = 3: torch.cat(cache + input) is f + 2 frames (16 x 10 x 16 x 2 = 5,120 B), the cache
    # 2 frames (1,024 B), F.pad's copy (f + 2) x 6 x 6 (11,520 B); the cat is freed before the
    # conv writes its 8 frames of 32 ch (8,192 B): peak 1,024 + 11,520 + 8,192 = 20,736.
    # A second call drops the first cache before keeping the new one.
    d = _dec()
    d.conv3d("c", 3, 16, 32, 8, 4, 4)
    assert d.caches == {"c": 1024}
    assert d.live.peak == 1024 + 11520 + 8192
    d.conv3d("c", 3, 16, 32, 8, 4, 4)
    assert d.caches == {"c": 1024}


def test_spatial_norm_odd_frames_keeps_both_interpolated_parts():
    # 32 ch, 3 frames, 4 x 4, bf16: z_first 512 + z_rest 1,024 (bound to locals until return),
    # zq 1,536, GroupNorm 3,072; conv_y: cache 1,536 + pad 1,536 + out 3,072; prod 3,072;
    # conv_b: cache 1,536 + pad 1,536 + out 3,072; the sum 3,072. Peak at the sum:
    # 1,536 + 1,536 + 3,072 + 1,536 (y's cache) + 3,072 (prod) + 1,536 + 3,072 + 3,072 = 18,432;
    # after it: the two kernel-1 caches and the output, 6,144.
    d = _dec()
    out = d.spatial_norm("n", 32, 3, 4, 4)
    assert out == 3072
    assert d.live.peak == 18432
    assert d.live.cur == 1536 + 1536 + 3072
    # even frame count: no first / rest split (2 frames: peak 11,264)
    d = _dec()
    d.spatial_norm("n", 32, 2, 4, 4)
    assert d.live.peak == 11264


def test_decode_equals_the_eager_count_of_diffusers_0_30_2():
    # diffusers 0.30.2 AutoencoderKLCogVideoX (CogVideoX-5b config, no weights, bf16) decoding
    # 5 frames (2 latent frames) of 64 x 96 on CPU, every storage counted as it is created and
    # freed (benchmarks/trace_fidelity_modules.py's method, eager): 178,286,592 B at the peak.
    # The largest tensor: level 3's first conv1 input after F.pad, 256 ch x (8 + 2) frames x
    # (64 + 2) x (96 + 2) x 2 B = 33,116,160. The walk is
    # 6,144 B short (one latent-sized 16 x 2 x 8 x 12 bf16 tensor, 0.003 %). The tracer (fake
    # tensors) at 49 x 480 x 720: 11.337 GiB, the walk 11.3345.
    peak, largest = cogvideox_decode(COG5B, 1, 5, 64, 96, 2)
    assert 178_286_592 - 6_144 <= peak <= 178_286_592
    assert largest == 256 * 10 * 66 * 98 * 2


def test_the_published_case_j17_within_three_percent():
    # J17: CogVideoX-5b, 49 x 480 x 720, bf16, peak allocated 34,087,007,945 B (diffusers-torchao
    # README, 2024-09-04). The earlier closed form read -5.0 %; the walk -2.4 %.
    case = next(c for c in map(json.loads, CASES.read_text().splitlines())
                if c["case_id"] == "J17")
    est = estimate(dict(case["scenario"], stack="diffusers@0.30"), with_max_batch=False)
    err = (est.peak_allocated_bytes - case["value_bytes"]) / case["value_bytes"]
    assert abs(err) < 0.03


def test_diffusers_0_31_spatial_norm_holds_conv_y_and_conv_b_together():
    # >= 0.31 computes conv_y(zq) and conv_b(zq) first (both bound) and pads inside the conv:
    # 32 ch, 2 frames, 4 x 4, bf16: zq 1,024; conv_y cache 1,024 + out 2,048; conv_b cache
    # 1,024 + out 2,048; GroupNorm 2,048; prod 2,048; the sum 2,048: peak 13,312 (0.30.x:
    # 11,264, conv_y's output freed after the product, above).
    d = _Decoder({"latent_channels": 16, "block_out_channels": [32]}, 1, (4, 4), 2,
                 returned=True)
    d.spatial_norm("n", 32, 2, 4, 4)
    assert d.live.peak == 13312


def test_diffusers_0_31_decode_equals_the_eager_count_of_0_42_1():
    # diffusers 0.42.1 (the pinned .venv) AutoencoderKLCogVideoX, 13 frames (4 latent frames,
    # two chunks) of 64 x 96, bf16, eager CPU storage count: 276,652,032 B at the peak; the walk
    # is 12,288 B short (two latent-sized tensors). The tracer at 49 x 480 x 720: 14.737 GiB,
    # the walk 14.735; 0.30.x's decode there: 11.334 (the previous chunk's caches, 3.4 GiB).
    peak, _ = cogvideox_decode(COG5B, 1, 13, 64, 96, 2, returned=True)
    assert 276_652_032 - 12_288 <= peak <= 276_652_032


def test_the_stack_version_picks_the_decoder():
    # J17's scenario: diffusers@0.30 (the source's date) runs 0.30.x's decode, diffusers
    # without a version the newest (>= 0.31: mechanism cogvideox-vae-returned-caches, with
    # its note); no stack (pytorch) keeps 0.30.x's.
    case = next(c for c in map(json.loads, CASES.read_text().splitlines())
                if c["case_id"] == "J17")
    acts = {}
    for st in ("diffusers@0.30", "diffusers", None):
        sc = dict(case["scenario"], **({"stack": st} if st else {}))
        est = estimate(sc, with_max_batch=False)
        acts[st] = est.footprint.phases["vae-decode"]["activations"]
        applied = any("cogvideox-vae-returned-caches" in n for n in est.footprint.notes)
        assert applied == (st == "diffusers")
    assert acts["diffusers@0.30"] == cogvideox_decode(COG5B, 1, 49, 480, 720, 2)[0]
    assert acts["diffusers"] == cogvideox_decode(COG5B, 1, 49, 480, 720, 2, returned=True)[0]
    assert acts[None] == acts["diffusers@0.30"]
