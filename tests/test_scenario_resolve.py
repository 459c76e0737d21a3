"""The one resolution pass (`scenario.resolve(given, gpu)`): which keys were given, the others
derived by the key table's rows (the serving couplings and vLLM's max_num_batched_tokens
written once, `keys.derive`), every problem collected (`ScenarioErrors`), the form as a view
of the pass, the advisor changing given keys and re-deriving, the link holding the given keys,
one validation per edit on the page."""
from __future__ import annotations

import pytest

from vramplan.errors import ScenarioError
from vramplan.scenario import Scenario, ScenarioErrors, form, resolve
from vramplan.scenario import collect
from vramplan.scenario.keys import derive, key
from vramplan.scenario.rules import vllm_batched_tokens

H100 = "nvidia-h100-sxm5-80gb"


@pytest.mark.parametrize("mml, nbt", [(512, 2048), (1024, 2048), (4096, 4096), (8192, 8192),
                                      (32768, 8192)])
def test_vllm_batched_tokens_rule(mml, nbt):
    # max(2048, min(mml, 8192)) by hand: 512 -> 2048, 4096 -> 4096, 32768 -> 8192 (not
    # max(2048, mml) = 32768, the non-chunked V0 path footprint.py used)
    assert vllm_batched_tokens(mml) == nbt
    assert key("serving.max_num_batched_tokens").derive({"serving.max_model_len": mml}) == nbt
    sc = resolve({"model": "meta-llama/Llama-3.1-8B", "task": "serve",
                  "serving": {"max_model_len": mml}}, H100)
    assert sc.serving.max_num_batched_tokens == nbt


def test_serving_couplings_each_default_to_the_other():
    # serve: batch_size 8 given -> max_num_seqs 8; seq_len 1000 -> max_model_len 1000 ->
    # batched tokens max(2048, min(1000, 8192)) = 2048; nothing given: 256 and the positions
    got = derive({"task": "serve", "batch_size": 8, "seq_len": 1000})
    assert (got["serving.max_num_seqs"], got["serving.max_model_len"],
            got["serving.max_num_batched_tokens"]) == (8, 1000, 2048)
    got = derive({"task": "serve", "serving.max_num_seqs": 16, "_positions": 1024})
    assert (got["batch_size"], got["seq_len"], got["serving.max_model_len"]) == (16, 1024, 1024)
    assert derive({"task": "train", "_positions": 1024}).get("batch_size") is None
    sc = resolve({"model": "gpt2", "task": "serve", "batch_size": 8}, H100)
    assert (sc.serving.max_num_seqs, sc.seq_len, sc.serving.max_model_len) == (8, 1024, 1024)


def test_resolve_keeps_which_keys_were_given():
    sc = resolve({"model": "gpt2", "task": "serve", "batch_size": 8,
                  "serving": {"max_model_len": 512}}, H100)
    assert sc.given == {"model", "task", "batch_size", "serving", "serving.max_model_len", "gpu"}
    assert sc.given_dict() == {"model": "gpt2", "task": "serve", "batch_size": 8,
                               "serving": {"max_model_len": 512}, "gpu": H100}
    # built directly: every value counts as given
    assert Scenario(model="gpt2").given is None


def test_every_problem_is_collected_each_naming_its_key():
    with pytest.raises(ScenarioErrors) as info:
        resolve({"model": "gpt2", "batch_size": 0, "seq_len": -1, "bogus": 1,
                 "parallel": {"tensor": 0}})
    exc = info.value
    keys = [k for k, _ in exc.errors]
    assert keys == ["bogus", "batch_size", "seq_len", "parallel.tensor"]
    for k in keys:
        assert f"scenario key '{k}': " in str(exc)
    # callers that catch ScenarioError keep working; `key` names the first
    assert isinstance(exc, ScenarioError) and exc.key == "bogus"
    with pytest.raises(ScenarioError, match="batch_size"):
        Scenario.from_dict({"model": "gpt2", "batch_size": 0, "seq_len": -1})


def test_one_error_reads_as_before():
    with pytest.raises(ScenarioErrors) as info:
        Scenario.from_dict({"model": "gpt2", "batch_size": 0})
    assert str(info.value) == ("scenario key 'batch_size': must be between 1 and 1,073,741,824, "
                               "got 0")
    assert info.value.errors == [("batch_size", "must be between 1 and 1,073,741,824, got 0")]


def test_form_check_is_the_pass_s_errors():
    draft = {"model": "gpt2", "batch_size": 0, "seq_len": "x", "bogus": 1}
    with pytest.raises(ScenarioErrors) as info:
        resolve(draft)
    assert form.check(draft) == info.value.by_key()
    assert set(form.check(draft)) == {"batch_size", "seq_len", "bogus"}
    sc, errors = form.normalise({"model": "gpt2", "batch_size": 4}, H100)
    assert errors == {} and sc.batch_size == 4 and sc.gpu == H100


def test_advisor_changes_given_keys_and_re_derives():
    from vramplan.advisor.makers import serving_change
    sc = resolve({"model": "meta-llama/Llama-3.1-8B", "task": "serve"}, H100)
    assert sc.serving.max_model_len == 131072 and sc.serving.max_num_batched_tokens == 8192
    # max_model_len 131072 -> 1024: seq_len (derived) follows, batched tokens re-derived:
    # max(2048, min(1024, 8192)) = 2048
    sc2 = sc.replace(**serving_change(sc, "max_model_len", 1024))
    assert (sc2.seq_len, sc2.serving.max_num_batched_tokens) == (1024, 2048)
    # a given max_num_batched_tokens stays what was given (the old advisor rewrote it)
    given = resolve({"model": "meta-llama/Llama-3.1-8B", "task": "serve", "seq_len": 4096,
                     "serving": {"max_model_len": 8192, "max_num_batched_tokens": 3000}}, H100)
    sc3 = given.replace(**serving_change(given, "max_model_len", 2048))
    assert (sc3.seq_len, sc3.serving.max_model_len,
            sc3.serving.max_num_batched_tokens) == (2048, 2048, 3000)
    # max_num_seqs 256 -> 128: the derived batch_size follows
    sc4 = sc.replace(**serving_change(sc, "max_num_seqs", 128))
    assert (sc4.batch_size, sc4.serving.max_num_seqs) == (128, 128)


def test_link_writes_the_given_keys_only():
    sc = resolve({"model": "gpt2", "task": "serve", "batch_size": 8}, H100)
    q = sc.to_query()
    # serving.max_num_seqs = 8 is derived from batch_size: not in the link
    assert q == f"model=gpt2&task=serve&gpu={H100}&batch_size=8"
    assert Scenario.from_query(q) == sc


def test_one_edit_on_the_page_validates_once(monkeypatch):
    from vramplan.ui.state import state as ui_state
    st = ui_state.PlanState(draft={"model": "gpt2", "task": "train"}, gpu=H100)
    calls, at_estimate = [], []
    real_fields, real_estimate = collect.fields_of, ui_state.run_estimate

    def counting(*a, **kw):
        calls.append(1)
        return real_fields(*a, **kw)

    def estimating(sc, dev, *a, **kw):
        at_estimate.append(len(calls))      # validations before the estimate's own probes
        return real_estimate(sc, dev, *a, **kw)

    monkeypatch.setattr(collect, "fields_of", counting)
    monkeypatch.setattr(ui_state, "run_estimate", estimating)
    st.set("batch_size", 4)
    # before: form.check ran the pass once, then Scenario.from_dict a second time
    assert at_estimate == [1]
    assert st.scenario.batch_size == 4 and not st.errors
