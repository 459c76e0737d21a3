"""Published measured cases (tests/data/public_cases.jsonl) on |estimate - measured| / measured.

Transformers: median <= 6 %, p90 <= 15 %; vision + diffusion: median <= 5 %, p90 <= 20 %
(2026-12-01: 4.4 % / 12.6 % and 3.8 % / 14.3 %). Issue 11's target for all 64 cases, median
<= 5 % and p90 <= 15 %, is met for the median (4.5 %) and not for p90 (21.1 % over all cases,
14.3 % over the expressible ones; docs/accuracy.md says which cases and why), so the all-cases
test holds today's level and names the target."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fidelity  # noqa: E402


def test_transformer_fidelity():
    res = fidelity.run("transformer")
    assert not [g for g in res["gaps"] if g["expressible"]], res["gaps"]
    s = fidelity._stats([r["error"] for r in res["cases"] if r["expressible"]])
    assert s["n"] >= 30
    assert s["median"] <= 0.06, s
    assert s["p90"] <= 0.15, s


def test_vision_and_diffusion_fidelity():
    """The non-transformer families together: every expressible vision and diffusion case
    estimated; median <= 5 %, p90 <= 20 %."""
    cases, gaps = [], []
    for fam in ("vision", "diffusion"):
        res = fidelity.run(fam)
        cases += res["cases"]
        gaps += [g for g in res["gaps"] if g["expressible"]]
    assert not gaps, gaps
    s = fidelity._stats([r["error"] for r in cases if r["expressible"]])
    assert s["n"] >= 20
    assert s["median"] <= 0.05, s
    assert s["p90"] <= 0.20, s


def test_all_published_cases():
    """Every case, expressible or not (issue 11 target: median <= 5 %, p90 <= 15 %). The median
    meets it; p90 is held at today's level until the misses docs/accuracy.md names are closed:
    14.3 % over the expressible cases, 21.1 % over all (M01, not expressible: its decoder of a few
    tokens is scored at seq_len, and transformers' gelu_new, trace-checked on GPT-2, made its
    overestimate +17 % -> +32 %)."""
    res = fidelity.run("all")
    s = res["summary"]["all"]
    assert s["n"] == 64 and not res["gaps"], res["gaps"]
    assert s["median"] <= 0.05, s
    assert s["p90"] <= 0.215, s
    assert res["summary"]["expressible"]["p90"] <= 0.145, res["summary"]["expressible"]
