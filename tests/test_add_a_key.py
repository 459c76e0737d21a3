"""docs/ARCHITECTURE.md's recipe for adding a scenario key is true: a row added to the key
table (here by monkeypatch, a fixture) is read by validation, kept in the normalised scenario,
written to and read from the URL, offered as a CLI flag, shown by the form and listed on the
docs page, with no other edit (no list in build.py, no dataclass field)."""
from __future__ import annotations

import pytest

from key_fixture import add_row
from vramplan.errors import ScenarioError
from vramplan.scenario import Scenario, form, keys, resolve
from vramplan.scenario.schema import Key
from vramplan.vocab import TRAINING_TASKS

H100 = "nvidia-h100-sxm5-80gb"
ROW = Key("warmup_steps", "int", "Warm-up steps", "learning-rate warm-up steps (a test key)",
          unit="steps", lo=0, hi=1 << 20, tasks=TRAINING_TASKS, default=0,
          where="training tasks")


@pytest.fixture
def added(monkeypatch):
    """The key table with one more contract row (after `gpu`): tests/key_fixture.py."""
    return add_row(monkeypatch, ROW)


def test_the_key_is_validated_and_kept(added):
    sc = resolve({"model": "gpt2", "task": "train", "warmup_steps": 100}, H100)
    assert sc.warmup_steps == 100 and sc.to_dict()["warmup_steps"] == 100
    # its default where it applies; refused where it does not; its range from the row
    assert resolve({"model": "gpt2", "task": "train"}).to_dict()["warmup_steps"] == 0
    with pytest.raises(ScenarioError, match="warmup_steps"):
        Scenario.from_dict({"model": "gpt2", "task": "forward", "warmup_steps": 5})
    with pytest.raises(ScenarioError, match="scenario key 'warmup_steps'"):
        Scenario.from_dict({"model": "gpt2", "task": "train", "warmup_steps": -1})


def test_the_key_travels_in_the_link(added):
    sc = resolve({"model": "gpt2", "task": "train", "warmup_steps": 100}, H100)
    q = sc.to_query()
    assert "warmup_steps=100" in q
    back = Scenario.from_query(q)
    assert back == sc and back.warmup_steps == 100


def test_the_key_is_a_cli_flag(added):
    flags = {f.flag: f for f in keys.cli_flags()}
    assert "--warmup-steps" in flags and flags["--warmup-steps"].type is int
    assert keys.scenario_from_flags({"warmup_steps": 7}) == {"warmup_steps": 7}


def test_the_key_is_a_form_field(added):
    fields = {f.key: f for f in form.fields({"model": "gpt2", "task": "train"})}
    assert fields["warmup_steps"].default == 0 and fields["warmup_steps"].label == "Warm-up steps"
    assert "warmup_steps" not in {f.key for f in form.fields({"model": "gpt2",
                                                               "task": "forward"})}
    assert form.check({"model": "gpt2", "warmup_steps": -3}) == {
        "warmup_steps": "must be between 0 and 1,048,576, got -3"}


def test_the_key_is_on_the_docs_page(added):
    page = keys.markdown()
    assert "`warmup_steps`" in page and "learning-rate warm-up steps" in page
