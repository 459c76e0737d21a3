"""Issue 20.6: one memory limit, usable memory less the plan's `safety_margin` (default 0,
scenario.rules.DEFAULT_SAFETY_MARGIN), used by the verdict, max batch, the advisor's plans and
room to grow and the sweep; printed beside the figures. Before, the advisor kept a silent 5%:
"MAX BATCH SIZE 90" beside "Room to grow: batch up to 84" (ViT-L/16 on an RTX 4090), and
"short by" differed between the verdict and the advisor."""
import pytest

from vramplan.advisor import advise
from vramplan.cli import main
from vramplan.errors import ScenarioError
from vramplan.estimate import estimate
from vramplan.hardware import get_gpu
from vramplan.scenario import Scenario
from vramplan.sweep import sweep

GiB = 1 << 30
VIT_L = {"model": "torchvision/vit_l_16", "task": "train", "gpu": "nvidia-rtx-4090"}
LLAMA = {"model": "meta-llama/Llama-3.1-8B", "task": "train", "gpu": "nvidia-rtx-4090"}


def test_max_batch_and_room_to_grow_agree():
    e = estimate(VIT_L)
    adv = advise(VIT_L, gpu_table_too=False)
    assert e.max_batch_size == adv.growth["batch_size"] == 90   # was 90 vs 84 (5% kept)


def test_they_agree_with_a_margin_too():
    d = {**VIT_L, "safety_margin": "5%"}
    e = estimate(d)
    assert e.max_batch_size == advise(d, gpu_table_too=False).growth["batch_size"] == 84
    # advise(headroom=...) is the same margin, not a second limit
    assert advise(VIT_L, headroom="5%", gpu_table_too=False).growth["batch_size"] == 84


@pytest.mark.parametrize("margin", [None, "5%", "2 GiB"])
def test_short_by_is_one_figure(margin):
    d = {**LLAMA, **({"safety_margin": margin} if margin else {})}
    e = estimate(d, with_max_batch=False)
    adv = advise(d, gpu_table_too=False)
    assert not e.fits and not adv.fits
    # the page's "short by" (verdict: -headroom) and the advisor's (used - its limit)
    assert adv.estimate.device_used_bytes - adv.limit_bytes == -e.headroom_bytes


def test_limit_by_hand():
    usable = get_gpu("nvidia-rtx-4090").usable_bytes
    base = estimate(VIT_L)
    lim = base.to_dict()["memory_limit"]
    assert lim == {"usable_bytes": usable, "safety_margin": 0, "safety_margin_default": True,
                   "safety_margin_bytes": 0, "limit_bytes": usable}
    assert base.headroom_bytes == usable - base.device_used_bytes
    e = estimate({**VIT_L, "safety_margin": 0.05})
    limit = usable - int(usable * 0.05)
    d = e.to_dict()["memory_limit"]
    assert d["limit_bytes"] == limit and d["safety_margin"] == 0.05
    assert e.headroom_bytes == limit - e.device_used_bytes
    e2 = estimate({**VIT_L, "safety_margin": "2 GiB"})
    assert e2.headroom_bytes == usable - 2 * GiB - e2.device_used_bytes
    # a plan that fits only without the margin
    tight = estimate({**VIT_L, "batch_size": 90, "safety_margin": "5%"})
    assert estimate({**VIT_L, "batch_size": 90}).fits and not tight.fits


def test_the_key_reads_shares_and_sizes():
    assert Scenario.from_dict({**VIT_L, "safety_margin": "5%"}).safety_margin == 0.05
    assert Scenario.from_dict({**VIT_L, "safety_margin": "1 GiB"}).safety_margin == GiB
    assert "safety_margin" not in Scenario.from_dict(VIT_L).to_dict()   # default: omitted
    sc = Scenario.from_dict({**VIT_L, "safety_margin": 0.1})
    assert Scenario.from_query(sc.to_query()) == sc
    for bad in ("60%", 0.5, -1, True, "lots"):
        with pytest.raises(ScenarioError, match="safety_margin"):
            Scenario.from_dict({**VIT_L, "safety_margin": bad})


def test_sweep_rows_equal_the_estimate():
    d = {**VIT_L, "safety_margin": "5%"}
    res = sweep(d, vary={"batch_size": [84, 85]})
    rows = [r for r in res.rows() if r["gpu"] == "nvidia-rtx-4090"]
    for r in rows:
        e = estimate({**d, "batch_size": r["batch_size"]}, with_max_batch=False)
        assert (r["fits"], r["headroom_bytes"]) == (e.fits, e.headroom_bytes)
    assert [r["fits"] for r in rows] == [True, False]


def test_cli_prints_the_margin_and_takes_the_flag(capsys):
    assert main(["estimate", "--model", "torchvision/vit_l_16", "--task", "train", "--gpu",
                 "nvidia-rtx-4090", "--safety-margin", "5%"]) == 0
    out = capsys.readouterr().out
    assert "max batch size: 84" in out
    assert "memory limit: " in out and "safety margin 5% of usable" in out


def test_report_prints_the_limit():
    from vramplan.report import report
    md = report({**VIT_L, "safety_margin": "5%"}, fmt="md", advice=False)
    assert "Memory limit (usable minus safety margin)" in md
    assert "| Safety margin (kept free of usable memory) | 5% of usable (" in md
