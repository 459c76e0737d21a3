"""A key row that says how the rules between keys read it (`Key.plain`: batch_size, no rule
reads it; seq_len, a decoder's positions with new_tokens and image tokens) is checked without
the pass (`scenario.variants.plain_probe`), so the estimate's max-batch and longest-context
searches run no pass where the rows know the answer (issue 19.1: one page edit, one pass).
The probe's answers are the pass's own: where it says the field alone is the plan at `v`,
`Scenario.replace(key=v)` gives that very scenario; where it gives an error, the pass refuses
`v`; where a derivation follows the key (serve's max_num_seqs, max_model_len) or its rules
may drop another key (images), it says nothing and the pass decides."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vramplan.errors import ScenarioError
from vramplan.scenario import Scenario, keys, resolve
from vramplan.scenario.rules import position_limit
from vramplan.scenario.variants import Variants, plain_probe, with_field

GOLDEN = Path(__file__).parent / "golden" / "estimates.jsonl"
ROWS = [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]
H100 = "nvidia-h100-sxm5-80gb"
LLAMA = "meta-llama/Llama-3.1-8B"
QWEN_VL = "Qwen/Qwen2.5-VL-7B-Instruct"


def _plan(row):
    try:
        return Scenario.from_dict(row["input"])
    except ScenarioError:
        return None


def _agrees(sc, key: str, v) -> str | None:
    """None when the probe's answer at `v` is the pass's; else what differs."""
    probe = plain_probe(sc, key)
    said = probe(v) if probe is not None else None
    if said is None:
        return None
    try:
        got = sc.replace(**{key: v})
    except ScenarioError as exc:
        got = exc
    if said is True and got != with_field(sc, key, v):
        return f"{key}={v}: the probe said the field alone, the pass gave {got!r}"
    if isinstance(said, ScenarioError) and not isinstance(got, ScenarioError):
        return f"{key}={v}: the probe refused, the pass accepted"
    return None


def _values(sc, key: str) -> set:
    vals = {1, 2, 4097, 1 << 20, 1 << 24}
    lim = position_limit(sc.spec)
    if key == "seq_len" and lim is not None:     # either side of the positions limit
        room = lim[0] - (sc.new_tokens or 0)
        vals |= {room - 1, room, room + 1, lim[0]}
    return {v for v in vals if v >= 1}


@pytest.mark.parametrize("key", ["batch_size", "seq_len"])
def test_every_golden_plan_either_side_of_the_limits(key):
    # every plan of the golden table at the searches' ends (1, the caps 2**20 and 2**24),
    # between, and either side of the model's positions less the new tokens
    said = 0
    for row in ROWS:
        sc = _plan(row)
        if sc is None or plain_probe(sc, key) is None:
            continue
        for v in _values(sc, key):
            said += plain_probe(sc, key)(v) is not None
            assert _agrees(sc, key, v) is None, row["id"]
    assert said > len(ROWS) // 4


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=st.sampled_from(ROWS), key=st.sampled_from(["batch_size", "seq_len"]),
       v=st.one_of(st.integers(1, 1 << 20), st.sampled_from([0, -1, 1 << 30, (1 << 30) + 1])))
def test_the_probe_s_answer_is_the_pass_s(row, key, v):
    sc = _plan(row)
    if sc is not None:
        assert _agrees(sc, key, v) is None


@pytest.mark.parametrize("plan", [
    {"model": QWEN_VL, "task": "generate", "images": 1, "image_size": [448, 448]},
    {"model": QWEN_VL, "task": "generate", "images": 4, "image_size": [2048, 2048],
     "new_tokens": 1000},
    {"model": "meta-llama/Llama-3.2-11B-Vision", "task": "generate", "images": 1},
    {"model": "gpt2", "task": "generate", "new_tokens": 100},
])
def test_image_tokens_and_new_tokens_take_positions(plan):
    # Qwen2.5-VL: 128000 positions; 4 images of 2048 x 2048 at 14 px patches merged 2 x 2:
    # 4 x round(2048 / 28)^2 = 4 x 73^2 = 21316 tokens (catalog.images.image_cost), so with 1000
    # new tokens the longest seq_len is 128000 - 1000 - 21316 = 105684, checked on both sides
    sc = resolve(plan, H100)
    lim = position_limit(sc.spec)[0]
    for v in sorted(_values(sc, "seq_len") | set(range(lim - 30000, lim + 2, 997))):
        assert _agrees(sc, "seq_len", v) is None, v


def test_the_probe_refuses_what_the_row_refuses_and_what_moves_a_derivation():
    sc = resolve({"model": LLAMA, "task": "lora"}, H100)
    probe = plain_probe(sc, "batch_size")
    # batch_size's row: an int from 1 to 2**30 (contract_keys.LIMIT); the pass's error below
    assert probe(1) is True and probe(1 << 30) is True
    assert isinstance(probe(0), ScenarioError) and isinstance(probe((1 << 30) + 1), ScenarioError)
    for v in (2.0, True):                                    # not integers, as the pass says
        assert isinstance(probe(v), ScenarioError) and _agrees(sc, "batch_size", v) is None
    # serve: max_num_seqs follows the batch (keys.derive): at 16 it would be 16, not the
    # plan's 256, so the field alone is not the plan; the pass decides
    serve = resolve({"model": LLAMA, "task": "serve"}, H100)
    probe = plain_probe(serve, "batch_size")
    assert probe(256) is True and probe(16) is None
    assert serve.replace(batch_size=16).serving.max_num_seqs == 16
    # with max_num_seqs given, nothing follows the batch: the field alone again
    fixed = resolve({"model": LLAMA, "task": "serve", "serving": {"max_num_seqs": 64}}, H100)
    assert plain_probe(fixed, "batch_size")(16) is True
    assert fixed.replace(batch_size=16) == with_field(fixed, "batch_size", 16)


def test_seq_len_past_the_positions_is_refused_with_the_pass_s_error():
    # Llama-3.1-8B: 131072 positions (rope llama3, already scaled); generate's 512 new
    # tokens leave 130560 for the prompt
    sc = resolve({"model": LLAMA, "task": "generate", "new_tokens": 512}, H100)
    probe = plain_probe(sc, "seq_len")
    assert probe(130560) is True
    err = probe(130561)
    assert isinstance(err, ScenarioError) and err.key == "seq_len" and "131072" in str(err)
    with pytest.raises(ScenarioError, match="131,072 positions"):
        sc.replace(seq_len=130561)
    # an encoder-decoder's target_len and serve's max_model_len follow seq_len: the pass
    assert plain_probe(resolve({"model": "t5-small", "task": "generate"}), "seq_len")(64) is None
    assert plain_probe(resolve({"model": LLAMA, "task": "serve"}, H100), "seq_len")(64) is None


def test_only_the_rows_that_say_so_are_probed():
    assert {k.name for k in keys.KEYS if k.plain is not None} == {"batch_size", "seq_len"}
    sc = resolve({"model": LLAMA, "task": "generate"}, H100)
    assert plain_probe(sc, "new_tokens") is None


def test_the_searches_check_their_ends_without_the_pass(scenario_passes):
    calls = scenario_passes()
    sc = resolve({"model": LLAMA, "task": "generate"}, H100)
    var = Variants(sc, "batch_size", (1, 1 << 20), grow=True, lazy=True)
    assert var.get(1).batch_size == 1 and var.get(2).batch_size == 2
    assert var.within(1 << 20)
    ctx = Variants(sc, "seq_len", (1, 1 << 24), grow=True, lazy=True)
    assert isinstance(ctx.get(1 << 24), ScenarioError)      # past the positions
    assert ctx.get(1).seq_len == 1 and ctx.get(4096).seq_len == 4096 and ctx.within(2048)
    assert calls == [{"model": LLAMA, "task": "generate", "gpu": H100}]   # resolve's only
