"""The advisor keeps the job (issue 20.4): plans change only the layout, checkpointing,
micro-batch / accumulation, offload, allocator, kernels and the GPU count; LoRA, pure 16-bit,
8-bit or factored optimizers and shorter contexts are listed apart with their accuracy risk
and enter plans only when allowed; a card's GPU count is its layout's."""
import re

import pytest

from vramplan.advisor import advise
from vramplan.estimate import estimate

H100 = "nvidia-h100-sxm5-80gb"
PRETRAIN = {"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 1,
            "seq_len": 8192, "precision": "bf16-mixed", "gpu": H100}
FT_4090 = {"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": 4,
           "seq_len": 4096, "precision": "bf16-mixed", "gpu": "nvidia-rtx-4090"}
JOB = {"lora", "qlora", "pure-16bit", "adamw-8bit", "paged-adamw-8bit", "adafactor", "lion",
       "max-model-len"}


@pytest.fixture(scope="module")
def pretrain():
    return advise(PRETRAIN, gpu_table_too=False)


def _global_batch(sc) -> int:
    return sc.batch_size * sc.gradient_accumulation * sc.parallel.data


def test_70b_pretraining_plans_keep_the_task_and_fit(pretrain):
    # 70.55e9 params x 16 B of model states = 1.13 TB: no plan on one H100 keeps the job
    assert not pretrain.fits and pretrain.plans
    for p in pretrain.plans:
        sc = p.scenario
        assert (sc.task, sc.precision, sc.optimizer) == ("train", "bf16-mixed", "adamw")
        assert sc.seq_len == 8192 and _global_batch(sc) == 1          # the same job
        assert not p.cost.changes_job
        assert not {c["id"] for c in p.changes} & JOB
        e = estimate(sc, H100, with_max_batch=False)                   # re-estimated
        assert e.device_used_bytes == p.estimate.device_used_bytes <= pretrain.limit_bytes
    small = [p for p in pretrain.plans if p.gpus <= 32 and not p.scenario.offload]
    assert small, [(p.gpus, p.changes) for p in pretrain.plans]


def test_job_changes_are_listed_apart_with_their_risk(pretrain):
    ids = {r.id for r in pretrain.job_changes}
    assert {"lora", "adamw-8bit", "pure-16bit"} <= ids
    assert not ids & {r.id for r in pretrain.recommendations}
    assert all(r.cost.changes_job and r.cost.accuracy_risk in ("low", "medium", "high")
               for r in pretrain.job_changes)
    d = pretrain.to_dict(full=False)
    assert d["allow_job_changes"] is False and len(d["job_changes"]) == len(ids)


def test_job_changes_enter_plans_only_when_allowed():
    kept = advise(FT_4090, gpu_table_too=False)
    assert all(not ({c["id"] for c in p.changes} & JOB) for p in kept.plans)
    allowed = advise(FT_4090, gpu_table_too=False, allow_job_changes=True)
    assert any({c["id"] for c in p.changes} & JOB for p in allowed.plans)


@pytest.mark.parametrize("plan", [PRETRAIN, FT_4090, {**FT_4090, "task": "lora"}])
def test_card_gpu_count_is_the_layouts(plan):
    # the card said "256 x H100" over a bullet "128 x GPU, tensor 8 x ZeRO-3 16"
    for p in advise(plan, gpu_table_too=False).plans:
        for c in p.changes:
            m = re.match(r"(\d+) x GPU", c["title"])
            if m:
                assert int(m.group(1)) == p.gpus, (c["title"], p.gpus)


def test_plans_rank_by_gpu_seconds(pretrain):
    keys = [p.key() for p in pretrain.plans]
    assert keys == sorted(keys)
    for p in pretrain.plans:
        c = p.cost
        assert c.gpu_seconds == pytest.approx(p.gpus * c.total_step_s)


def test_cli_allow_job_changes(tmp_path, capsys):
    import json
    from vramplan.cli import main
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(PRETRAIN))
    assert main(["advise", "--scenario", str(f), "--no-gpu-table"]) == 0
    out = capsys.readouterr().out
    assert "if you can change the job" in out and "--allow-job-changes" in out
    assert main(["advise", "--help"]) == 0
    assert "--allow-job-changes" in capsys.readouterr().out


def test_64_gpu_data_parallel_plan_gets_a_layout_on_its_own_64():
    # the researcher: 70B pre-training on 64 H100s, data parallel only (global batch
    # 64 x 8192 tokens) found no plan; ZeRO-3 with recomputation fits on the same 64
    d = {**PRETRAIN, "parallel": {"gpus": 64, "data": 64}}
    adv = advise(d, gpu_table_too=False)
    own = [p for p in adv.plans if p.gpus == 64]
    assert own and all(_global_batch(p.scenario) == 64 for p in adv.plans)
    assert own[0].scenario.parallel.zero == 3
    assert estimate(own[0].scenario, H100).device_used_bytes <= adv.limit_bytes


def test_pipeline_bubble_is_priced_as_step_time_not_compute(pretrain):
    """The 1F1B bubble (p - 1) / m is idle time, not extra FLOPs: a pipelined plan's cost
    carries it as bubble_share and the card reads '... step time in the pipeline bubble'
    (it read '+100% compute'). By hand for PP 2 with one micro-batch: (2 - 1) / 1 = +100%."""
    from vramplan.charts.waterfall import cost_text
    piped = [p for p in pretrain.plans if p.scenario.parallel.pipeline > 1]
    assert piped
    for p in piped:
        pp = p.scenario.parallel.pipeline
        m = p.scenario.gradient_accumulation
        assert p.cost.bubble_share == pytest.approx((pp - 1) / m)
        assert p.cost.compute_share == 0
        text = cost_text(p.cost)
        assert "step time in the pipeline bubble" in text and "compute" not in text, text
        assert p.cost.total_step_s == pytest.approx(
            p.cost.step_time_s * (1 + p.cost.bubble_share) + p.cost.communication_time_s
            + p.cost.host_time_s)
