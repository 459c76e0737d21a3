"""torch.compile's real cost and the page's capped change list (issue 20.4 / 20.10).

torch.compile was listed first among single changes as 'no extra compute or traffic': its cost
is a compile time once per job (and again per new input shape; PyTorch docs 'Reducing Compile
Time': seconds to minutes, tens of minutes or more for very large models) and the memory it
saves depends on the stack (which chains Inductor fuses, kernels the stack already fuses,
graph breaks). Now its cost says both, its score carries the ranking's uncertain weight (0.05,
costs.toml [ranking]) and it never ranks ahead of a certain change that costs no more. The
page lists the first 8 single changes and 4 changes to the job with a "Show all" button; the
JSON and the CLI keep every one."""
from types import SimpleNamespace

import pytest

from vramplan.advisor import advise
from vramplan.advisor import costs as C
from vramplan.advisor.recommend import after_certain
from vramplan.charts.waterfall import NO_COST, cost_text
from vramplan.report.words import cost_words

LORA_4090 = {"model": "meta-llama/Llama-3.1-8B", "task": "train", "batch_size": 4,
             "seq_len": 4096, "gpu": "nvidia-rtx-4090"}


@pytest.fixture(scope="module")
def adv():
    return advise(LORA_4090, gpu_table_too=False)


def test_compile_states_its_cost():
    c = C.of("compile")
    assert c.uncertain and "once per job" in c.one_off and "new input shape" in c.one_off
    assert c.score == pytest.approx(0.05)              # 0 compute + the uncertain weight
    words = cost_text(c)
    assert words != NO_COST and "compile time once per job" in words
    assert "the saving depends on the stack" in words
    assert "the saving depends on the stack" in cost_words(c)      # page, CLI and report
    assert C.of("chunked-loss").score == 0 and cost_text(C.of("chunked-loss")) == NO_COST
    assert (C.of("compile") + C.of("chunked-loss")).uncertain       # a plan with it


def _rec(rid, score, uncertain=False):
    return SimpleNamespace(id=rid, cost=SimpleNamespace(score=score, uncertain=uncertain))


def test_after_certain_by_hand():
    # by ratio: compile (uncertain, 0.05), a (0.0), b (0.10), c (0.04), d (0.30)
    recs = [_rec("compile", 0.05, True), _rec("a", 0.0), _rec("b", 0.10), _rec("c", 0.04),
            _rec("d", 0.30)]
    # a and c cost no more than compile: compile moves after c, ahead of nothing else
    assert [r.id for r in after_certain(recs)] == ["a", "b", "c", "compile", "d"]
    assert [r.id for r in after_certain(recs[1:])] == ["a", "b", "c", "d"]


def test_compile_ranks_after_the_cheaper_certain_changes(adv):
    ids = [r.id for r in adv.recommendations]
    comp = next(r for r in adv.recommendations if r.id == "compile")
    cheaper = [r.id for r in adv.recommendations if not r.cost.uncertain and
               r.cost.score <= comp.cost.score]
    assert {"micro-batch", "chunked-loss", "expandable-segments"} <= set(cheaper)
    assert all(ids.index(x) < ids.index("compile") for x in cheaper), ids
    assert ids[0] != "compile"


def test_the_page_caps_the_change_list(new_app, adv):
    pytest.importorskip("ipywidgets")
    from vramplan.ui.widgets.advisor import JOBS_SHOWN, SHOWN
    app = new_app(lazy_chart=False)
    app.state.apply(LORA_4090)
    a = app.state.advice
    every = len(a.recommendations) + len(a.job_changes)
    assert len(a.recommendations) > SHOWN and len(a.job_changes) > JOBS_SHOWN
    assert len(a.to_dict(full=False)["recommendations"]) == len(a.recommendations)  # JSON: all
    panel = app.advisor

    def rows():
        return [b.vp_change.id for b in panel.buttons if hasattr(b.vp_change, "saves_bytes")]

    assert len(rows()) == SHOWN + JOBS_SHOWN
    assert rows()[:SHOWN] == [r.id for r in a.recommendations[:SHOWN]]   # the best first
    hidden = every - SHOWN - JOBS_SHOWN
    assert panel.more in panel.changes.children
    assert panel.more.description == f"Show all {every} changes ({hidden} more)"
    panel.more.click()
    assert len(rows()) == every and panel.more.description == "Show fewer changes"
    panel.more.click()
    assert len(rows()) == SHOWN + JOBS_SHOWN
