"""A model switch on the page runs the pass once (issue 19.1 'one edit validates once'): the
draft with the new model is resolved once (`Resolution.kept`: what the new model does not take
or refuses goes, by the rows and the pass's own errors), and that pass is the new draft's.
Before: three (form.fields of the draft, `without_refused`'s pass, the commit's)."""
from __future__ import annotations

from vramplan.estimate import estimate
from vramplan.scenario.resolution import Resolution
from vramplan.ui.state import state as S
from vramplan.ui.state.state import PlanState

H100 = "nvidia-h100-sxm5-80gb"
LLAMA = "meta-llama/Llama-3.1-8B"


def _no_probes(monkeypatch):
    """The estimate without its max-batch search (whose probes are counted elsewhere:
    tests/test_scenario_variants.py)."""
    monkeypatch.setattr(S, "run_estimate", lambda sc, dev: estimate(sc, dev,
                                                                     with_max_batch=False))


def test_a_switch_within_the_family_runs_the_pass_once(monkeypatch, scenario_passes):
    st = PlanState(draft={"model": "gpt2", "task": "lora", "batch_size": 8, "seq_len": 1024},
                   gpu=H100)
    calls = scenario_passes()
    _no_probes(monkeypatch)
    st.set_model("gpt2-medium")
    # gpt2-medium takes every entry (1024 positions, like gpt2): nothing goes, one pass
    assert st.draft == {"model": "gpt2-medium", "task": "lora", "batch_size": 8,
                        "seq_len": 1024}
    assert calls == [{**st.draft, "gpu": H100}]
    assert st.scenario.model == "gpt2-medium" and not st.errors


def test_a_switch_that_drops_entries_passes_once_per_round(monkeypatch, scenario_passes):
    # Llama -> gpt2: seq_len 8192 (gpt2: 1024 positions) and the LoRA target gate_proj go,
    # one round each (each is a rule between keys, and the pass names the first it meets)
    st = PlanState(gpu=H100)
    st.apply({"model": LLAMA, "task": "lora", "seq_len": 8192, "batch_size": 4,
              "lora": {"rank": 16, "targets": ["q_proj", "gate_proj"]}})
    calls = scenario_passes()
    _no_probes(monkeypatch)
    st.set_model("gpt2")
    assert st.draft == {"model": "gpt2", "task": "lora", "batch_size": 4, "lora": {"rank": 16}}
    assert calls[-1] == {**st.draft, "gpu": H100}
    # 3 passes: the switch's (names seq_len: the rules between keys stop at the first), then
    # without seq_len (names lora.targets), then without gate_proj, the new draft's own, used
    # by the commit. Before: 5 (form.fields, without_refused's 3, the commit's)
    assert [sorted(c) for c in calls] == [
        ["batch_size", "gpu", "lora", "model", "seq_len", "task"],
        ["batch_size", "gpu", "lora", "model", "task"],
        ["batch_size", "gpu", "lora", "model", "task"]]
    assert calls[1]["lora"]["targets"] == ["q_proj", "gate_proj"] and not st.errors


def test_kept_is_the_pass_itself_when_nothing_goes():
    r = Resolution({"model": "gpt2", "task": "train", "batch_size": 2}, H100)
    assert r.kept() is r
    # a key the task does not take (no row shows it) goes with no error of its own: lora on
    # train is refused by the pass; serving on train likewise
    r2 = Resolution({"model": "gpt2", "task": "train", "lora": {"rank": 8}}, H100)
    assert r2.kept().given == {"model": "gpt2", "task": "train"}
    assert r2.kept().scenario is not None
