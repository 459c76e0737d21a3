"""vramplan.advisor: recommendations (bytes saved by `estimate`, costs with sources, never
what does not apply or is on already) and the fit solver (every plan re-estimates to fit with
the headroom, cheapest first, one GPU and more GPUs), on plans one can check by hand."""
import json
import subprocess
import sys

import pytest

from vramplan.advisor import advise, parse_headroom, recommendations
from vramplan.advisor.costs import table
from vramplan.estimate import estimate
from vramplan.hardware import get_gpu, links
from vramplan.scenario import Scenario

GiB = 2**30
LLAMA_4090 = {"model": "meta-llama/Llama-3.1-8B", "task": "train", "precision": "bf16-mixed",
              "optimizer": "adamw", "batch_size": 4, "seq_len": 4096, "gpu": "nvidia-rtx-4090"}
FLUX_12GB = {"model": "black-forest-labs/FLUX.1-dev", "task": "denoise",
             "gpu": "nvidia-rtx-3060-12gb"}
VIT_1024 = {"model": "torchvision/vit_l_16", "task": "train", "resolution": [1024, 1024],
            "batch_size": 8, "gpu": "nvidia-rtx-4090"}
SERVE_70B = {"model": "meta-llama/Llama-3.1-70B", "task": "serve",
             "gpu": "nvidia-h100-sxm5-80gb"}
VOLUME_1024 = {"task": "volume", "resolution": [1024, 1024, 1024],
               "gpu": "nvidia-rtx-3060-12gb"}


@pytest.fixture(scope="module")
def llama():
    return advise(LLAMA_4090, gpu_table_too=False)


def _limit(gpu, share=0.0):
    # the advisor keeps the estimate's one limit: the scenario's safety_margin, default 0
    # (issue 20.6; it kept a silent 5% before)
    u = get_gpu(gpu).usable_bytes
    return u - u * share


def _check_plans(adv, gpu):
    assert not adv.fits and adv.plans
    lim = _limit(gpu)
    keys = [p.key() for p in adv.plans]
    assert keys == sorted(keys)              # fewest GPU-seconds per step (risk-weighted) first
    for p in adv.plans:
        e = estimate(p.scenario, gpu)                         # re-estimated from scratch
        assert e.device_used_bytes == p.estimate.device_used_bytes
        assert e.device_used_bytes <= lim
        if e.footprint.batch_capacity is not None:
            assert e.max_batch_size >= 1                      # a pool holds one request
        d = p.to_dict()
        assert d["changes"] and d["cost"]["score"] >= 0 and d["scenario"]


def test_llama_8b_full_finetune_on_a_4090(llama):
    # 8.03e9 params x 16 B (bf16 AMP + fp32 AdamW) = 128 GB of model states alone
    assert llama.estimate.device_used_bytes > 128e9
    _check_plans(llama, "nvidia-rtx-4090")
    one = [p for p in llama.plans if p.gpus == 1]
    many = [p for p in llama.plans if p.gpus > 1]
    assert one and many
    ids = [{c["id"] for c in p.changes} for p in one]
    # one GPU: plans keep the job (no adapters, no 8-bit states: issue 20.4; those are in
    # job_changes) and cost no accuracy (offload, recomputation ...)
    assert not any(s & {"lora", "qlora", "adamw-8bit", "paged-adamw-8bit"} for s in ids)
    assert {"lora", "qlora", "adamw-8bit"} <= {r.id for r in llama.job_changes}
    assert all(p.cost.accuracy_risk == "none" for p in one)
    # activations at batch 4 x 4096 tokens need recomputation or a smaller micro-batch
    assert all(s & {"checkpointing-full", "checkpointing-selective", "offload-activations",
                    "micro-batch-1", "micro-batch"} for s in ids)
    assert all(p.cost.communication_bytes_per_step > 0 for p in many)


def test_eight_bit_adam_saves_six_bytes_per_parameter(llama):
    r = {x.id: x for x in llama.job_changes}["adamw-8bit"]
    # AdamW fp32 m + v = 8 B/param -> 8-bit m + v = 2 B/param plus one fp32 absmax per
    # 2048-value block of each state (bitsandbytes block-wise quantisation)
    n = 8_030_261_248
    assert llama.estimate.components["optimizer_states"] == 8 * n
    assert r.estimate.components["optimizer_states"] == 2 * n + 2 * 4 * n // 2048
    assert r.saves_bytes == llama.estimate.device_used_bytes - r.estimate.device_used_bytes
    assert abs(r.saves_bytes - 6 * n) < 0.01 * r.saves_bytes   # + allocator slack
    assert r.cost.accuracy_risk == "low" and "arXiv:2110.02861" in r.cost.sources[0]


