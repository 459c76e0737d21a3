"""Bandwidth, time and feasibility figures checked against values one can work out by hand:
the serving engine's pool and decode step, offload, MoE routing, per-token figures, the
max-batch search's cap, the roofline (compute and memory floors), per-generation capabilities,
and the sizes pipelines and models take."""
import tomllib

import pytest

from vramplan.errors import ScenarioError
from vramplan.estimate import MAX_BATCH_CAP, estimate
from vramplan.hardware import builtin_path, default_db, get_gpu, traits_of
from vramplan.workloads.transformer.traffic import experts_touched

H100 = "nvidia-h100-sxm5-80gb"
RTX4090 = "nvidia-geforce-rtx-4090"
LLAMA8 = "meta-llama/Llama-3.1-8B"
MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
KV_LLAMA8 = 2 * 32 * 8 * 128 * 2          # layers x kv_heads x head_dim x K,V x bf16 = 128 KiB
LAYER_LLAMA8 = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336   # q,o + k,v + MLP
EMBED_LLAMA8 = 128256 * 4096                # vocab x hidden (embedding; the head is the same)


def est(d, gpu=H100, mb=False):
    return estimate(d, gpu, with_max_batch=mb).to_dict()


# ---- serving: what the pool admits --------------------------------------------------------

def test_serve_figures_say_what_the_pool_admits():
    e = est({"model": LLAMA8, "task": "serve"})
    bw, comps = e["bandwidth"], e["per_gpu"]["components"]
    pool = comps["kv_cache"]
    assert bw["kv_bytes_per_token"] == KV_LLAMA8
    assert bw["kv_pool_tokens"] == pool // KV_LLAMA8 == 445_254
    # 131,072-token sequences: 445,254 // 131,072 = 3 at once; batch = those 3
    assert bw["context_tokens"] == 131_072
    assert e["max_batch_size"] == bw["concurrent_sequences"] == bw["tokens_per_step"] == 3
    assert bw["bytes_per_step"] == comps["weights"] + 3 * 131_072 * KV_LLAMA8
    assert bw["bytes_per_step"] <= comps["weights"] + pool          # was 2.22 TB
    assert bw["bytes_per_token"] * 3 == pytest.approx(bw["bytes_per_step"], rel=1e-12)
    assert any("'batch' is the sequences the engine decodes together" in n
               and "queues 253" in n for n in e["notes"])


def test_serve_capacity_is_at_the_stated_length():
    e = est({"model": LLAMA8, "task": "serve", "seq_len": 4096,
             "serving": {"max_model_len": 8192}})
    bw = e["bandwidth"]
    cap = bw["kv_pool_tokens"] // 4096            # 4,096-token requests, not 8,192-token ones
    assert e["max_batch_size"] == bw["concurrent_sequences"] == cap == 108
    assert bw["kv_pool_tokens"] // 8192 == 54
    assert bw["bytes_per_step"] == bw["weight_bytes_per_step"] + cap * 4096 * KV_LLAMA8


# ---- offload -------------------------------------------------------------------------------

def test_params_offload_without_zero3_is_refused_naming_what_it_needs():
    with pytest.raises(ScenarioError) as err:
        est({"model": LLAMA8, "task": "train", "offload": ["params"]}, RTX4090)
    msg = str(err.value)
    assert err.value.key == "offload"
    assert "parallel.zero to 3" in msg and "CPUOffload(offload_params=True)" in msg
    assert "offload_param" in msg


def test_params_offload_with_zero3_on_one_gpu_holds_the_gathered_units():
    e = estimate({"model": LLAMA8, "task": "train", "offload": ["params"],
                  "parallel": {"zero": 3}}, RTX4090, with_max_batch=False)
    fwd, bwd = e.footprint.phases["forward"], e.footprint.phases["backward"]
    for ph in (fwd, bwd):
        assert ph["weights"] == ph["gradients"] == ph["optimizer_states"] == 0
    # forward: unit computed + one prefetched in bf16, a unit's fp32 copy, the embedding / head
    assert fwd["temporary"] == LAYER_LLAMA8 * (2 * 2 + 4) + 2 * (2 * EMBED_LLAMA8)
    # backward peaks at the loss, where only the root unit (embedding / head) is gathered:
    # FSDP gathers each block in its own backward, after the logits are gone (2cac0de,
    # checked against the trace in tests/test_trace_parallel.py)
    assert bwd["temporary"] == 2 * (2 * EMBED_LLAMA8)
    assert e.peak_allocated_bytes < 157 * 2**30 / 4        # was 157.2 GiB, as without offload
    assert any("CPUOffload(offload_params=True)" in n for n in e.notes)


