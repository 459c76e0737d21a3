"""Golden estimates: every row of `tests/golden/estimates.jsonl` is re-estimated and must give
the stored JSON byte for byte.

The table (every fidelity case and a few hundred scenarios generated from a fixed seed across
every model family, task and the model-less workloads; see `tests/golden/make_golden.py`)
freezes all the numbers, phases and notes that `estimate()` answers, so a refactoring that
only moves code proves here that it changed nothing.

A change that alters numbers on purpose regenerates the table in the same commit
(`.venv/bin/python tests/golden/make_golden.py`) and says in the commit message why the
numbers changed (which scenarios, which figures, and the reason). Never regenerate just to make
this test pass.
"""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
import make_golden  # noqa: E402  (tests/golden/make_golden.py: the table's own row builder)

SHOW_ROWS = 5
SHOW_KEYS = 8


@pytest.fixture(autouse=True)
def builtin_hwdb(monkeypatch):
    """The table was made with the built-in hardware database only."""
    monkeypatch.delenv("VRAMPLAN_HWDB", raising=False)


def _rows():
    text = make_golden.GOLDEN.read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()]


def _flat(v, prefix=""):
    """{dotted path: leaf} of a JSON value (lists indexed as [i])."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            out.update(_flat(x, f"{prefix}.{k}" if prefix else str(k)))
        return out or {prefix: {}}
    if isinstance(v, list):
        out = {}
        for i, x in enumerate(v):
            out.update(_flat(x, f"{prefix}[{i}]"))
        return out or {prefix: []}
    return {prefix: v}


def _short(v, n=90):
    s = json.dumps(v)
    return s if len(s) <= n else s[:n - 3] + "..."


def _diff(old: dict, new: dict) -> list[str]:
    a, b = _flat(old), _flat(new)
    keys = sorted(set(a) | set(b))
    out = []
    for k in keys:
        if k not in b:
            out.append(f"    {k}: {_short(a[k])} -> (gone)")
        elif k not in a:
            out.append(f"    {k}: (new) -> {_short(b[k])}")
        elif a[k] != b[k] or type(a[k]) is not type(b[k]):
            out.append(f"    {k}: {_short(a[k])} -> {_short(b[k])}")
    return out


def test_table_covers_fidelity_and_generated():
    ids = [json.loads(line)["id"] for line in _rows()]
    assert len(ids) == len(set(ids))
    assert sum(i.startswith("fidelity") for i in ids) >= 60
    assert sum(i.startswith("gen:") for i in ids) >= make_golden.MIN_ACCEPTED


def test_every_estimate_matches_the_golden_table():
    bad, n = [], 0
    for line in _rows():
        n += 1
        old = json.loads(line)
        try:
            new = make_golden.estimate_line(old["id"], old["input"], old["gpu"])
        except Exception as exc:  # noqa: BLE001 - a row that now raises is a difference too
            bad.append((old, None, f"{type(exc).__name__}: {exc}"))
            continue
        if make_golden.dumps(new) != line:
            bad.append((old, new, None))
    if not bad:
        return
    msg = [f"{len(bad)} of {n} golden estimates changed (first {min(SHOW_ROWS, len(bad))}):"]
    for old, new, err in bad[:SHOW_ROWS]:
        msg.append(f"  {old['id']} on {old['gpu']}: {_short(old['input'], 160)}")
        if err is not None:
            msg.append(f"    now raises {err}")
            continue
        lines = _diff(old, new) or ["    (same values; the JSON text differs: key order or "
                                    "number formatting, e.g. 1 vs 1.0)"]
        more = len(lines) - SHOW_KEYS
        msg += lines[:SHOW_KEYS] + ([f"    ... and {more} more keys"] if more > 0 else [])
    msg.append("Numbers changed on purpose? Regenerate with `python tests/golden/make_golden.py` "
               "in the same commit and say why in its message (see this file's docstring).")
    pytest.fail("\n".join(msg), pytrace=False)
