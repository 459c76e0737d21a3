"""The key table's rows of the workload-specific keys (render, volume, array, video, the
decoders' inference keys and the multimodal ones): `extra` keys, kept in `Scenario.extra` and
emitted flat. Read through `scenario.keys`."""
from __future__ import annotations

from . import extra as X
from . import inference_keys as IK
from .contract_keys import BIG
from .multimodal_keys import MULTIMODAL_KEYS
from .parallel_keys import is_moe
from .schema import Key

__all__ = ["EXTRA"]

def _x(name, kind, label, doc, tasks, **kw) -> Key:
    return Key(name, kind, label, doc, tasks=tasks, extra=True, whole_floats=True,
               as_float=True, fold_case=True, **kw)


_R, _VOL, _ARR = ("render",), ("volume",), ("array",)
EXTRA = (
    _x("render_targets", "object", "Render targets", "targets of the frame: [{\"format\", "
       "\"count\" (1-16), \"name\", \"scale\" (0-4 per side), \"msaa\" (bool)}]; several "
       "colour targets = a G-buffer", _R, parse=X.render_targets,
       default=X.render_targets([{"name": "color", "format": "rgba8"},
                                 {"name": "depth", "format": "d32f"}])),
    _x("msaa", "choice", "MSAA", "samples per pixel", _R, choices=X.MSAA_SAMPLES,
       parse=X.msaa, default=1, unit="samples"),
    _x("swapchain_images", "int", "Swapchain images", "presentable 8-bit images (also the MSAA "
       "resolve target)", _R, lo=1, hi=8, default=3, unit="images"),
    _x("frames_in_flight", "int", "Frames in flight", "CPU-GPU frames in flight (per-frame "
       "upload buffers are part of geometry_budget)", _R, lo=1, hi=8, default=2,
       unit="frames"),
    _x("texture_budget", "size", "Texture budget", "resident textures", _R, default=0,
       unit="bytes"),
    _x("geometry_budget", "size", "Geometry budget", "vertex / index / acceleration-structure "
       "buffers", _R, default=0, unit="bytes"),
    _x("fps", "number", "Frame rate", "target frame rate for the bandwidth need", _R, lo=0.0,
       hi=1000.0, lo_open=True, default=60.0, unit="frames/s"),
    _x("overdraw", "number", "Overdraw", "fragments shaded per pixel in the geometry pass", _R,
       lo=1.0, hi=50.0, default=2.0),
    _x("texture_bytes_per_pixel", "number", "Texture bytes per fragment", "texture bytes "
       "fetched from DRAM per fragment", _R, lo=0.0, hi=1024.0, default=16.0, unit="bytes"),
    _x("channels", "int", "Channels", "values per voxel", _VOL, lo=1, hi=4096, default=1),
    _x("dtype", "choice", "Data type", "element type of the voxels", ("volume", "array"),
       choices=tuple(X.ARRAY_DTYPES), by_task={"volume": "float32"}, shown_tasks=_VOL),
    _x("copies", "int", "Copies", "volumes (or every array) resident at once: input, working, "
       "output...", ("volume", "array"), lo=1, hi=64, by_task={"volume": 3, "array": 1},
       unit="copies"),
    _x("patch", "resolution", "Patch", "[d, h, w] training patch of a 3-D network given as "
       "model (no model is accepted for volume yet: no effect)", _VOL, parse=X.patch,
       shown_tasks=(), unit="voxels"),
    _x("arrays", "object", "Arrays", "[{\"name\" (unique), \"shape\" (1-8 ints), \"dtype\" "
       "(default float32), \"count\" (default 1)}]", _ARR, parse=X.arrays, default=[],
       unit="elements"),
    _x("work_buffers", "object", "Work buffers", "{\"fft\": none | in-place | out-of-place, "
       "\"fft_dtype\", \"solver\": none | cg | bicgstab | gmres, \"restart\", "
       "\"solver_dtype\"} over the largest array / one volume", ("array", "volume"),
       parse=X.work_buffers, default=X.work_buffers({})),
    _x("video", "object", "Video sessions", "NVENC/NVDEC sessions {\"mode\", \"codec\", "
       "\"streams\", \"format\", \"surfaces\", \"lookahead\", \"bframes\"}; the frame is "
       "`resolution`", _R, parse=X.video),
    # inference on decoders (issue 21.5): speculative decoding and layers / experts in host
    # memory (scenario/inference_keys.py; workloads/transformer/speculative.py, offload_inference.py)
    _x("speculative", "object", "Speculative decoding", "{\"method\": draft_model | eagle | "
       "eagle3 | mtp | ngram, \"model\" (draft_model: the draft's catalog id), "
       "\"num_speculative_tokens\"} as vLLM's speculative_config: the proposer's weights, its "
       "KV cache and the verify step's extra tokens", ("generate", "serve"),
       families=("decoder",), where="decoders, tasks generate / serve",
       parse=IK.read_speculative, default_doc="none (no speculation)"),
    _x("offload_layers", "int", "Layers in host memory", "decoder layers whose weights stay in "
       "CPU memory (accelerate device_map 'cpu' for the last N layers), copied to the GPU for "
       "their forward", ("generate",), families=("decoder",),
       where="decoders, task generate", lo=0, hi=BIG, unit="layers", default_doc="0"),
    _x("offload_experts", "int", "MoE layers' experts in host memory", "MoE layers whose "
       "routed experts stay in CPU memory (llama.cpp --n-cpu-moe N: the first N); the GPU "
       "reads the experts a step routes to over the host link", ("generate",),
       families=("decoder",), where="MoE decoders, task generate", lo=0, hi=BIG,
       unit="layers", default_doc="0", shown_for=is_moe),     # like parallel.expert
) + MULTIMODAL_KEYS   # images, image_size (scenario/multimodal_keys.py)