def test_recompute_costs(llama):
    r = {x.id: x for x in llama.recommendations}
    assert r["checkpointing-full"].cost.compute_share == 0.33     # +1 forward of 1 + 2
    # selective: the attention core, 4s / (3 (24h + 4s)) with s = h = 4096: 1/21
    assert r["checkpointing-selective"].cost.compute_share == pytest.approx(1 / 21)


def test_every_saving_is_estimate_minus_estimate(llama):
    base = estimate(LLAMA_4090).device_used_bytes
    for r in llama.recommendations:
        assert r.saves_bytes == base - estimate(r.scenario).device_used_bytes, r.id
        assert r.saves_bytes > 0 and r.source if hasattr(r, "source") else r.cost.sources
        assert r.how, r.id


def test_ranked_by_bytes_saved_per_cost(llama):
    """Certain changes by bytes saved per cost; one whose saving depends on the stack
    (torch.compile) after every certain one that costs no more (recommend.after_certain)."""
    recs = llama.recommendations
    ratios = [r.ratio for r in recs if not r.cost.uncertain]
    assert ratios == sorted(ratios, reverse=True)
    for i, u in enumerate(recs):
        if u.cost.uncertain:
            assert all(not (r.cost.score <= u.cost.score and not r.cost.uncertain)
                       for r in recs[i + 1:]), u.id


def test_flux_on_a_12gb_card():
    adv = advise(FLUX_12GB, gpu_table_too=False)
    _check_plans(adv, FLUX_12GB["gpu"])
    ids = {r.id for r in adv.recommendations}
    assert {"model-cpu-offload", "weights-int8"} <= ids
    assert not ids & {"lora", "checkpointing-full", "zero-3"}      # inference


def test_vit_at_1024_px():
    adv = advise(VIT_1024, gpu_table_too=False)
    _check_plans(adv, VIT_1024["gpu"])
    assert any(p.gpus == 1 for p in adv.plans)
    ids = {r.id for r in adv.recommendations}
    assert not ids & {"lora", "qlora", "chunked-loss", "checkpointing-selective",
                      "tensor-parallel", "zero-3"}


def test_70b_serving():
    adv = advise(SERVE_70B, gpu_table_too=False)
    _check_plans(adv, SERVE_70B["gpu"])
    # keeping the job (max_model_len 131072): tensor parallel over more H100s only
    assert adv.plans and all(p.gpus > 1 and p.scenario.parallel.tensor > 1 for p in adv.plans)
    # allowed to change it: quantised weights on one GPU with a shorter max_model_len
    adv = advise(SERVE_70B, gpu_table_too=False, allow_job_changes=True)
    _check_plans(adv, SERVE_70B["gpu"])
    one = [p for p in adv.plans if p.gpus == 1]
    many = [p for p in adv.plans if p.gpus > 1]
    assert any(c["id"].startswith("weights-") for p in one for c in p.changes)
    assert all(p.cost.changes_job for p in one)
    assert many and all(p.scenario.parallel.tensor > 1 for p in many)


def test_1024_cubed_float32_volume():
    # 1024^3 voxels x 4 B = 4 GiB a volume; 3 copies = 12 GiB > a 12 GB card
    adv = advise(VOLUME_1024, gpu_table_too=False)
    assert adv.estimate.components["volumes"] == 3 * 4 * GiB
    _check_plans(adv, VOLUME_1024["gpu"])
    half = next(p for p in adv.plans if p.changes[0]["id"] == "array-half-precision")
    assert half.estimate.components["volumes"] == 3 * 2 * GiB     # float16: half the bytes


def test_flux_on_12gb_cards_split_one_component_per_gpu():
    adv = advise(FLUX_12GB, gpu_table_too=False)
    split = next(p for p in adv.plans if p.changes[0]["id"] == "component-split")
    # FLUX.1-dev: CLIP-L, T5-XXL, the transformer, the VAE: one per GPU
    assert split.gpus == 4 and split.scenario.parallel.pipeline == 4
    assert "model" in split.scenario.offload and split.estimate.fits
    # the worst GPU holds what model offload holds at that component's phase, plus NCCL
    alone = estimate({**FLUX_12GB, "precision": split.scenario.precision_for("default"),
                      "offload": ["model"]})
    assert split.estimate.device_used_bytes == alone.device_used_bytes + 512 * 2**20
    # per image: CLIP 77 x 768 and T5 512 x 4096 embeddings, 16 x 128 x 128 latents, 2 B each
    assert split.cost.communication_bytes_per_step == (77 * 768 + 512 * 4096 +
                                                       16 * 128 * 128) * 2
    assert split.cost.host_bytes_per_step == 0                # no weights over PCIe


