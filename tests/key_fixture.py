"""One more row in the key table for a test (the recipe of docs/ARCHITECTURE.md, 'adding a
key': the table alone), shared by tests/test_add_a_key.py and tests/test_scenario_row_choices.py.

    @pytest.fixture
    def added(monkeypatch):
        return add_row(monkeypatch, ROW)
"""
from __future__ import annotations

from vramplan.scenario import keys
from vramplan.scenario.schema import Key


def add_row(monkeypatch, row: Key) -> Key:
    """The key table with `row` as one more contract row (after `gpu`), undone after the
    test by `monkeypatch`; returns the row."""
    contract = keys.CONTRACT + (row,)
    monkeypatch.setattr(keys, "CONTRACT", contract)
    monkeypatch.setattr(keys, "KEYS", contract + keys.NESTED + keys.EXTRA)
    monkeypatch.setattr(keys, "CONTRACT_KEYS", tuple(k.name for k in contract))
    monkeypatch.setattr(keys, "DERIVED", tuple(k for k in keys.KEYS if k.derive is not None))
    monkeypatch.setitem(keys.BY_NAME, row.name, row)
    return row
