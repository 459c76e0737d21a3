"""Hardware video encode / decode sessions (NVENC / NVDEC), the `video` key of task "render".

What: the surfaces a session holds, by stream, resolution and surface format: NV12 (4:2:0
8-bit) = 1.5 B/pixel, P010 (4:2:0 10-bit in 16-bit containers) = 3 B/pixel, YUV444 3 or 6.
Why a key and not a task: the contract's task list is fixed; video surfaces are driver
allocations (no caching allocator) like a frame's render targets, and a game-streaming plan
needs both at once, so `video` rides on task "render" (with `render_targets: []` for a pure
transcode box).

Surface counts follow the NVIDIA Video Codec SDK samples (NvEncoder / NvDecoder classes):
- encode: input surfaces = (B-frames + 1) + lookahead depth + 3 extra output delay (NvEncoder's
  m_nEncoderBuffer), each with a bitstream buffer; plus reconstructed / reference frames kept by
  the encoder (assumed 1 + max(1, B-frames) frames) and a motion/statistics buffer (assumed
  1/16 of a frame);
- decode: ulNumDecodeSurfaces (NvDecoder: 20 for H.264 / HEVC, 12 for AV1 - the DPB plus
  headroom) + 2 output surfaces mapped for post-processing;
- transcode: one decode + one encode session per stream.
Not modelled (not sourced): the driver's per-session internal scratch and the CUDA context of
each process. The measured per-session figure from nvidia-smi varies with driver and preset;
the SDK documents no number, so none is claimed here.
"""
from __future__ import annotations

from ...scenario.extra import VIDEO_SURFACE_FORMATS

DECODE_SURFACES = {"h264": 20, "hevc": 20, "av1": 12}
BITSTREAM_FRACTION = 0.5   # bitstream buffer per input surface, as a fraction of a NV12 frame


def sessions(v: dict) -> dict[str, int]:
    """Encode and decode session counts for the `video` object."""
    n = int(v["streams"])
    mode = v["mode"]
    return {"encode": n if mode in ("encode", "transcode") else 0,
            "decode": n if mode in ("decode", "transcode") else 0}


def video_bytes(v: dict, height: int, width: int) -> dict[str, int]:
    """Bytes by component ('video_surfaces', 'video_references', 'video_bitstream')."""
    px = height * width
    frame = int(px * VIDEO_SURFACE_FORMATS[v["format"]])
    nv12 = int(px * 1.5)
    s = sessions(v)
    enc_in = v["surfaces"] or (v["bframes"] + 1 + v["lookahead"] + 3)
    enc_ref = 1 + max(1, v["bframes"])
    dec = v["surfaces"] or (DECODE_SURFACES[v["codec"]] + 2)
    surfaces = s["encode"] * enc_in * frame + s["decode"] * dec * frame
    refs = s["encode"] * (enc_ref * frame + frame // 16)
    bitstream = s["encode"] * enc_in * int(nv12 * BITSTREAM_FRACTION)
    return {"video_surfaces": surfaces, "video_references": refs, "video_bitstream": bitstream}


def seed_check(v: dict, height: int, width: int, total: int) -> dict:
    """The seed article's "3 x 4K encodes need 12 GB" beside the surface-based figure."""
    per = total / max(1, sessions(v)["encode"] + sessions(v)["decode"])
    return {
        "rule_of_thumb": {"claim": "3 concurrent 4K encodes need 12 GB (4 GB per session)",
                          "bytes_per_session": 4 * 10**9},
        "surface_model_bytes_per_session": int(per),
        "why_different": "a 4K NV12 surface is 12.4 MB; even a deep encoder queue (input, "
                         "reference and bitstream buffers) holds a few hundred MB per session. "
                         "The seed's 4 GB/session has no source; the CUDA context of the process "
                         "(~0.3-0.6 GiB, once per process) and driver scratch are the unmodelled "
                         "remainder - measure with nvidia-smi before trusting either figure.",
        "sourced": "surface counts from the Video Codec SDK samples; no per-session total is "
                   "documented by NVIDIA, so this check is an estimate, not a measurement",
    }
