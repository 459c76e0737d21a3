"""The scenario at other batch sizes / seq_lens (`scenario.variants`): where the pass was run
at two values and gave what changing the field alone gives, the values between are made by
changing the field alone, and they equal the pass's own (`Scenario.replace`) exactly, with
the same estimate. The estimate's probes (max batch, longest context) use it, so a page edit
runs the whole pass a fixed, small number of times (counted below)."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vramplan import estimate as E
from vramplan.errors import ScenarioError
from vramplan.hardware import get_gpu
from vramplan.scenario import Scenario, resolve
from vramplan.scenario.variants import Variants
from vramplan.sweep import grid
from vramplan.ui.state import state as S

GOLDEN = Path(__file__).parent / "golden" / "estimates.jsonl"
ROWS = [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]
LLAMA = "meta-llama/Llama-3.1-8B"
H100 = "nvidia-h100-sxm5-80gb"


def _plan(row):
    try:
        return Scenario.from_dict(row["input"]), get_gpu(row["gpu"])
    except ScenarioError:
        return None, None


def _same(key: str, row, v: int, hi: int) -> None:
    sc, dev = _plan(row)
    if sc is None or not isinstance(getattr(sc, key, None), int):
        return
    # the estimate's way (grow, lazy): the range verified by the values probed so far
    probing = Variants(sc, key, (1, hi), grow=True, lazy=True)
    probing.get(1), probing.get(2)
    if probing.within(v):
        assert probing.get(v) == sc.replace(**{key: v})
    var = Variants(sc, key, (1, hi))
    if not var.within(v):
        return      # the pass refuses an end or derives more from it: every value re-resolves
    fast = var.get(v)
    slow = sc.replace(**{key: v})
    assert fast == slow and getattr(fast, key) == v
    a = E.estimate(fast, dev, with_max_batch=False).to_dict()
    b = E.estimate(slow, dev, with_max_batch=False).to_dict()
    assert a == b


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=st.sampled_from(ROWS), b=st.integers(1, 512))
def test_a_batch_variant_is_the_pass_own(row, b):
    _same("batch_size", row, b, 512)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=st.sampled_from(ROWS), s=st.integers(1, 4096))
def test_a_seq_len_variant_is_the_pass_own(row, s):
    _same("seq_len", row, s, 4096)


def test_seq_len_variants_keep_the_positions_limit():
    # Llama-3.1-8B states 131072 positions (rope llama3: max_position_embeddings already
    # scaled); generating 512 new tokens, a prompt of 131072 - 512 = 130560 fits, one more
    # does not. The search's cap (2**24) is refused, so the verified range grows from the
    # values accepted (seq_len's row checks the positions as the pass does: no pass);
    # 130561 is refused with the pass's error, never made by the field alone
    sc = resolve({"model": LLAMA, "task": "generate", "new_tokens": 512}, H100)
    var = Variants(sc, "seq_len", (1, 1 << 24), grow=True, lazy=True)
    assert isinstance(var.get(1 << 24), ScenarioError) and not var.fast
    assert var.get(1).seq_len == 1 and var.get(130560).seq_len == 130560
    assert var.within(65536) and var.get(65536) == sc.replace(seq_len=65536)
    assert isinstance(var.get(130561), ScenarioError)


def test_serve_variants_re_resolve_the_couplings():
    # a served plan's max_num_seqs follows its batch (each defaults to the other): the field
    # alone is not the pass's answer, so nothing is made by it
    sc = resolve({"model": LLAMA, "task": "serve"}, H100)
    var = Variants(sc, "batch_size", (1, 64), grow=True)
    assert not var.fast and var.get(16).serving.max_num_seqs == 16


def test_the_sweep_uses_the_one_copy():
    from vramplan.scenario import variants
    assert grid.BatchVariants.__mro__[1] is variants.Variants
    assert grid.with_batch is variants.with_batch


def test_one_page_edit_runs_the_pass_once(monkeypatch, scenario_passes):
    # the default page: LoRA on Llama-3.1-8B on an H100; the edit: batch_size 2. The passes:
    # 1 the form's (the draft -> form fields, errors and the scenario estimated);
    # 0 the share link's (scenario/query.py to_query writes the given keys; before: 2, the
    #   defaults of model + task + gpu, then the link read back to check it gives the plan);
    # 0 the max-batch search's: batch_size's row is plain (no rule between keys reads it), so
    #   its ends, 1 and the cap 2**20, are checked by the row's range and the derivations
    #   (`variants.plain_probe`; before: the pass at both), and every probe between (batch 2,
    #   the secant guess, guess + 1) changes the field alone. Before any of it: 7 passes
    st = S.PlanState(gpu=H100)
    calls = scenario_passes()
    probes = []
    figures = E._figures
    monkeypatch.setattr(E, "_figures", lambda sc, dev, spec: probes.append(sc.batch_size)
                        or figures(sc, dev, spec))
    st.set("batch_size", 2)
    assert not st.errors and st.estimate.max_batch_size == 4
    assert [c.get("batch_size") for c in calls] == [2]
    assert len(probes) >= 4      # the plan itself, then 1, 2, ... all by the field


def test_a_generate_estimate_runs_no_pass(scenario_passes):
    # generate on Llama-3.1-8B, batch 8, on an H100: the max batch search checks its ends (1,
    # 2**20) by batch_size's row (no rule between keys reads it); the longest context search
    # its cap 2**24 (refused: beyond the 131072 positions, by the same check as the pass's,
    # `rules.positions_error`) and every probe below by seq_len's row (the positions with
    # new_tokens, the image tokens), so nothing runs the pass: its one run was `resolve`.
    # Before: 13 passes (one per probe), then 6 (the ends by the pass), then 4 (batch by the
    # row). A plan where the rows cannot tell (serve's couplings, an encoder-decoder's
    # target_len, a refusal naming images) still runs the pass at those probes
    sc = resolve({"model": LLAMA, "task": "generate", "batch_size": 8}, H100)
    calls = scenario_passes()
    est = E.estimate(sc, get_gpu(H100))
    assert calls == []
    assert est.max_context == 31077 and est.max_batch_size == 485
