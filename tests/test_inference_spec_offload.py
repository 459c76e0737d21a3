"""Issue 21.5: speculative decoding (`speculative`) and inference offload (`offload_layers`,
`offload_experts`), each figure computed by hand in the test."""
import pytest

from vramplan.errors import ScenarioError
from vramplan.estimate import estimate

GIB = 2**30
BASE = {"model": "meta-llama/Llama-3.1-70B", "task": "generate", "gpu": "H100"}
DRAFT = {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B",
         "num_speculative_tokens": 4}


def _est(**kw):
    return estimate({**BASE, **kw}, with_max_batch=False).to_dict()


def test_draft_model_adds_its_weights_and_its_kv_for_the_same_context():
    """Llama-3.2-1B: 1,235,814,400 parameters (tied embeddings) in bf16 = 2,471,628,800 B; its
    KV 2 x 16 layers x 8 KV heads x 64 x 2 B = 32,768 B per token. Prompt 512 (the generate
    default): prefill cache + 512 x 32,768. Decode (256 new tokens, last step at 767 tokens):
    both caches hold the 4 candidates: target + 4 x 327,680 (80 layers x 8 x 128 x 2 x 2 B),
    draft 771 x 32,768 instead of 512 x 32,768; the verify forward's logits are 5 tokens'."""
    plain, spec = _est(), _est(speculative=DRAFT)
    p0, p1 = plain["phases"], spec["phases"]
    for ph in ("prefill", "decode"):
        assert p1[ph]["weights"] - p0[ph]["weights"] == 2 * 1_235_814_400
    assert p1["prefill"]["kv_cache"] - p0["prefill"]["kv_cache"] == 512 * 32_768
    assert p1["decode"]["kv_cache"] - p0["decode"]["kv_cache"] == \
        4 * 327_680 + 771 * 32_768
    # logits of 5 positions instead of 1, fp32 upcast beside the bf16 ones: 4 x 128256 x 6 B
    assert p1["decode"]["activations"] - p0["decode"]["activations"] == 4 * 128_256 * 6
    bw = spec["bandwidth"]
    assert bw["draft_weight_bytes"] == 2_471_628_800
    assert bw["draft_kv_bytes_per_token"] == 32_768
    assert bw["speculative_tokens"] == 4 and bw["verify_tokens_per_step"] == 5


def test_eagle3_head_under_vllm_by_hand():
    """Llama-3.1-8B + an EAGLE-3 head, k = 3, serve: one layer (q, o 4096^2; k, v 4096 x 1024;
    SwiGLU 3 x 4096 x 14336), q/k/v reading 2h (+4096 x 48 x 128), fc 3h -> h, its own lm_head
    32000 x 4096, four norms: 424,689,664 parameters, 849,379,328 B in bf16. Its one layer
    caches 2 x 8 x 128 x 2 = 4,096 B per token beside the target's 131,072."""
    sc = {"model": "meta-llama/Llama-3.1-8B", "task": "serve", "gpu": "H100"}
    plain = estimate(sc, with_max_batch=False)
    spec = estimate({**sc, "speculative": {"method": "eagle3", "num_speculative_tokens": 3}},
                    with_max_batch=False)
    params = (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 4096 * 48 * 128
              + 3 * 4096 * 4096 + 32000 * 4096 + 4 * 4096)
    assert params == 424_689_664
    assert spec.bandwidth["draft_weight_bytes"] == 2 * params
    assert spec.components["weights"] - plain.components["weights"] == 2 * params
    assert spec.bandwidth["kv_bytes_per_token"] == 131_072 + 4_096
    # the sampler scores 1 + 3 tokens of every sequence: 3 more x 256 seqs x 128256 x 12 B
    assert spec.components["activations"] - plain.components["activations"] == \
        3 * 256 * 128_256 * 12
    # weights and sampler rows leave the pool (it shrinks by both)
    assert spec.components["kv_cache"] < plain.components["kv_cache"] - 2 * params


