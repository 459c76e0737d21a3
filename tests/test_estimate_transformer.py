"""Hand-checkable transformer figures."""
from vramplan.estimate import estimate
from vramplan import optimizers, precision

A100 = "nvidia-a100-sxm4-80gb"


def est(**kw):
    d = {"gpu": A100}
    d.update(kw)
    return estimate(d, with_max_batch=False)


def test_llama2_7b_fp16_weights():
    e = est(model="meta-llama/Llama-2-7b-hf", task="load", precision="fp16")
    assert e.components["weights"] == 6_738_415_616 * 2


def test_llama31_8b_kv_per_token_bf16():
    from vramplan.catalog import get_model
    assert get_model("meta-llama/Llama-3.1-8B").arch.kv_bytes_per_token(2) == 128 * 1024


def test_gpt3_175b_fp16_weights_about_350gb():
    arch = {"hidden_size": 12288, "num_hidden_layers": 96, "num_attention_heads": 96,
            "intermediate_size": 49152, "vocab_size": 50257, "model_type": "gpt2",
            "n_embd": 12288, "n_layer": 96, "n_head": 96, "n_positions": 2048}
    e = est(architecture=arch, task="load", precision="fp16")
    assert 345e9 < e.components["weights"] < 355e9


def test_mixed_precision_adam_is_16_bytes_per_param():
    e = est(model="meta-llama/Llama-2-7b-hf", task="train", precision="bf16-mixed",
            optimizer="adamw", batch_size=1, seq_len=128)
    n = 6_738_415_616
    ph = e.footprint.phases["optimizer-step"]
    assert ph["weights"] + ph["gradients"] + ph["optimizer_states"] == 16 * n
    assert ph["temporary"] == 4 * n          # foreach: one copy of exp_avg_sq -> 20 B/param


def test_pure_bf16_adam_states_in_param_dtype():
    assert optimizers.state_bytes("adamw", 10, 2) == 40
    assert optimizers.state_bytes("sgd", 10, 4) == 0
    assert optimizers.state_bytes("sgd-momentum", 10, 4) == 40
    assert 2 * 10 < optimizers.state_bytes("adamw-8bit", 4096 * 10, 4) / 4096 < 2.1 * 10


def test_adafactor_factored():
    assert optimizers.state_bytes("adafactor", 100 * 200, 4, [(100, 200, 1)]) == 4 * 300


def test_quantized_weight_ordering():
    assert precision.weights_bytes(10**9, 10**6, "int4") < \
        precision.weights_bytes(10**9, 10**6, "int8") < precision.weights_bytes(10**9, 10**6, "bf16")


def test_components_sum_to_allocated_and_figures_ordered():
    e = est(model="meta-llama/Llama-3.2-3B-Instruct", task="train", batch_size=2, seq_len=1024,
            precision="bf16", optimizer="adamw")
    torch_keys = {k: v for k, v in e.footprint.components.items()}
    assert sum(torch_keys.values()) == e.peak_allocated_bytes
    assert e.peak_reserved_bytes - e.peak_allocated_bytes == e.components["allocator_slack"]
    assert e.device_used_bytes >= e.peak_reserved_bytes + e.components["cuda_context"]


def test_generate_kv_and_decode_peak():
    e = est(model="meta-llama/Llama-2-13b-chat-hf", task="generate", batch_size=4, seq_len=512,
            new_tokens=512, precision="fp16", attention="sdpa")
    kv = 4 * (512 + 511) * 2 * 40 * 5120 * 2
    assert e.footprint.peak_phase == "decode"
    assert e.components["kv_cache"] == kv


def test_serve_fills_to_utilization():
    e = est(model="meta-llama/Meta-Llama-3-8B", task="serve", gpu="nvidia-h100-sxm5-80gb")
    dev = e.gpu
    assert e.components["kv_cache"] > 40 * 2**30
    assert abs(e.device_used_bytes - 0.9 * dev.usable_bytes) < 0.08 * dev.usable_bytes


def test_to_dict_shape():
    d = est(model="bert-base-uncased", task="forward", batch_size=8, seq_len=128,
            precision="fp32").to_dict()
    assert set(["scenario", "gpu", "per_gpu", "fits", "headroom_bytes", "max_batch_size",
                "bandwidth", "recommendations"]) <= set(d)
    assert set(d["per_gpu"]) == {"components", "peak_allocated_bytes", "peak_reserved_bytes",
                                 "device_used_bytes"}
    for k in ("weights", "gradients", "optimizer_states", "activations", "kv_cache",
              "temporary", "cuda_context", "allocator_slack"):
        assert k in d["per_gpu"]["components"]
    assert d["recommendations"] == []


def test_max_batch_size_bisection():
    e = estimate({"model": "meta-llama/Llama-2-7b-hf", "task": "generate", "seq_len": 512,
                  "new_tokens": 512, "precision": "fp16", "attention": "sdpa", "gpu": A100})
    mb = e.max_batch_size
    assert mb > 1
    assert estimate({**e.scenario.to_dict(), "batch_size": mb}, with_max_batch=False).fits
    assert not estimate({**e.scenario.to_dict(), "batch_size": mb + 1},
                        with_max_batch=False).fits


def test_serve_max_batch_is_the_pools_full_length_concurrency():
    """vLLM reports 'maximum concurrency' = KV pool tokens / max_model_len, capped by
    max_num_seqs; memory itself does not grow with the batch (the pool is pre-allocated)."""
    from vramplan.estimate import estimate
    e = estimate({"model": "meta-llama/Meta-Llama-3-8B", "task": "serve",
                  "gpu": "nvidia-h100-sxm5-80gb"}).to_dict()
    pool_tokens = e["bandwidth"]["kv_pool_tokens"]
    assert e["max_batch_size"] == min(256, pool_tokens // 8192)
    # Llama-3-8B: 128 KiB of bf16 KV per token
    assert pool_tokens == e["per_gpu"]["components"]["kv_cache"] // (128 * 1024)
    short = estimate({"model": "meta-llama/Meta-Llama-3-8B", "task": "serve",
                      "serving": {"max_model_len": 1024, "max_num_seqs": 64},
                      "gpu": "nvidia-h100-sxm5-80gb"})
    assert short.max_batch_size == 64            # capped by the scheduler, not the pool
