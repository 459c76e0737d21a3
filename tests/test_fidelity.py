"""Published measured cases (tests/data/public_cases.jsonl) on |estimate - measured| / measured.

Transformers: median <= 6 %, p90 <= 15 %; vision + diffusion: median <= 5 %, p90 <= 20 %
(2026-12-01: 4.4 % / 12.6 % and 3.8 % / 14.3 %). Issue 11's target for all 64 cases, median
<= 5 % and p90 <= 15 %, is met: 4.5 % and 14.3 % (14.3 % over the expressible ones too;
docs/accuracy.md says which cases lie above and why)."""
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
    """Every case, expressible or not (issue 11 target: median <= 5 %, p90 <= 15 %): 4.5 % and
    14.3 % (K02, mmcv fp16 under DDP, -14.3 %, is the 90th percentile; the six cases above it,
    K12 / E04 / M01 / J15 / L04 / L02, are explained in docs/accuracy.md). J05 (FLUX fp8 by
    layerwise casting) went -21 % -> -6 % when the option stopped putting T5 in fp8 too
    (enable_layerwise_casting is called on the transformer only)."""
    res = fidelity.run("all")
    s = res["summary"]["all"]
    assert s["n"] == 64 and not res["gaps"], res["gaps"]
    assert s["median"] <= 0.05, s
    assert s["p90"] <= 0.15, s
    assert res["summary"]["expressible"]["p90"] <= 0.145, res["summary"]["expressible"]


def test_issue_22_median_and_p90_not_worse():
    """Issue 22's Done-when: the published cases' median and p90 do not get worse than when the
    issue was filed (median 4.5 %, p90 14.3 %; 4.55 % before F07's real fix took it to 4.7 %).
    2026-12-02: 4.19 % / 14.25 %, after the CogVideoX decode walked as diffusers 0.30.x runs it
    (J17 -5.0 % -> -2.4 %; docs/accuracy.md, 'The under-estimates near the median')."""
    s = fidelity.run("all")["summary"]["all"]
    assert s["median"] <= 0.0455, s
    assert s["p90"] <= 0.143, s
