"""A `plain` key row (batch_size: no rule between keys reads it, only its row's range and the
rows' derivations) is checked without the pass (`scenario.variants.plain_probe`), so the
max-batch search's end checks run no pass (issue 19.1: one page edit, one pass). The probe's
yes is the pass's own answer: wherever it says the field alone is the plan at `b`,
`Scenario.replace(batch_size=b)` gives that very scenario (every golden plan, any batch);
where a derivation follows the key (serve's max_num_seqs) it says no and the pass decides."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vramplan.errors import ScenarioError
from vramplan.scenario import Scenario, keys, resolve
from vramplan.scenario.variants import Variants, plain_probe, with_field

GOLDEN = Path(__file__).parent / "golden" / "estimates.jsonl"
ROWS = [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]
H100 = "nvidia-h100-sxm5-80gb"
LLAMA = "meta-llama/Llama-3.1-8B"


def _plan(row):
    try:
        return Scenario.from_dict(row["input"])
    except ScenarioError:
        return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=st.sampled_from(ROWS),
       b=st.one_of(st.integers(1, 1 << 20), st.sampled_from([0, -1, 1 << 30, (1 << 30) + 1])))
def test_the_probe_s_yes_is_the_pass_s_answer(row, b):
    sc = _plan(row)
    if sc is None:
        return
    probe = plain_probe(sc, "batch_size")
    assert probe is not None                   # batch_size is an int in every plan
    if not probe(b):
        return
    assert sc.replace(batch_size=b) == with_field(sc, "batch_size", b)


def test_every_golden_plan_at_the_search_s_ends():
    # the values the max-batch search checks (1 and its cap 2**20) and one between, on every
    # plan of the golden table: where the probe says yes, the pass gives the same scenario
    said_yes = 0
    for row in ROWS:
        sc = _plan(row)
        probe = plain_probe(sc, "batch_size") if sc is not None else None
        for b in (1, 4097, 1 << 20):
            if probe is not None and probe(b):
                said_yes += 1
                assert sc.replace(batch_size=b) == with_field(sc, "batch_size", b), row["id"]
    assert said_yes > len(ROWS)                  # most plans: no derivation follows the batch


def test_only_plain_rows_are_probed():
    assert {k.name for k in keys.KEYS if k.plain} == {"batch_size"}
    sc = resolve({"model": LLAMA, "task": "generate"}, H100)
    assert plain_probe(sc, "seq_len") is None   # the pass refuses it past the positions


def test_the_probe_refuses_what_the_row_refuses_and_what_moves_a_derivation():
    sc = resolve({"model": LLAMA, "task": "lora"}, H100)
    probe = plain_probe(sc, "batch_size")
    # batch_size's row: an int from 1 to 2**30 (contract_keys.LIMIT)
    assert probe(1) and probe(1 << 30) and not probe(0) and not probe((1 << 30) + 1)
    assert not probe(2.0) and not probe(True)
    # serve: max_num_seqs follows the batch (keys.derive): at 16 it would be 16, not the
    # plan's 256, so the field alone is not the plan; the pass decides
    serve = resolve({"model": LLAMA, "task": "serve"}, H100)
    probe = plain_probe(serve, "batch_size")
    assert probe(256) and not probe(16)
    assert serve.replace(batch_size=16).serving.max_num_seqs == 16
    # with max_num_seqs given, nothing follows the batch: the field alone again
    fixed = resolve({"model": LLAMA, "task": "serve", "serving": {"max_num_seqs": 64}}, H100)
    assert plain_probe(fixed, "batch_size")(16)
    assert fixed.replace(batch_size=16) == with_field(fixed, "batch_size", 16)


def test_the_max_batch_search_checks_its_ends_without_the_pass(monkeypatch):
    calls = []
    orig = Scenario.from_dict.__func__
    monkeypatch.setattr(Scenario, "from_dict", classmethod(
        lambda cls, d, **kw: calls.append(d) or orig(cls, d, **kw)))
    sc = resolve({"model": LLAMA, "task": "lora"}, H100)
    var = Variants(sc, "batch_size", (1, 1 << 20), grow=True, lazy=True)
    assert var.get(1).batch_size == 1 and var.get(2).batch_size == 2
    assert var.within(1 << 20) and calls == [{"model": LLAMA, "task": "lora", "gpu": H100}]