def test_params_offload_at_inference_holds_the_largest_module():
    e = est({"model": LLAMA8, "task": "generate", "offload": ["params"]})
    assert e["per_gpu"]["components"]["weights"] == 2 * EMBED_LLAMA8   # one 128256 x 4096 bf16
    assert e["bandwidth"]["host_link_bytes_per_step"] == e["bandwidth"]["weight_bytes_per_step"]
    with pytest.raises(ScenarioError, match="cpu-offload-gb"):
        est({"model": LLAMA8, "task": "serve", "offload": ["params"]})


# ---- MoE: only the routed experts move ------------------------------------------------------

def test_expected_distinct_experts():
    assert experts_touched(8, 2, 1) == pytest.approx(2.0)
    assert experts_touched(8, 2, 2) == pytest.approx(8 * (1 - 0.75 ** 2))     # 3.5
    assert experts_touched(8, 2, 4096) == pytest.approx(8.0)


def test_mixtral_int4_batch1_decode_reads_the_active_experts():
    e = est({"model": MIXTRAL, "task": "generate", "precision": "int4", "batch_size": 1},
            RTX4090)
    bw = e["bandwidth"]
    int4 = 0.5 + 2.5 / 128                    # GPTQ 4-bit + fp16 scale / zero per 128
    attention, mlp, router = 1_342_177_280, 45_097_156_608, 1_048_576
    kept = 2 * (131_072_000 + 131_072_000 + 266_240)     # embeddings, head, norms in fp16
    blocks = attention + mlp * 2 / 8 + router            # 2 of 8 experts per token
    assert bw["weight_bytes_per_step"] == pytest.approx(blocks * int4 + kept, rel=1e-6)
    kv = 2 * 32 * 8 * 128 * 2 * (512 + 256 // 2)         # KV read at the average context
    assert bw["kv_bytes_per_step"] == kv
    # hand check: active parameters x bytes per weight + KV read (embeddings kept 16-bit)
    assert bw["bytes_per_step"] == pytest.approx(12_879_925_248 * int4 + kv, rel=0.07)
    assert bw["bytes_per_step"] < e["per_gpu"]["components"]["weights"] / 3   # was all 24.8 GB
    assert bw["max_tokens_per_s"] > 100                                          # was <= 35
    assert any("uniform routing" in n for n in e["notes"])


def test_moe_bytes_grow_with_batch_towards_all_experts():
    w = [est({"model": MIXTRAL, "task": "generate", "precision": "int4", "batch_size": b},
             RTX4090)["bandwidth"]["weight_bytes_per_step"] for b in (1, 4, 64)]
    full = est({"model": MIXTRAL, "task": "load", "precision": "int4"},
               RTX4090)["per_gpu"]["components"]["weights"]
    assert w[0] < w[1] < w[2] <= full
    assert w[2] == pytest.approx(full, rel=1e-6)


# ---- per-token figures x tokens = per-step figures ---------------------------------------------

def test_generate_per_token_figures_are_the_step_over_its_batch():
    bw = est({"model": LLAMA8, "task": "generate", "batch_size": 8})["bandwidth"]
    assert bw["tokens_per_step"] == 8
    assert bw["kv_bytes_per_step"] == 8 * (512 + 128) * KV_LLAMA8
    assert bw["bytes_per_token"] * 8 == pytest.approx(bw["bytes_per_step"], rel=1e-12)
    assert bw["max_tokens_per_s"] * bw["min_step_time_s"] == pytest.approx(8)


# ---- max batch: no search cap reported ----------------------------------------------------------

def test_load_reports_no_batch_limit_instead_of_the_search_cap():
    e = est({"model": LLAMA8, "task": "load"}, mb=True)
    assert e["max_batch_size"] is None and e["max_batch_size"] != MAX_BATCH_CAP
    assert any("memory does not grow with batch_size" in n for n in e["notes"])


# ---- time: the roofline -------------------------------------------------------------------------

def test_fsdp_training_step_is_compute_bound_at_6n_plus_attention():
    e = est({"model": LLAMA8, "task": "train", "parallel": {"gpus": 8, "data": 8, "zero": 3}})
    bw = e["bandwidth"]
    n = 32 * LAYER_LLAMA8 + EMBED_LLAMA8            # matmul params per token (blocks + head)
    att = 4 * 32 * 2048 * 4096                       # forward attention per token: 4 L s d
    assert bw["flops_per_step"] == pytest.approx(2048 * (6 * n + 3 * att), rel=1e-9)
    assert bw["peak_tflops"] == 989.4                # H100 SXM dense bf16
    assert bw["compute_floor_s"] == pytest.approx(bw["flops_per_step"] / 989.4e12)
    assert bw["bound"] == "compute"
    assert bw["min_step_time_s"] == bw["compute_floor_s"] > bw["memory_floor_s"]
    assert bw["max_tokens_per_s"] == pytest.approx(2048 / bw["compute_floor_s"])
    assert 19_000 < bw["max_tokens_per_s"] < 22_000   # was 301,436 (memory floor only)
    assert bw["arithmetic_intensity"] == pytest.approx(bw["flops_per_step"] /
                                                       bw["bytes_per_step"])
    assert bw["needed_bandwidth_gbs"] == pytest.approx(
        bw["bytes_per_step"] / bw["compute_floor_s"] / 1e9)
    assert bw["ridge_intensity"] == pytest.approx(989.4e12 / (bw["achievable_bandwidth_gbs"]
                                                              * 1e9))


def test_decode_is_memory_bound_and_full_recomputation_adds_a_forward():
    bw = est({"model": LLAMA8, "task": "generate"})["bandwidth"]
    assert bw["bound"] == "memory" and bw["min_step_time_s"] == bw["memory_floor_s"]
    plain = est({"model": LLAMA8, "task": "train", "parallel": {"gpus": 8, "data": 8,
                                                                "zero": 3}})["bandwidth"]
    full = est({"model": LLAMA8, "task": "train", "checkpointing": "full",
                "parallel": {"gpus": 8, "data": 8, "zero": 3}})["bandwidth"]
    n = 32 * LAYER_LLAMA8 + EMBED_LLAMA8
    att = 4 * 32 * 2048 * 4096
    assert full["flops_per_step"] - plain["flops_per_step"] == \
        pytest.approx(2048 * (2 * n + att), rel=1e-9)


def test_vision_compute_is_counted_with_its_own_efficiency_note():
    """Issue 20.11 (before: 'compute floor not modelled' for every vision plan). ResNet-50 at
    224, batch 32: 4,089,184,256 multiply-adds forward per image (torchvision: 4.09 GFLOPS);
    training 3 x that less the stem conv's input gradient (64 x 3 x 7 x 7 x 112 x 112); the
    note quotes a CNN measurement, not an LLM's MFU."""
    e = est({"model": "torchvision/resnet50", "task": "train", "batch_size": 32})
    per_image = 2 * (3 * 4_089_184_256 - 64 * 3 * 7 * 7 * 112 * 112)
    assert e["bandwidth"]["flops_per_step"] == 32 * per_image
    roof = next(n for n in e["notes"] if n.startswith("roofline"))
    assert "ResNet-50" in roof and "MFU" not in roof


def test_diffusion_denoiser_flops_match_published_counts():
    from vramplan.catalog import get_model
    from vramplan.workloads.diffusion.flops import denoiser_flops, unet_macs
    unet = get_model("CompVis/stable-diffusion-v1-4").config["components"]["unet"]
    # BK-SDM (Kim et al. 2023): 338.7 G MACs for the SD v1.4 U-Net (convs + linears), 512 px
    assert unet_macs(unet, 64, 64, 77, cores=False) == pytest.approx(338.7e9, rel=0.01)
    dit = get_model("facebook/DiT-XL-2-256").config["components"]["transformer"]
    # DiT paper (Peebles & Xie 2023), table 4: DiT-XL/2 at 256 px 118.6 Gflops (multiply-adds)
    assert denoiser_flops(dit, 1, 32, 32, 1, 0) / 2 == pytest.approx(118.6e9, rel=0.02)
    e = est({"model": "stable-diffusion-v1-5/stable-diffusion-v1-5", "task": "denoise"})
    assert e["bandwidth"]["flops_per_step"] == pytest.approx(
        2 * 2 * unet_macs(unet, 64, 64, 77), rel=1e-9)       # CFG doubles the batch


# ---- per-generation capabilities -------------------------------------------------------------

def test_generation_table_states_each_capability_with_sources():
    caps = {d.compute_capability: d.capabilities for d in default_db().devices
            if d.vendor == "NVIDIA"}
    assert caps["7.5"] == {"bf16": False, "fp8": False, "flash_attention_2": False}
    assert caps["8.0"] == {"bf16": True, "fp8": False, "flash_attention_2": True}
    assert caps["8.9"]["fp8"] and caps["9.0"]["fp8"] and not caps["8.6"]["fp8"]
    assert all(set(c) == {"bf16", "fp8", "flash_attention_2"} for c in caps.values())
    assert traits_of(get_gpu("nvidia-t4")).supports("bf16") is False
    table = tomllib.loads((builtin_path() / "generations.toml").read_text())
    for g in table["generation"]:
        assert {"nv-cuda-guide-cc", "nv-te-support-matrix", "fa2-readme"} <= set(g["sources"])


def test_t4_defaults_to_fp16_and_warns_for_asked_bf16_flash_and_a100_for_fp8():
    # Turing (compute capability 7.5) has no bf16 tensor cores: the default follows the GPU
    e = est({"model": "meta-llama/Llama-3.2-1B", "task": "train", "attention": "flash"},
            "nvidia-t4")
    assert e["scenario"]["precision"] == "fp16-mixed"
    notes = " ".join(e["notes"])
    assert "no bf16 tensor cores" not in notes
    assert "FlashAttention-2 needs compute capability 8.0+" in notes
    assert e["bandwidth"]["compute_dtype"] == "fp16" and e["bandwidth"]["peak_tflops"] == 65.0
    asked = est({"model": "meta-llama/Llama-3.2-1B", "task": "train",
                 "precision": "bf16-mixed", "attention": "flash"}, "nvidia-t4")
    assert asked["scenario"]["precision"] == "bf16-mixed"     # asked for: kept, and warned
    assert any("no bf16 tensor cores before compute capability 8.0" in n for n in asked["notes"])
    assert asked["bandwidth"]["compute_rate_dtype"] == "fp32"  # bf16 runs emulated
    # same bytes either way (2 bytes per 16-bit value)
    assert asked["per_gpu"]["components"] == e["per_gpu"]["components"]
    a100 = est({"model": LLAMA8, "task": "generate", "precision": "fp8"}, "nvidia-a100-sxm4-80gb")
    assert any("FP8 tensor cores need compute capability 8.9+" in n for n in a100["notes"])
    h100 = est({"model": LLAMA8, "task": "generate", "precision": "fp8", "attention": "flash"})
    assert not any("compute capability" in n for n in h100["notes"])


def test_default_precision_follows_the_gpu_in_scenarios_links_and_gpu_changes():
    from vramplan.scenario import Scenario
    t4 = Scenario.from_dict({"model": "gpt2", "task": "train", "gpu": "nvidia-t4"})
    assert t4.precision == "fp16-mixed"
    assert Scenario.from_dict({"model": "gpt2", "task": "generate",
                               "gpu": "nvidia-t4"}).precision == "fp16"
    assert Scenario.from_dict({"model": "gpt2", "task": "qlora",
                               "gpu": "nvidia-t4"}).precision == "nf4"
    assert t4.to_query() == "model=gpt2&task=train&gpu=nvidia-t4"   # the default: not written
    assert Scenario.from_query(t4.to_query()) == t4
    h100 = t4.replace(gpu=H100)                      # a defaulted precision follows the GPU
    assert h100.precision == "bf16-mixed" and h100.replace(gpu="nvidia-t4") == t4
    kept = Scenario.from_dict({"model": "gpt2", "task": "train", "gpu": H100,
                               "precision": "fp32"}).replace(gpu="nvidia-t4")
    assert kept.precision == "fp32"                  # a chosen precision is kept


# ---- sizes a model takes ------------------------------------------------------------------------

@pytest.mark.parametrize("model,res,msg", [
    ("stabilityai/stable-diffusion-3-medium-diffusers", [1000, 1000], "1000 -> 992 or 1008"),
    ("stabilityai/stable-diffusion-xl-base-1.0", [1001, 1024], "1001 -> 1000 or 1008"),
    ("torchvision/vit_b_16", [230, 224], "230 -> 224 or 240"),
    ("unet/unet-2d", [500, 512], "500 -> 496 or 512"),
])
def test_sizes_a_model_cannot_take_are_refused_with_the_nearest(model, res, msg):
    task = "forward"
    with pytest.raises(ScenarioError) as err:
        est({"model": model, "task": task, "resolution": res})
    assert err.value.key == "resolution" and msg in str(err.value)


def test_sdxl_1000_is_a_multiple_of_8_and_flux_rounds_down():
    # diffusers' SDXL check_inputs wants multiples of 8: 1000 = 125 x 8 is taken as is
    est({"model": "stabilityai/stable-diffusion-xl-base-1.0", "task": "denoise",
         "resolution": [1000, 1000]})
    e = est({"model": "black-forest-labs/FLUX.1-dev", "task": "denoise",
             "resolution": [1000, 1000]})
    assert any("runs at 992x992" in n for n in e["notes"])
    same = est({"model": "black-forest-labs/FLUX.1-dev", "task": "denoise",
                "resolution": [992, 992]})
    assert e["per_gpu"] == same["per_gpu"]
    with pytest.raises(ScenarioError) as err:
        est({"model": "THUDM/CogVideoX-5b", "task": "denoise", "frames": 50})
    assert err.value.key == "frames" and "49 or 53" in str(err.value)


def test_family_rules_are_data():
    from vramplan.catalog import get_model
    from vramplan.workloads.diffusion.family import geometry_rule
    from vramplan.workloads.vision.family import resolution_rule
    assert geometry_rule(get_model("black-forest-labs/FLUX.1-dev"))["multiple"] == 16
    assert geometry_rule(get_model("THUDM/CogVideoX-5b"))["frames_step"] == 4
    assert resolution_rule(get_model("torchvision/vit_h_14").config)["multiple"] == 14
    assert resolution_rule(get_model("torchvision/resnet50").config) is None