def test_a_1024_cubed_volume_split_in_slabs_over_gpus():
    adv = advise(VOLUME_1024, gpu_table_too=False)
    split = next(p for p in adv.plans if p.changes[0]["id"] == "volume-split")
    assert split.gpus == 2
    # 512 planes + 1 halo plane each side: 3 copies x 514 x 1024 x 1024 x 4 B per GPU
    assert list(split.scenario.resolution) == [514, 1024, 1024]
    assert split.estimate.components["volumes"] == 3 * 514 * 1024 * 1024 * 4
    assert split.cost.communication_bytes_per_step == 2 * 1024 * 1024 * 4   # 2 halo planes
    fft = advise({**VOLUME_1024, "work_buffers": {"fft": "in-place"}}, gpu_table_too=False)
    p = next(p for p in fft.plans if p.changes[0]["id"] == "volume-split")
    n = p.gpus                 # forward + inverse FFT: two all-to-all transposes of the slab
    assert p.cost.communication_bytes_per_step == \
        2 * (n - 1) * (1024 // n) * 1024 * 1024 * 4 // n


def test_never_what_does_not_apply():
    cnn = {r.id for r in recommendations({"model": "torchvision/resnet50", "task": "train",
                                          "batch_size": 64, "gpu": "nvidia-t4"})}
    assert cnn and not cnn & {"lora", "qlora", "chunked-loss", "checkpointing-selective",
                              "zero-1", "zero-2", "zero-3", "tensor-parallel", "float8-linears"}
    # a T4 (compute capability 7.5) has no bf16: mixed precision means fp16 there
    fp32 = recommendations({"model": "torchvision/resnet50", "task": "train", "batch_size": 64,
                            "precision": "fp32", "gpu": "nvidia-t4"})
    mp = next(r for r in fp32 if r.id == "mixed-precision")
    assert mp.changes == {"precision": "fp16-mixed"}
    # one GPU: no ZeRO, no tensor parallelism
    one = {r.id for r in recommendations(LLAMA_4090)}
    assert not one & {"zero-1", "zero-2", "zero-3", "tensor-parallel", "sequence-parallel"}


def test_never_what_is_on_already():
    on = dict(LLAMA_4090, checkpointing="full", options=["compile", "chunked-loss"],
              optimizer="adamw-8bit")
    ids = {r.id for r in recommendations(on)}
    assert not ids & {"checkpointing-full", "checkpointing-selective", "compile",
                      "chunked-loss", "adamw-8bit"}


def test_multi_gpu_plan_gets_zero_and_layout_advice():
    d = dict(LLAMA_4090, gpu="nvidia-h100-sxm5-80gb", parallel={"gpus": 8}, batch_size=1)
    recs = {r.id: r for r in recommendations(d)}
    assert {"zero-1", "zero-3", "tensor-parallel"} <= set(recs)
    z3 = recs["zero-3"]
    # ZeRO-3 over 8: states, gradients and parameters / 8. DDP all-reduces the fp32
    # gradients: 2 x 7/8 x 32.1 GB = 56.2 GB; ZeRO-3 gathers the bf16 parameters twice
    # (2 x 7/8 x 16.1 GB) and reduce-scatters the fp32 gradients (7/8 x 32.1 GB): the same
    # 56.2 GB (1.5x DDP's only where gradients are reduced in 16 bit, ZeRO paper s.7)
    moved = sum(t["bytes"] for t in z3.cost.transfers)
    assert moved == pytest.approx(2 * 7 / 8 * 8.03e9 * 2 + 7 / 8 * 8.03e9 * 4, rel=0.01)
    assert z3.cost.link.startswith("NVLink")
    assert z3.scenario.parallel.zero == 3 and z3.scenario.parallel.data == 8


def test_growth_of_a_plan_that_fits():
    d = {"model": "gpt2", "task": "train", "gpu": "nvidia-rtx-4090"}
    adv = advise(d, gpu_table_too=False)
    assert adv.fits and not adv.plans
    b = adv.growth["batch_size"]
    lim = _limit("nvidia-rtx-4090")
    assert estimate({**d, "batch_size": b}).device_used_bytes <= lim
    assert estimate({**d, "batch_size": b + 1}).device_used_bytes > lim
    assert adv.growth["seq_len"] == 1024              # gpt2's learned positions cap it


def test_gpu_table_claims_re_estimate():
    adv = advise(FLUX_12GB)
    rows = {r["gpu"]: r for r in adv.gpus}
    assert len(rows) > 50
    plan = Scenario.from_dict(FLUX_12GB)    # the plan as the table reads it: bf16 from the 3060
    for gid, r in list(rows.items())[:40]:   # (not each GPU's own default precision)
        e = estimate(plan, gid)
        assert r["device_used_bytes"] == e.device_used_bytes
        assert r["fits"] == (e.device_used_bytes <= _limit(gid))
        if not r["fits"] and r["with_one_change"]:
            rec = next(x for x in adv.recommendations if x.id == r["with_one_change"]["id"])
            e1 = estimate(rec.scenario, gid)
            assert e1.device_used_bytes == r["with_one_change"]["device_used_bytes"]
            assert e1.device_used_bytes <= _limit(gid)


def test_headroom_forms():
    assert parse_headroom("10%") == (0.10, 0)
    assert parse_headroom(0.2) == (0.2, 0)
    assert parse_headroom("2GiB") == (0.0, 2 * GiB)
    assert parse_headroom(None) == (0.0, 0)      # the one default: DEFAULT_SAFETY_MARGIN


def test_every_cost_figure_has_a_source():
    t = table()
    for cid, e in t["cost"].items():
        assert e.get("source"), cid
        assert e.get("basis") in ("paper", "derived", "docs", "assumption"), cid
        assert e.get("compute_share", 0) >= 0
    assert "links" not in t        # the link rates and defaults: hardware/links.py, one table
    for src in (links.PCIE_SOURCE, links.C2C_SOURCE, links.SCALEOUT_SOURCE,
                links.GPUS_PER_NODE_SOURCE, links.NO_P2P_SOURCE, links.HOST_STAGED_SOURCE):
        assert src


def test_advisor_reads_the_host_link_of_hardware_links():
    """One table: the advisor's host link is hardware.links.host_link's rate and name, cited
    with its own source. H100 PCIe: Gen5 x16 = 16 x 3.938 = 63.0 GB/s per direction; GH200:
    NVLink-C2C 450 GB/s per direction (900 bidirectional)."""
    from vramplan.advisor import comm
    pcie = comm.host_link(get_gpu("nvidia-h100-pcie-80gb"))
    assert (pcie.name, round(pcie.gbs, 3)) == ("PCIe Gen5 x16", 63.008)
    assert pcie.source == links.PCIE_SOURCE
    c2c = comm.host_link(get_gpu("nvidia-gh200-96gb"))
    assert (c2c.name, c2c.gbs, c2c.source) == ("NVLink-C2C", 450.0, links.C2C_SOURCE)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "vramplan.cli", *args], capture_output=True,
                          text=True)


