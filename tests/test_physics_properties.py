"""Properties every estimate keeps, over every family and task: the scenarios of the golden
table (`tests/golden/estimates.jsonl`: every fidelity case and generated scenarios across
every model family, task and the model-less workloads), re-estimated here.

- bytes moved per step never exceed what the step can touch: the bytes that exist on the GPU
  during the step (each component at its largest over the phases, plus the all-gathered
  weights under ZeRO-3) times the passes (training: forward, backward and recomputation reads
  per micro-batch and the optimizer step's read and write, 3 x accumulation + 2; inference:
  a read and a write, 2);
- per-token (per-image) figures times the tokens (images) equal the per-step figures, and the
  rates are the tokens over the step time;
- the step time is the larger of the memory and compute floors;
- no reported max batch is a search cap.
"""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
import make_golden  # noqa: E402

from vramplan.catalog import get_model, spec_from_architecture  # noqa: E402
from vramplan.estimate import MAX_BATCH_CAP, estimate  # noqa: E402
from vramplan.scenario import Scenario  # noqa: E402
from vramplan.vocab import TRAINING_TASKS  # noqa: E402

REL = 1e-9


def _rows():
    rows = [json.loads(x) for x in make_golden.GOLDEN.read_text().splitlines() if x.strip()]
    return [(r["id"], r["input"], r["gpu"]) for r in rows]


ROWS = _rows()


@pytest.fixture(autouse=True)
def builtin_hwdb(monkeypatch):
    monkeypatch.delenv("VRAMPLAN_HWDB", raising=False)


def _gathered_weights(sc: dict) -> int:
    """16-bit weights of the GPU's stage that pass through the working set under ZeRO-3."""
    par = sc.get("parallel") or {}
    if par.get("zero", 0) < 3 or not (sc.get("model") or sc.get("architecture")):
        return 0
    spec = get_model(sc["model"]) if sc.get("model") else spec_from_architecture(
        sc["architecture"])
    if spec.family not in ("decoder", "encoder", "encoder-decoder"):
        return 0
    return 4 * spec.arch.param_count() // max(1, par.get("tensor", 1) * par.get("pipeline", 1))


def _touchable(e: dict) -> int:
    comps = dict(e["per_gpu"]["components"])
    for ph in (e.get("phases") or {}).values():
        for k, v in ph.items():
            comps[k] = max(comps.get(k, 0), v)
    own = {k: v for k, v in comps.items() if k not in ("cuda_context", "allocator_slack")}
    return sum(own.values()) + _gathered_weights(e["scenario"])


def _check(label: str, e: dict) -> list[str]:
    bad = []
    sc, bw = e["scenario"], e["bandwidth"]
    passes = (3 * sc.get("gradient_accumulation", 1) + 2) if sc["task"] in TRAINING_TASKS \
        else 2
    limit = passes * _touchable(e)
    for key in ("bytes_per_step", "bytes_per_pass"):
        if bw.get(key) and bw[key] > limit:
            bad.append(f"{label}: {key} {bw[key]:,} > {passes} passes x touchable "
                       f"{limit // passes:,}")
    tokens = bw.get("tokens_per_step")
    if bw.get("bytes_per_token") is not None:
        if not tokens or abs(bw["bytes_per_token"] * tokens - bw["bytes_per_step"]) > \
                REL * bw["bytes_per_step"]:
            bad.append(f"{label}: bytes_per_token x tokens_per_step != bytes_per_step")
    if bw.get("bytes_per_image") is not None:
        lhs, rhs = bw["bytes_per_image"] * sc["batch_size"], bw["bytes_per_step"] * bw["steps"]
        if abs(lhs - rhs) > REL * rhs:
            bad.append(f"{label}: bytes_per_image x batch != bytes_per_step x steps")
    if bw.get("min_step_time_s"):
        floor = max(bw.get("memory_floor_s", 0), bw.get("compute_floor_s", 0))
        if abs(bw["min_step_time_s"] - floor) > REL * floor:
            bad.append(f"{label}: min_step_time_s is not the larger floor")
        if tokens and abs(bw["max_tokens_per_s"] * bw["min_step_time_s"] - tokens) > REL * tokens:
            bad.append(f"{label}: max_tokens_per_s x min_step_time_s != tokens_per_step")
    if e["max_batch_size"] == MAX_BATCH_CAP:
        bad.append(f"{label}: max_batch_size is the search cap {MAX_BATCH_CAP}")
    return bad


def test_properties_hold_for_every_golden_estimate():
    """The stored table (test_golden_estimates proves it is what estimate() answers now)."""
    bad = []
    for line in make_golden.GOLDEN.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            bad += _check(r["id"], r["estimate"])
    assert not bad, "\n".join(bad[:20])


def _one_per_kind():
    """One scenario of each (model family, task), model-less tasks included."""
    seen, out = set(), []
    for label, raw, gpu in ROWS:
        spec = Scenario.from_dict(raw).spec
        kind = (getattr(spec, "family", None), raw.get("task"))
        if kind not in seen:
            seen.add(kind)
            out.append((label, raw, gpu))
    return out


KINDS = _one_per_kind()


@pytest.mark.parametrize("label,raw,gpu", KINDS, ids=[x[0] for x in KINDS])
def test_properties_hold_when_estimated_afresh(label, raw, gpu):
    e = estimate(Scenario.from_dict(raw), gpu).to_dict()
    assert not _check(label, e)
