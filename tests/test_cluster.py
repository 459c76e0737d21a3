"""The cluster solver (issue 20 item 3): layouts that keep the global batch, respect
divisibility and topology, fit every rank when re-estimated, priced by hand-checkable
formulas; the answer is a Pareto front over GPUs and step time. Timing is measured in
benchmarks/cluster_solver.py, not here."""
import pytest

from vramplan.advisor.cluster import Job, Layout, Solver, solve, where
from vramplan.errors import VramplanError
from vramplan.estimate import estimate

H100 = "nvidia-h100-sxm5-80gb"


@pytest.fixture(scope="module")
def solved():
    return solve(Job("meta-llama/Llama-3.1-70B", 8192, 64, H100, max_gpus=256))


def test_front_keeps_the_job_and_fits_every_rank(solved):
    s, front = solved
    a = s.arch
    assert front
    for o in front:
        lay = o.layout
        assert lay.data * lay.micro * lay.accumulation == 64          # the global batch
        assert a.heads % lay.tensor == 0 and a.kv_heads % lay.tensor == 0
        assert a.total_layers % lay.pipeline == 0 and lay.tensor <= 8  # one NVLink domain
        assert 8192 % (2 * lay.context) == 0 or lay.context == 1
        e = estimate(s.scenario(lay), H100, with_max_batch=False)     # from scratch
        assert e.device_used_bytes == o.device_used_bytes <= s.limit
        assert o.rank                                                 # the deciding rank


def test_front_is_pareto(solved):
    _, front = solved
    gpus = [o.gpus for o in front]
    steps = [o.step_s for o in front]
    assert gpus == sorted(set(gpus))                 # fewer GPUs ...
    assert steps == sorted(steps, reverse=True)      # ... only at a slower step
    best = min(front, key=lambda o: o.gpu_hours)
    assert where(best, front) == "on the front"


def test_compute_and_bubble_by_hand():
    # Llama-3.1-70B: N = 70.55e9, 80 layers, hidden 8192; 64 x 8192 tokens per step.
    # FLOPs = (6N + 12 x 80 x 8192 x 8192) x 524288 x (1 + 1/3 full recompute)
    # H100 SXM bf16 dense 989.4 TFLOPS x 0.40 (costs.toml [step]) on 32 GPUs.
    s = Solver(Job("meta-llama/Llama-3.1-70B", 8192, 64, H100))
    n = s.arch.param_count()
    lay = Layout(data=2, tensor=8, pipeline=2, context=1, expert=1, zero=1,
                 checkpointing="full", micro=1, accumulation=32)
    opt = s.price(lay)
    flops = (6 * n + 12 * 80 * 8192 * 8192) * 64 * 8192 * (4 / 3)
    assert opt.compute_s == pytest.approx(flops / (32 * 989.4e12 * 0.40), rel=1e-9)
    assert opt.bubble_s == pytest.approx(opt.compute_s * (2 - 1) / 32)   # (p - 1) / m
    assert opt.step_s == pytest.approx(opt.compute_s + opt.bubble_s + opt.comm_s)
    assert opt.gpu_hours == pytest.approx(32 * opt.step_s * 1e12 / (64 * 8192) / 3600)
    assert {t.dim for t in opt.transfers} == {"data", "tensor", "pipeline"}


def test_70b_batch_1_needs_32_or_fewer_h100s():
    # the job: one 8192-token sequence per step; states alone are 70.55e9 x 16 B
    # = 1.13 TB, so at least 15 H100s; the solver finds a layout on <= 32 that fits
    s, front = solve(Job("meta-llama/Llama-3.1-70B", 8192, 1, H100))
    assert front and front[0].gpus <= 32
    assert all(o.fits for o in front)


def test_non_transformer_is_refused_by_name():
    with pytest.raises(VramplanError, match="transformer"):
        Solver(Job("torchvision/vit_l_16", 224, 8, H100))


def test_cli_cluster(capsys):
    from vramplan.cli import main
    assert main(["cluster", "--help"]) == 0
    assert "Pareto front" in capsys.readouterr().out
    rc = main(["cluster", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096",
               "--tokens-per-step", str(32 * 4096), "--gpu", H100, "--max-gpus", "16",
               "--format", "json"])
    assert rc == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert out["job"]["global_batch"] == 32 and out["front"]
    assert all(o["gpus"] <= 16 and o["fits"] for o in out["front"])
    assert main(["cluster", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096",
                 "--tokens-per-step", "1000", "--gpu", H100]) == 2
    assert "not a multiple" in capsys.readouterr().err


def test_cli_cluster_uses_the_one_memory_limit(capsys):
    """One answer per question: `vramplan cluster` checks ranks against the estimate's limit
    (usable memory less the scenario key safety_margin, 0 by default), not a limit of its own;
    --safety-margin (alias --headroom) is read like the key and refused by its name."""
    import json

    from vramplan.cli import main
    from vramplan.hardware import get_gpu
    usable = get_gpu(H100).usable_bytes
    args = ["cluster", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096",
            "--global-batch", "32", "--gpu", H100, "--max-gpus", "8", "--format", "json"]
    for extra, limit in (([], usable), (["--safety-margin", "5%"], usable - int(usable * 0.05)),
                         (["--headroom", "2 GiB"], usable - 2 * 2**30)):
        assert main(args + extra) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["job"]["limit_bytes"] == limit, extra
        assert out["front"] and all(o["device_used_bytes"] <= limit for o in out["front"])
    assert main(args + ["--safety-margin", "60%"]) == 2
    assert "safety_margin" in capsys.readouterr().err


def test_page_cluster_view_uses_the_plans_memory_limit():
    from vramplan.estimate import memory_limit
    from vramplan.hardware import get_gpu, traits_of
    from vramplan.scenario import Scenario
    from vramplan.ui.widgets.cluster_view import ClusterView
    sc = Scenario.from_dict({"model": "meta-llama/Llama-3.1-8B", "task": "train",
                             "batch_size": 1, "seq_len": 4096, "gpu": H100,
                             "safety_margin": "2 GiB"})
    dev = traits_of(get_gpu(H100))
    assert ClusterView._limit(sc, dev) == memory_limit(sc, dev) == dev.usable_bytes - 2 * 2**30
