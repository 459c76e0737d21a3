"""One answer per question in the CLI text and the report (issue 20.6, 20.2, 19.2): the verdict
sentence, the figures, `advise` and `sweep` hold the plan to the one memory limit (usable less
the safety margin) and print that margin beside the figures; the verdict names the deciding
pipeline stage on every surface; sizes, rates, times and counts are written in the report's
formats by the CLI too.

The RTX 4090's usable memory is 25,757,220,864 B = 23.99 GiB (hwdb); 5% of it is
int(25,757,220,864 x 0.05) = 1,287,861,043 B = 1.20 GiB, so the limit is 24,469,359,821 B =
22.79 GiB.
"""
from __future__ import annotations

import re

from vramplan.cli import main
from vramplan.report import assemble, to_markdown
from vramplan.report.text import count, gbs, seconds, size
from vramplan.report.words import verdict
from vramplan.units import GiB

VIT_L = ["--model", "torchvision/vit_l_16", "--task", "train", "--gpu", "nvidia-rtx-4090"]
LIMIT_4090_5PCT = 25_757_220_864 - 1_287_861_043


def _run(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


# a plan of 23 GiB on a 24 GiB card that keeps a 2 GiB margin: 1 GiB over the 22 GiB limit,
# though 1 GiB under the usable memory
EST = {"fits": False, "headroom_bytes": -GiB, "gpu": {"name": "Card 24"},
       "per_gpu": {"device_used_bytes": 23 * GiB},
       "memory_limit": {"usable_bytes": 24 * GiB, "safety_margin": 2 * GiB,
                        "safety_margin_bytes": 2 * GiB, "safety_margin_default": False,
                        "limit_bytes": 22 * GiB}}


def test_the_verdict_sentence_is_held_to_the_limit():
    """Before: 'Does not fit on Card 24: 23.00 GiB needed, 24.00 GiB usable, -1.00 GiB over'
    (usable memory in the sentence, the limit in the verdict)."""
    said = verdict(EST, 24 * GiB)["sentence"]
    assert said == ("Does not fit on Card 24: 23.00 GiB needed, the 22.00 GiB limit (24.00 GiB "
                    "usable less a 2.00 GiB safety margin), 1.00 GiB over")
    fits = {**EST, "fits": True, "headroom_bytes": GiB,
            "per_gpu": {"device_used_bytes": 21 * GiB}}
    assert verdict(fits, 24 * GiB)["sentence"] == (
        "Fits on Card 24: 21.00 GiB of the 22.00 GiB limit (24.00 GiB usable less a 2.00 GiB "
        "safety margin), 1.00 GiB to spare")
    zh = verdict(EST, 24 * GiB, "zh")["sentence"]
    assert "上限 22.00 GiB" in zh and "超出 1.00 GiB" in zh
    assert not re.search(r"[a-z]{3}", zh.replace("Card", ""))   # no English left


def test_margin_words():
    from vramplan.report.words import margin_words
    assert margin_words({"safety_margin": 0.05, "safety_margin_bytes": 1_287_861_043}) == \
        "5% of usable (1.20 GiB)"
    assert margin_words({"safety_margin": 0.045, "safety_margin_bytes": GiB}) == \
        "4.5% of usable (1.00 GiB)"
    assert margin_words({"safety_margin": 4 * GiB, "safety_margin_bytes": 4 * GiB}) == "4.00 GiB"
    assert margin_words({"safety_margin": 0, "safety_margin_bytes": 0}) == "0"


def test_estimate_text_says_the_limit_in_the_verdict(capsys):
    out = _run(capsys, "estimate", *VIT_L, "--safety-margin", "5%").splitlines()
    assert out[0].startswith("torchvision/vit_l_16 · train on NVIDIA GeForce RTX 4090")
    assert "of the 22.79 GiB limit (23.99 GiB usable less a 1.20 GiB safety margin)" in out[1]
    assert ("memory limit: 22.79 GiB = usable 23.99 GiB - safety margin 5% of usable "
            "(1.20 GiB)") in out
    default = _run(capsys, "estimate", *VIT_L)
    assert "safety margin 0 (default; set with --safety-margin)" in default


def test_report_figures_say_margin_limit_and_headroom_to_the_limit():
    from vramplan.estimate import estimate
    e = estimate({"model": "torchvision/vit_l_16", "task": "train", "gpu": "nvidia-rtx-4090",
                  "safety_margin": "5%"})
    assert e.to_dict()["memory_limit"]["limit_bytes"] == LIMIT_4090_5PCT
    md = to_markdown(assemble(e.to_dict(), e.gpu.to_dict()))
    assert "| Safety margin (kept free of usable memory) | 5% of usable (1.20 GiB) |" in md
    assert "| Memory limit (usable minus safety margin) | 22.79 GiB |" in md
    # before: 'Headroom (usable minus peak)' beside a headroom measured to the limit
    assert f"| Headroom (memory limit minus peak) | {size(e.headroom_bytes)} |" in md
    assert size(LIMIT_4090_5PCT - e.device_used_bytes) == size(e.headroom_bytes)
    assert "of the 22.79 GiB limit" in md


def test_advise_says_the_limit_and_grows_to_estimates_max_batch(capsys):
    """advise's head is estimate's (plan, verdict, limit); its room to grow is the largest
    batch the estimate finds under the same limit (84 at 5% on the 4090)."""
    est = _run(capsys, "estimate", *VIT_L, "--safety-margin", "5%")
    assert "max batch size: 84" in est
    out = _run(capsys, "advise", *VIT_L, "--safety-margin", "5%", "--no-gpu-table")
    lines = out.splitlines()
    assert lines[:3] == est.splitlines()[:2] + [
        "memory limit: 22.79 GiB = usable 23.99 GiB - safety margin 5% of usable (1.20 GiB)"]
    assert "room to grow within the memory limit: batch size up to 84" in out
    assert "headroom" not in out.split("\n\n")[0]     # before: 'limit with headroom 22.79 GiB'


def test_sweep_grid_keeps_the_headroom_flag(capsys):
    """Before, --headroom applied to --gpus-needed only: a grid kept usable memory as its
    limit and said batch 85 fits at 5% (22.92 GiB used > the 22.79 GiB limit)."""
    out = _run(capsys, "sweep", *VIT_L, "--headroom", "5%", "--vary", "batch_size=84,85")
    rows = [ln.split() for ln in out.splitlines() if ln[:2] in ("84", "85")]
    assert [r[3] for r in rows] == ["yes", "no"]
    assert "memory limit: usable memory - safety margin 5% of usable" in out


def test_sweep_summary_column_is_the_limit(capsys):
    # a scenario file takes no key flag but --gpu: the margin comes with --headroom
    out = _run(capsys, "sweep", "--scenario", "examples/plan.json", "--headroom", "5%",
               "--vary", "batch_size=1..64", "--vary", "gpu=nvidia-rtx-4090,nvidia-l4")
    head = out.splitlines()[0]
    assert "limit GiB" in head and "usable GiB" not in head
    row = next(ln.split() for ln in out.splitlines() if ln.startswith("nvidia-rtx-4090"))
    assert row[1] == "22.79"


PP = ["--model", "meta-llama/Llama-3.1-70B", "--task", "train", "--batch-size", "1",
      "--seq-len", "8192", "--precision", "bf16-mixed", "--gpus", "64", "--tensor", "8",
      "--pipeline", "4", "--checkpointing", "selective", "--option", "sequence-parallel",
      "--gradient-accumulation", "8", "--gpu", "nvidia-h100-sxm5-80gb"]


def test_pipeline_verdict_names_the_deciding_rank_in_cli_and_report(capsys):
    """Stage 0 holds the embedding and min(4, 8) = 4 micro-batches in flight: it decides. The
    CLI's verdict line says so as the report's does (before: only a line under the ranks)."""
    out = _run(capsys, "estimate", *PP).splitlines()
    assert out[1].endswith("(decided by stage 0, the rank with the most memory)")
    ranks = out.index("per rank (pipeline stages; per_gpu above is the worst):")
    assert out[ranks + 2].split()[:2] == ["stage", "0"] and " 4 " in out[ranks + 2]
    md = _run(capsys, "report", *PP, "--no-advice")
    assert "(decided by stage 0, the rank with the most memory)**" in md
    assert "## Memory per rank" in md
    adv = _run(capsys, "advise", *PP, "--no-gpu-table")
    assert adv.splitlines()[1] == out[1]


def test_cli_writes_numbers_as_the_report_does(capsys):
    """One format per quantity (issue 19.2): the CLI's sizes (MiB under 1 GiB), bandwidth
    ('3,350.0 GB/s'), step times and token rates are the report's strings."""
    import json
    argv = ["estimate", "--scenario", "examples/plan.json", "--gpu", "nvidia-h100-sxm5-80gb"]
    e = json.loads(_run(capsys, *argv, "--format", "json"))
    out = _run(capsys, *argv)
    bw, comps = e["bandwidth"], e["per_gpu"]["components"]
    assert f"bandwidth: datasheet {gbs(bw['datasheet_bandwidth_gbs'])}, achievable " \
           f"{gbs(bw['achievable_bandwidth_gbs'])}" in out
    assert "3,350.0 GB/s" in out
    assert f"time per step >= {seconds(bw['min_step_time_s'])}" in out
    assert f"<= {count(bw['max_tokens_per_s'])} tokens/s" in out
    small = [k for k, v in comps.items() if 0 < v < GiB]
    assert small and all(re.search(rf"{size(comps[k])}$", out, re.M) for k in small)
    assert "MiB" in out


def test_gpus_table_writes_memory_and_bandwidth_alike(capsys):
    out = _run(capsys, "gpus", "--vendor", "nvidia", "--min-memory", "80GiB")
    row = next(ln for ln in out.splitlines() if ln.startswith("nvidia-h100-sxm5-80gb "))
    assert "80.00" in row and "79.65" in row and "3,350.0" in row
    one = _run(capsys, "gpu", "nvidia-h100-sxm5-80gb")
    assert "bandwidth              3,350.0 GB/s" in one
    csv = _run(capsys, "gpus", "--format", "csv", "--vendor", "nvidia")
    assert ",80.0,79.65,HBM3,3350.0," in csv      # CSV keeps plain numbers


def test_cluster_text_says_limit_and_margin(capsys):
    """H100 SXM5: usable 85,520,809,984 B = 79.65 GiB; 5% kept = 4,276,040,499 B = 3.98 GiB;
    limit 81,244,769,485 B = 75.67 GiB (was 'limit 75.7 GiB per GPU', the margin unsaid)."""
    out = _run(capsys, "cluster", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096",
               "--global-batch", "32", "--gpu", "nvidia-h100-sxm5-80gb", "--max-gpus", "8",
               "--safety-margin", "5%")
    assert ("memory limit 75.67 GiB per GPU (usable 79.65 GiB - safety margin 3.98 GiB)"
            in out.splitlines()[0])
    assert "used GiB" in out.splitlines()[2]


def test_trace_holds_the_plan_to_the_same_limit(capsys):
    """`trace` takes estimate's --safety-margin (issue 20.9) and now keeps it (issue 20.6):
    headroom = usable - margin - device used (before: usable - device used, the margin
    dropped). Its text names the plan first and writes sizes and labels as estimate does."""
    import json
    argv = ["trace", "--model", "gpt2", "--task", "train", "--batch-size", "1", "--seq-len",
            "64", "--gpu", "nvidia-l4", "--safety-margin", "2GiB"]
    d = json.loads(_run(capsys, *argv, "--format", "json"))
    usable = d["gpu"]["usable_memory_bytes"]
    assert d["headroom_bytes"] == usable - 2 * GiB - d["per_gpu"]["device_used_bytes"]
    from vramplan.commands.trace import render
    out = render(d).splitlines()
    assert out[0] == "gpt2 · train on NVIDIA L4 (24.00 GiB)"
    assert "peak in Optimizer step of step" in out[1]
    assert any(ln.startswith("CUDA context ") for ln in out)
    assert out.index("") and f"(headroom {size(d['headroom_bytes'])} to the memory limit)" in \
        "\n".join(out)


def test_page_and_report_write_times_alike():
    """units.format_seconds for both (before: the page '443.90 ms', the report '443.9 ms')."""
    from vramplan.ui.state.text import seconds as page_seconds
    for s, said in ((0.4439, "443.9 ms"), (0.00248, "2.48 ms"), (5e-5, "50.0 µs"),
                    (1.041, "1.04 s"), (1234.5, "1,234.50 s")):
        assert page_seconds(s) == said and seconds(s) == said, s


def test_plan_line_says_a_size_only_model_as_people_do(capsys):
    """Before: 'size-only decoder of 7,000,000,000.0 params · train on ...'."""
    out = _run(capsys, "estimate", "--architecture", '{"params": 7e9}', "--task", "train",
               "--gpu", "nvidia-h100-sxm5-80gb")
    assert out.splitlines()[0] == ("size-only decoder of 7B parameters · train on NVIDIA H100 "
                                   "SXM5 80GB (80.00 GiB)")


def test_gpus_json_fills_usable_memory(capsys):
    """The A40 has no driver-reported total in the database (usable_memory_bytes null): the
    table's usable_gib 48.00 is its nominal 48 GiB, the figure the estimate uses; the JSON now
    says it too (usable_bytes), for every device."""
    import json
    rows = json.loads(_run(capsys, "gpus", "--format", "json"))
    a40 = next(r for r in rows if r["id"] == "nvidia-a40")
    assert a40["usable_memory_bytes"] is None and a40["usable_bytes"] == 48 * GiB
    h100 = next(r for r in rows if r["id"] == "nvidia-h100-sxm5-80gb")
    assert h100["usable_bytes"] == h100["usable_memory_bytes"] == 85_520_809_984
    assert all(isinstance(r["usable_bytes"], int) and r["usable_bytes"] > 0 for r in rows)


def test_sweep_gpus_needed_says_its_limit(capsys):
    out = _run(capsys, "sweep", *VIT_L, "--gpus-needed", "--vary", "gpu=nvidia-rtx-4090",
               "--headroom", "5%")
    assert out.splitlines()[-1] == "memory limit: usable memory - safety margin 5% of usable"


def test_advise_plans_each_say_their_gpu_seconds(capsys):
    """Plans rank by GPU-seconds per step (issue 20.5): every plan row says its own, the
    one-GPU plans too (before: only plans on more than one GPU)."""
    out = _run(capsys, "advise", "--model", "gpt2", "--task", "train", "--batch-size", "64",
               "--gpu", "nvidia-t4", "--safety-margin", "5%", "--no-gpu-table")
    plans = out.split("plans that fit within the memory limit")[1].split("\n\n")[0]
    rows = [ln for ln in plans.splitlines()[3:] if ln.strip()]
    secs = [float(re.search(r"= ([0-9.,]+) GPU-s", ln).group(1).replace(",", "")) for ln in rows]
    assert rows and len(secs) == len(rows) and any(ln.split()[1] == "1" for ln in rows)
