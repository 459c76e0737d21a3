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


def test_vision_and_diffusion_fidelity():
    """Issue target for the non-transformer families together: every expressible vision and
    diffusion case estimated; median <= 15 %, p90 <= 30 %."""
    cases, gaps = [], []
    for fam in ("vision", "diffusion"):
        res = fidelity.run(fam)
        cases += res["cases"]
        gaps += [g for g in res["gaps"] if g["expressible"]]
    assert not gaps, gaps
    s = fidelity._stats([r["error"] for r in cases if r["expressible"]])
    assert s["n"] >= 20
    assert s["median"] <= 0.15, s
    assert s["p90"] <= 0.30, s
