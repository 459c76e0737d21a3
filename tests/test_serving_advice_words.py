"""What an advisor change buys and what its traffic costs, in one set of words (issue 20.5 and
20.7, issue 19's one presentation): `report.words.saving` / `cost_words`, said alike by the
CLI, the report and the page.

- On a serve plan vLLM pre-allocates gpu_memory_utilization x memory: device bytes saved say
  nothing (fp8 weights 'saved' -408 KiB, int4 '32 KiB'); a change buys room in the KV pool,
  its bytes per GPU and the tokens they hold.
- A layout change names its bytes per step, its link and the time not hidden.
"""
import json

import pytest

from vramplan.advisor import advise
from vramplan.report.words import cost_words, saving, transfers

H100 = "nvidia-h100-sxm5-80gb"
SERVE_70B = {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
             "parallel": {"gpus": 2, "tensor": 2}, "gpu": H100}
TRAIN_8B = {"model": "meta-llama/Llama-3.1-8B", "task": "train", "precision": "bf16-mixed",
            "seq_len": 8192, "batch_size": 4, "parallel": {"gpus": 4}, "gpu": H100}

# Llama-3.1-70B (config.json): 80 layers, hidden 8192, intermediate 28672, 64 heads, 8 KV
# heads, head_dim 128.
KV_PER_TOKEN_PER_GPU = 80 * 2 * (8 // 2) * 128 * 2        # K and V, 4 KV heads per GPU, bf16
LINEAR_PARAMS_PER_GPU = 80 * (8192 * 8192 * 2 + 8192 * 1024 * 2 + 3 * 8192 * 28672) // 2


@pytest.fixture(scope="module")
def serve():
    return advise(SERVE_70B, gpu_table_too=False)


def _by_id(adv):
    return {r.id: r for r in adv.recommendations + adv.job_changes}


def test_fp8_weights_buy_kv_pool_room_not_device_bytes(serve):
    """fp16 -> fp8 weights free one byte per quantised (linear) parameter on each GPU:
    80 x (2 x 8192^2 + 2 x 8192 x 1024 + 3 x 8192 x 28672) / 2 = 34,225,520,640 B (less the
    per-channel scales fp8 keeps, < 0.2%); the pool takes them: / 163,840 B per token per GPU
    (80 x 2 x 4 x 128 x 2) = 208,692 more tokens. Device used stays where vLLM put it."""
    assert KV_PER_TOKEN_PER_GPU == 163840 and LINEAR_PARAMS_PER_GPU == 34_225_520_640
    r = _by_id(serve)["weights-fp8"]
    assert abs(r.saves_bytes) < 1 << 20               # device used: unchanged (pre-allocated)
    (b0, b1), (t0, t1) = r.kv_pool["bytes"], r.kv_pool["tokens"]
    gained = b1 - b0
    assert gained == pytest.approx(LINEAR_PARAMS_PER_GPU, rel=2e-3)
    assert b0 // KV_PER_TOKEN_PER_GPU == t0 == 12126
    assert abs((t1 - t0) - gained // KV_PER_TOKEN_PER_GPU) <= 1
    assert t1 - t0 == 208692
    assert saving(r.to_dict(full=False)) == \
        "+31.84 GiB KV pool per GPU, holds 208,692 more tokens"
    assert gained / 2**30 == pytest.approx(31.84, abs=0.005)


def test_serving_proposals_say_what_they_buy(serve):
    recs = {k: saving(r.to_dict(full=False)) for k, r in _by_id(serve).items()}
    # TP 2 -> 4: each GPU holds 2 KV heads (81,920 B per token) and half the weights
    assert recs["serve-more-tp"].startswith("+33.31 GiB KV pool per GPU, holds 448,684 more")
    # fp8 KV: the same pool bytes, half the bytes per token: 12,126 -> 24,253 tokens
    assert recs["serve-kv-fp8"] == "the same KV pool holds 12,127 more tokens"
    assert recs["serve-max-model-len"] == "KV pool unchanged; the engine starts"
    assert recs["cuda-graphs-off"] == "saves 512.0 MiB (KV pool unchanged)"
    assert not any("saves -" in s or "saves 32.0 KiB" in s for s in recs.values())


def test_the_cli_and_the_report_say_the_same(capsys, serve):
    from vramplan.cli import main
    flags = ["--model", SERVE_70B["model"], "--task", "serve", "--precision", "bf16",
             "--gpus", "2", "--tensor", "2", "--gpu", H100]
    assert main(["advise", *flags, "--no-gpu-table"]) == 0
    out = capsys.readouterr().out
    assert "+31.84 GiB KV pool per GPU, holds 208,692 more tokens" in out
    assert main(["advise", *flags, "--no-gpu-table", "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    fp8 = next(r for r in got["recommendations"] if r["id"] == "weights-fp8")
    assert fp8["kv_pool"]["tokens"][1] - fp8["kv_pool"]["tokens"][0] == 208692
    assert main(["report", *flags, "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert "| +31.84 GiB KV pool per GPU, holds 208,692 more tokens |" in out


def test_transfer_words_by_hand():
    """24.1 GB over NVLink with 0.31 s not hidden behind compute; a host copy too."""
    c = {"communication_bytes_per_step": 24_100_000_000, "link": "NVLink 4",
         "communication_time_s": 0.31, "host_bytes_per_step": 15_000_000_000,
         "host_link": "PCIe Gen5 x16", "host_time_s": 1.5, "step_time_s": 2.0}
    assert transfers(c) == ["+24.1 GB/step over NVLink 4, +310.0 ms not hidden",
                            "+15.0 GB/step over PCIe Gen5 x16, +1.50 s not hidden"]
    c["time_share"] = (0.31 + 1.5) / 2.0
    assert cost_words(c) == ("+24.1 GB/step over NVLink 4, +310.0 ms not hidden · "
                             "+15.0 GB/step over PCIe Gen5 x16, +1.50 s not hidden "
                             "(+90% step time)")
    zh = transfers(c, "zh")
    assert "每步" in zh[0] and "24.1 GB" in zh[0]
    # a plan's cost is its whole traffic (its own collectives, once), not an increment
    assert transfers(c, total=True)[0] == "24.1 GB/step over NVLink 4, 310.0 ms not hidden"


def test_a_plan_card_says_its_whole_traffic(serve):
    """The fp8-weights plan keeps TP 2: its 671 MB/step are the all-reduces TP 2 does today,
    so the plan says '671 MB/step', never '+671 MB/step' as if fp8 weights added them."""
    p = next(p for p in serve.plans if [c["id"] for c in p.changes] == ["weights-fp8"])
    words = cost_words(p.cost, total=True)
    assert words.startswith(f"{p.cost.communication_bytes_per_step / 1e6:.0f} MB/step over "
                            "NVLink 4, ") and not words.startswith("+")


def test_a_layout_change_names_its_bytes_link_and_time():
    """Context parallel 1 -> 2 (data 4 -> 2) on 4 H100: its ring passes K and V every layer;
    the row's words carry the cost's own bytes, link and time, in the CLI too."""
    adv = advise(TRAIN_8B, gpu_table_too=False)
    cp = next(r for r in adv.recommendations if r.id == "context-parallel")
    c = cp.cost
    assert c.communication_bytes_per_step > 0 and c.link == "NVLink 4"
    words = cost_words(c)
    gb = f"{c.communication_bytes_per_step / 1e9:.1f} GB"
    assert words.startswith(f"+{gb}/step over NVLink 4, +") and "not hidden" in words
    z3 = next(r for r in adv.recommendations if r.id == "zero-3")
    # ZeRO-3 moves 2 x 16 GB x 3/4 (all-gathers) + 32 GB x 3/4 (fp32 gradients reduce-
    # scattered) = what DDP's all-reduce of 32 GB fp32 gradients (2 x 3/4) moves: no more
    assert z3.cost.communication_bytes_per_step == 0
    assert cost_words(z3.cost).startswith("no more traffic over NVLink 4 than now")
