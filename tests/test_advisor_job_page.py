"""The page's toggle for changes to the job (issue 20.4): off, the advisor panel lists them
apart with their risk and no plan uses them; on, the advisor is asked again and they may."""
import pytest

pytest.importorskip("ipywidgets")

JOB = {"lora", "qlora", "pure-16bit", "adamw-8bit", "paged-adamw-8bit", "adafactor", "lion"}


def test_the_toggle_lets_plans_change_the_job(new_app):
    app = new_app(lazy_chart=False)
    app.state.apply({"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": 4,
                     "seq_len": 4096, "gpu": "nvidia-rtx-4090"})
    adv = app.state.advice
    assert adv is not None and adv.plans and adv.job_changes
    assert not any({c["id"] for c in p.changes} & JOB for p in adv.plans)
    assert "If you can change the job" in app.advisor.value
    assert "LoRA adapters" in app.advisor.value                  # listed apart, with risk
    app.advisor.allow.value = True
    adv2 = app.state.advice
    assert adv2 is not adv and adv2.allow_job_changes
    assert any({c["id"] for c in p.changes} & JOB for p in adv2.plans)
