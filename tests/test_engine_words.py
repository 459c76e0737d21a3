"""A serve plan within the memory limit whose engine would not start (vLLM's start-up check,
the estimate's `serving` section) says why, the same words on the page, in the report and in
the CLI; never 'short by -6.86 GiB' or '-6.86 GiB over' (what the three said before)."""
from vramplan.estimate import estimate
from vramplan.report.words import engine_why, verdict

SERVE_70B = {"model": "meta-llama/Llama-3.1-70B", "task": "serve", "precision": "bf16",
             "parallel": {"gpus": 2, "tensor": 2}, "gpu": "nvidia-h100-sxm5-80gb"}


def test_words_say_the_engine_does_not_start():
    d = estimate(SERVE_70B, with_max_batch=False).to_dict()
    usable = d["memory_limit"]["usable_bytes"]
    assert not d["fits"] and d["per_gpu"]["device_used_bytes"] < d["memory_limit"]["limit_bytes"]
    why = engine_why(d)
    assert why == "the vLLM engine does not start: its KV pool holds 12,096 of 131,072 tokens"
    w = verdict(d, usable)
    assert w["detail"] == why and "-" not in w["sentence"].split(":")[1]
    assert w["sentence"] == f"Does not fit on NVIDIA H100 SXM5 80GB: {why}"
    zh = verdict(d, usable, "zh")
    assert "vLLM 引擎无法启动" in zh["sentence"] and "131,072" in zh["detail"]


def test_cli_and_report_say_it(capsys):
    from vramplan.cli import main
    flags = ["--model", SERVE_70B["model"], "--task", "serve", "--precision", "bf16",
             "--gpus", "2", "--tensor", "2", "--gpu", SERVE_70B["gpu"]]
    assert main(["estimate", *flags]) == 0
    out = capsys.readouterr().out
    assert "the vLLM engine does not start" in out and " over" not in out.splitlines()[1]
    assert main(["report", *flags, "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert "the vLLM engine does not start: its KV pool holds 12,096 of 131,072 tokens" in out
    assert "-6.86" not in out


def test_page_verdict_and_advisor_say_it(new_app):
    app = new_app(lazy_chart=False)
    app.state.apply(SERVE_70B)
    assert app.state.advice is not None and app.state.advice.plans
    why = "the vLLM engine does not start: its KV pool holds 12,096 of 131,072 tokens"
    assert why in app.panel.value
    assert "The vLLM engine does not start" in app.advisor.value
    assert "Short by -" not in app.advisor.value and "Short by" not in app.advisor.value
