"""Bad input everywhere (hypothesis): any JSON value for any key, any query string, any bytes
as a scenario file or a config.json is either accepted or refused with a VramplanError that
names the problem: never another exception, never a traceback."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings, strategies as st

from vramplan import safejson
from vramplan.errors import ScenarioError, VramplanError
from vramplan.scenario import CONTRACT_KEYS, Scenario, extra_keys, load_scenarios

KEYS = list(CONTRACT_KEYS) + sorted(extra_keys())
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40))
json_value = st.recursive(json_leaf, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=12), kids, max_size=4)),
    max_leaves=20)
SEEDS = [{"model": "gpt2"}, {"model": "meta-llama/Llama-3.1-8B", "task": "serve"},
         {"model": "torchvision/resnet50"}, {"task": "render"}, {"task": "array"},
         {"model": "stable-diffusion-v1-5/stable-diffusion-v1-5"}, {"task": "volume"}]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(seed=st.sampled_from(SEEDS), key=st.sampled_from(KEYS), value=json_value)
def test_any_value_for_any_key(seed, key, value):
    d = {**seed, key: value}
    try:
        Scenario.from_dict(d)
    except ScenarioError as exc:
        assert exc.key and str(exc)
        assert len(str(exc)) < 2000


@FUZZ
@given(seed=st.sampled_from(SEEDS), pairs=st.lists(st.tuples(
    st.sampled_from(KEYS + ["parallel.gpus", "lora.rank", "serving.max_num_seqs", "nosuch"]),
    st.text(max_size=30)), max_size=4))
def test_any_query_string(seed, pairs):
    from urllib.parse import urlencode
    q = urlencode(list(seed.items()) + pairs)
    try:
        Scenario.from_query(q)
    except ScenarioError as exc:
        assert exc.key and str(exc)


@FUZZ
@given(data=st.binary(max_size=400))
def test_any_bytes_as_a_scenario_file(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("fuzz") / "s.json"
    f.write_bytes(data)
    try:
        out = load_scenarios(f)
    except VramplanError as exc:
        assert str(exc)
    else:
        assert all(isinstance(x, (Scenario, ScenarioError)) for x in out)


@FUZZ
@given(value=json_value)
def test_any_json_as_an_uploaded_config(value):
    text = json.dumps(value)
    try:
        arch = safejson.loads(text, "config.json")
        Scenario.from_dict({"architecture": arch})
    except VramplanError as exc:
        assert str(exc)


@FUZZ
@given(text=st.text(max_size=200))
def test_any_text_as_json(text):
    try:
        safejson.loads(text, "upload")
    except VramplanError as exc:
        assert str(exc).startswith("upload")


def test_hand_written_cases():
    cases = [
        ({"model": "gpt2", "batch_size": "8"}, "batch_size"),
        ({"model": "gpt2", "batch_size": True}, "batch_size"),
        ({"model": "gpt2", "batch_size": 1e999}, "batch_size"),
        ({"model": "gpt2", "batch_size": float("nan")}, "batch_size"),
        ({"model": "gpt2", "nosuch": 1}, "nosuch"),
        ({"model": "<script>alert(1)</script>"}, "model"),
        ({"model": "gpt2", "gpu": "x" * 10_000}, "gpu"),
        ({"model": "gpt2", "parallel": {"gpus": 3, "tensor": 2}}, "parallel.gpus"),
        ({"task": "render", "texture_budget": "1e999 GiB"}, "texture_budget"),
    ]
    for d, key in cases:
        try:
            Scenario.from_dict(d)
        except ScenarioError as exc:
            assert exc.key == key, (d, exc.key, str(exc))
            assert "<script>" not in str(exc) or key == "model"
        else:
            raise AssertionError(f"{d} was accepted")
