"""Nothing lost: every plan round-trips exactly through JSON, the URL and saved plan files;
saved plans carry a schema version and the older, unversioned form still opens."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from vramplan.errors import ScenarioError
from vramplan.scenario import PLAN_VERSION, Scenario, load_scenarios, plan_document, save_plan

GOLDEN = Path(__file__).resolve().parent / "golden" / "estimates.jsonl"


def _golden_scenarios():
    out = []
    for line in GOLDEN.read_text().splitlines():
        row = json.loads(line)
        out.append(Scenario.from_dict(row["scenario"]))
    return out


SCENARIOS = _golden_scenarios()


def test_the_table_spans_every_task():
    assert {s.task for s in SCENARIOS} == {"train", "lora", "qlora", "forward", "generate",
                                           "serve", "denoise", "load", "render", "volume",
                                           "array"}


def test_every_plan_round_trips_through_json_url_and_files(tmp_path):
    f = tmp_path / "plan.json"
    for sc in SCENARIOS:
        assert Scenario.from_dict(json.loads(json.dumps(sc.to_dict()))) == sc
        assert Scenario.from_query(sc.to_query()) == sc, sc.to_query()
        save_plan(sc, f)
        [back] = load_scenarios(f)
        assert back == sc and back.to_dict() == sc.to_dict()


def test_saved_plan_names_its_format_and_version(tmp_path):
    sc = SCENARIOS[0]
    doc = json.loads(save_plan(sc, tmp_path / "p.json").read_text())
    assert doc == {"format": "vramplan-plan", "version": PLAN_VERSION, "scenario": sc.to_dict()}
    assert plan_document(sc) == doc


def test_an_unversioned_plan_still_opens(tmp_path):
    # what vramplan wrote before plans had a version: the bare scenario object
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"model": "gpt2", "task": "train", "batch_size": 4,
                               "gpu": "nvidia-a10g"}))
    [sc] = load_scenarios(old)
    assert (sc.model, sc.batch_size, sc.gpu) == ("gpt2", 4, "nvidia-a10g")
    save_plan(sc, old)
    assert json.loads(old.read_text())["version"] == PLAN_VERSION
    assert load_scenarios(old) == [sc]


@pytest.mark.parametrize("doc, key, fragment", [
    ({"format": "vramplan-plan", "version": 99, "scenario": {"model": "gpt2"}}, "version",
     "newer vramplan"),
    ({"format": "vramplan-plan", "version": "1", "scenario": {"model": "gpt2"}}, "version",
     "integer version"),
    ({"format": "vramplan-plan", "version": 1, "scenario": "gpt2"}, "scenario", "object"),
    ({"format": "vramplan-plan", "version": 1, "scenario": {}, "extra": 1}, "extra", "unknown"),
])
def test_bad_plan_documents_are_named(tmp_path, doc, key, fragment):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    [err] = load_scenarios(f)
    assert isinstance(err, ScenarioError) and err.key == key and fragment in str(err)


def test_save_is_atomic_and_replaces_a_planted_symlink(tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("keep me")
    link = tmp_path / "plan.json"
    link.symlink_to(target)
    save_plan(SCENARIOS[0], link)
    assert target.read_text() == "keep me"          # not written through the link
    assert not link.is_symlink() and load_scenarios(link) == [SCENARIOS[0]]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