def test_cli_advise_json_and_table(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(VOLUME_1024))
    out = _cli("advise", "--scenario", str(f), "--format", "json", "--no-gpu-table")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    r = d["recommendations"][0]
    assert {"id", "title", "saves_bytes", "cost", "scenario", "estimate", "how",
            "source"} <= set(r)
    p = d["plans"][0]
    assert {"changes", "scenario", "estimate", "cost"} <= set(p)
    assert d["plans"] == sorted(d["plans"], key=lambda p: p["cost"]["score"])
    out = _cli("advise", "--scenario", str(f), "--headroom", "10%")
    assert out.returncode == 0 and "plans that fit" in out.stdout


def test_cli_estimate_advise_fills_recommendations(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(VOLUME_1024))
    out = _cli("estimate", "--scenario", str(f), "--advise", "--format", "json")
    assert out.returncode == 0, out.stderr
    recs = json.loads(out.stdout)["recommendations"]
    assert recs and recs[0]["id"] == "array-half-precision"


@pytest.mark.parametrize("args", [["--headroom", "150%"], ["--headroom", "lots"],
                                  ["--gpu-kind", "nvidia-h9000"], ["--max-gpus", "0"]])
def test_cli_advise_bad_input_is_one_line(tmp_path, args):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(VOLUME_1024))
    out = _cli("advise", "--scenario", str(f), *args)
    assert out.returncode == 2
    assert out.stderr.startswith("vramplan: error: ") and out.stderr.count("\n") == 1


def test_cli_advise_missing_file_is_one_line(tmp_path):
    out = _cli("advise", "--scenario", str(tmp_path / "none.json"))
    assert out.returncode == 2 and out.stderr.startswith("vramplan: error: ")