def test_deepseek_mtp_layer_matches_the_published_14b():
    """DeepSeek-V3's model card: 685B = 671B main model + 14B MTP module. The MTP layer (one
    MoE decoder layer + eh_proj 2h x h + 3 norms) plus the embeddings and head its checkpoint
    stores (2 x 129,280 x 7,168; vLLM shares them with the target) is 13.46B: within the
    rounding of '14B' (13.5-14.5B) less 0.3%."""
    sc = {"model": "deepseek-ai/DeepSeek-V3.1", "task": "serve", "gpu": "H200", "precision":
          "bf16", "parallel": {"gpus": 8, "tensor": 8}, "speculative": {"method": "mtp"}}
    bw = estimate(sc, with_max_batch=False).bandwidth
    assert bw["speculative_tokens"] == 1            # num_nextn_predict_layers
    mtp = bw["draft_weight_bytes"] * 8 / 2 + 2 * 129_280 * 7_168
    assert 13.5e9 * 0.99 <= mtp <= 14.5e9
    assert bw["draft_kv_bytes_per_token"] == (512 + 64) * 2   # one MLA latent layer


def test_gpt_oss_120b_with_experts_on_the_host_fits_a_24_gb_card():
    """gpt-oss-120b: 36 MoE layers of 128 experts, 3 x 2880 x 2880 parameters each, MXFP4
    (4 bits + an 8-bit scale per 32 = 0.53125 B): 1,692,057,600 B of experts per layer. With
    the first 30 layers' experts in host memory it fits an RTX 4090; one decode token reads 4 of
    128 experts per layer over PCIe Gen4 x16 (16 x 1.969 GB/s)."""
    sc = {"model": "openai/gpt-oss-120b", "task": "generate", "gpu": "RTX 4090",
          "seq_len": 4096, "new_tokens": 256}
    assert not estimate(sc, with_max_batch=False).fits
    per_layer = int(128 * 3 * 2880 * 2880 * 0.53125)
    assert per_layer == 1_692_057_600
    e = estimate({**sc, "offload_experts": 30}, with_max_batch=False)
    assert e.fits
    bw = e.bandwidth
    assert bw["host_resident_weight_bytes"] == 30 * per_layer
    assert bw["host_read_bytes_per_step"] == 30 * per_layer * 4 // 128
    assert bw["host_link"] == "PCIe Gen4 x16"
    assert bw["host_link_tokens_per_s"] == pytest.approx(16 * 1.969e9 / (30 * per_layer / 32))
    assert bw["max_tokens_per_s"] == pytest.approx(bw["host_link_tokens_per_s"])
    assert not estimate({**sc, "offload_experts": 24}, with_max_batch=False).fits


def test_offload_layers_moves_whole_layers_and_stages_one():
    """Llama-3.1-70B bf16: blocks (no embeddings / norms) 2 x 68,451,041,280 B over 80 layers =
    1,711,276,032 B a layer. 70 on the host: GPU weights drop by 70 of them, one is staged."""
    plain, off = _est(), _est(offload_layers=70)
    per = 2 * (70_553_706_496 - 2 * 128_256 * 8192 - 161 * 8192) // 80
    assert per == 1_711_276_032
    assert off["phases"]["decode"]["weights"] == plain["phases"]["decode"]["weights"] - 70 * per
    assert off["phases"]["decode"]["temporary"] - plain["phases"]["decode"]["temporary"] == per
    assert off["bandwidth"]["host_read_bytes_per_step"] == 70 * per
    assert off["bandwidth"]["host_link_floor_s"] == pytest.approx(70 * per / (16 * 3.938e9))


@pytest.mark.parametrize("extra, key", [
    ({"task": "train", "speculative": DRAFT}, "speculative"),
    ({"speculative": {"method": "eagle", "num_speculative_tokens": 2}}, "speculative.method"),
    ({"task": "serve", "speculative": {"method": "mtp"}}, "speculative.method"),
    ({"speculative": {"method": "draft_model", "num_speculative_tokens": 2}},
     "speculative.model"),
    ({"speculative": {"method": "ngram"}}, "speculative.num_speculative_tokens"),
    ({"offload_experts": 2}, "offload_experts"),
    ({"offload_layers": 81}, "offload_layers"),
    ({"task": "serve", "offload_layers": 2}, "offload_layers"),
])
def test_bad_plans_are_refused_naming_the_key(extra, key):
    with pytest.raises(ScenarioError) as err:
        estimate({**BASE, **extra}, with_max_batch=False)
    assert err.value.key == key


def test_keys_default_off_and_leave_the_estimate_alone():
    d = _est()
    assert not {"speculative", "offload_layers", "offload_experts"} & set(d["scenario"])
    assert not {"draft_weight_bytes", "host_read_bytes_per_step", "host_link_tokens_per_s"} & \
        set(d["bandwidth"])
