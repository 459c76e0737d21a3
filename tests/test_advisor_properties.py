"""Properties of the advisor over every workload family (hypothesis): a recommendation's
saving is estimate minus estimate and positive (or it says it raises memory and what it gains),
costs are non-negative, nothing that does not apply or is on already is recommended, every
plan re-estimates to fit with the headroom, and a plan that fits can grow exactly to the
batch it reports."""
from hypothesis import given, settings, strategies as st

from vramplan.advisor import advise
from vramplan.estimate import estimate
from vramplan.hardware import get_gpu
from vramplan.scenario import Scenario
from vramplan.vocab import TRANSFORMER_FAMILIES

PLANS = [
    {"model": "gpt2", "task": "train"},
    {"model": "Qwen/Qwen2.5-0.5B", "task": "lora", "seq_len": 1024},
    {"model": "facebook/opt-125m", "task": "qlora"},
    {"model": "meta-llama/Llama-3.2-1B", "task": "generate"},
    {"model": "gpt2", "task": "serve"},
    {"model": "meta-llama/Llama-3.1-8B", "task": "forward", "precision": "fp32"},
    {"model": "bert-base-uncased", "task": "train", "seq_len": 512},
    {"model": "t5-small", "task": "train", "seq_len": 512},
    {"model": "torchvision/resnet18", "task": "train"},
    {"model": "facebook/deit-tiny-patch16-224", "task": "train"},
    {"model": "mmseg/pspnet_r18-d8", "task": "forward"},
    {"model": "unet/unet-2d", "task": "train"},
    {"model": "stable-diffusion-v1-5/stable-diffusion-v1-5", "task": "denoise"},
    {"model": "stable-diffusion-v1-5/stable-diffusion-v1-5", "task": "lora"},
    {"model": "facebook/DiT-XL-2-256", "task": "denoise"},
    {"task": "volume", "resolution": [512, 512, 512], "dtype": "float64"},
    {"task": "array", "arrays": [{"name": "a", "shape": [8192, 8192], "dtype": "float64"}],
     "work_buffers": {"fft": "out-of-place"}},
    {"task": "render", "resolution": [2160, 3840], "msaa": 4},
]
GPUS = ["nvidia-t4", "nvidia-rtx-3060-12gb", "nvidia-rtx-4090", "nvidia-a100-sxm4-40gb",
        "nvidia-h100-sxm5-80gb", "amd-mi300x"]
ONLY_TRANSFORMERS = {"checkpointing-selective", "chunked-loss", "qlora", "tensor-parallel",
                     "pipeline-parallel", "context-parallel", "adafactor"}
ONLY_MULTI_GPU = {"zero-1", "zero-2", "zero-3", "tensor-parallel", "pipeline-parallel",
                  "context-parallel", "sequence-parallel", "loss-parallel"}
TRAINING_ONLY = {"checkpointing-full", "checkpointing-selective", "micro-batch",
                 "micro-batch-1", "adamw-8bit", "paged-adamw-8bit", "lion", "lora", "qlora",
                 "optimizer-in-backward", "offload-optimizer", "offload-activations"}


def _value(sc, key):
    v = getattr(sc, key, None) if key in Scenario.__dataclass_fields__ else sc.extra.get(key)
    if hasattr(v, "to_dict"):
        v = v.to_dict()
    return list(v) if isinstance(v, tuple) else v


@settings(max_examples=30, deadline=None)
@given(plan=st.sampled_from(PLANS), gpu=st.sampled_from(GPUS),
       batch=st.sampled_from([None, 2, 8, 64]), headroom=st.sampled_from(["5%", "15%", "1GiB"]))
def test_advice_properties(plan, gpu, batch, headroom):
    d = {**plan, "gpu": gpu}
    if batch is not None and plan["task"] not in ("serve", "array", "render"):
        d["batch_size"] = batch
    sc = Scenario.from_dict(d)
    adv = advise(sc, headroom=headroom, gpu_table_too=False)
    base = estimate(sc)
    assert adv.estimate.device_used_bytes == base.device_used_bytes
    family = sc.family
    for r in adv.recommendations:
        again = estimate(r.scenario)
        assert r.saves_bytes == base.device_used_bytes - again.device_used_bytes, r.id
        # saves device bytes, or on a serve plan grows the KV pool (serving_levers.pool_gain)
        assert r.saves_bytes > 0 or (r.increases_memory and r.gains) or \
            (r.pool_gain is not None and r.pool_gain[0] > 0), r.id
        c = r.cost
        for v in (c.compute_share, c.communication_bytes_per_step, c.communication_time_s,
                  c.host_bytes_per_step, c.host_time_s, c.time_share, c.score):
            assert v >= 0, (r.id, c)
        assert c.sources, r.id
        # a change of something: never to what the plan holds already
        assert any(_value(sc, k) != v for k, v in r.changes.items()), (r.id, r.changes)
        assert r.scenario != sc
        if family not in TRANSFORMER_FAMILIES:
            assert r.id not in ONLY_TRANSFORMERS, r.id
        if sc.parallel.gpus == 1:
            assert r.id not in ONLY_MULTI_GPU, r.id
        if not sc.is_training:
            assert r.id not in TRAINING_ONLY, r.id
        if r.id == "lora":
            assert sc.task == "train" and family in TRANSFORMER_FAMILIES + ("diffusion",)
    limit = adv.limit_bytes
    for p in adv.plans:
        e = estimate(p.scenario, gpu)
        assert e.device_used_bytes <= limit, p.changes
        if e.footprint.batch_capacity is not None:
            assert (e.max_batch_size or 0) >= 1
        assert p.cost.score >= 0
    if adv.fits and adv.growth.get("batch_size"):
        b = adv.growth["batch_size"]
        assert estimate(sc.replace(batch_size=b)).device_used_bytes <= limit
        assert estimate(sc.replace(batch_size=b + 1)).device_used_bytes > limit
    if adv.fits:
        assert get_gpu(gpu).usable_bytes - base.device_used_bytes >= 0
