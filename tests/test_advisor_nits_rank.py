"""Advisor nit from the browser walk (issue 20.5: 'rank plans by GPU-seconds per step (GPUs x
step time) and accuracy risk, so a one-GPU plan comes first when it is cheaper'): Qwen2.5-VL-7B-
Instruct LoRA on an RTX 4090 at the page's defaults (batch 1, seq_len 2048).

By hand from the plans' costs: the 1-GPU plan (selective checkpointing + chunked loss) stretches
the 1.0623 s step by the recomputed attention core, 4 s / (3 (24 h + 4 s)) at h = 3584,
s = 2048: 8192 / (3 x 94208) = 2.90 %: 1.0623 x 1.0290 = 1.0931 GPU-s. The 2-GPU plan
(context parallel 2, ZeRO-1) takes 0.5395 s + 0.0112 s of exposed traffic on each of 2 GPUs:
2 x 0.5507 = 1.1013 GPU-s. The cheaper 1-GPU plan comes first."""
from __future__ import annotations

import pytest

from vramplan.advisor import advise
from vramplan.advisor import costs as C

PLAN = {"model": "Qwen/Qwen2.5-VL-7B-Instruct", "task": "lora"}


@pytest.fixture(scope="module")
def adv():
    return advise(PLAN, "nvidia-rtx-4090", gpu_table_too=False)


def test_the_cheaper_one_gpu_plan_comes_first(adv):
    first, second = adv.plans[0], adv.plans[1]
    assert first.gpus == 1 and first.cost.accuracy_risk == "none"
    assert first.cost.compute_share == pytest.approx(8192 / (3 * 94208), rel=1e-6)
    assert first.cost.gpu_seconds == pytest.approx(1.0623 * (1 + 8192 / (3 * 94208)),
                                                   rel=1e-3)
    assert second.gpus == 2 and second.cost.gpu_seconds == pytest.approx(2 * 0.5507, rel=1e-3)
    assert first.cost.gpu_seconds < second.cost.gpu_seconds


def test_no_plan_ranks_behind_one_dearer_in_gpu_seconds_and_no_safer(adv):
    """Plans are in GPU-seconds order wherever the accuracy risk and the job do not differ."""
    plans = [p for p in adv.plans if p.cost.gpu_seconds]
    for i, a in enumerate(plans):
        for b in plans[i + 1:]:
            same = (a.cost.accuracy_risk, a.cost.changes_job) == \
                (b.cost.accuracy_risk, b.cost.changes_job)
            if same:
                assert a.cost.gpu_seconds <= b.cost.gpu_seconds + 1e-9, (a.changes, b.changes)
            if a.cost.gpu_seconds > b.cost.gpu_seconds:
                assert C.RISKS.index(a.cost.accuracy_risk) <= \
                    C.RISKS.index(b.cost.accuracy_risk), (a.changes, b.changes)
