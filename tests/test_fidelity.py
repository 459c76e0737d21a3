"""Transformer-family published cases: every expressible case estimated; median <= 10 %,
p90 <= 25 % of |estimate - measured| / measured."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fidelity  # noqa: E402


def test_transformer_fidelity():
    res = fidelity.run("transformer")
    assert not [g for g in res["gaps"] if g["expressible"]], res["gaps"]
    s = fidelity._stats([r["error"] for r in res["cases"] if r["expressible"]])
    assert s["n"] >= 30
    assert s["median"] <= 0.10, s
    assert s["p90"] <= 0.25, s
