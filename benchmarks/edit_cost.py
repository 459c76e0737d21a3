"""What one page edit costs: runs of the whole scenario pass and wall time, old vs new.

    python benchmarks/edit_cost.py [--repeat 7]

Drives the page's state (`ui.state.state.PlanState`, no widgets) through the same edits on a
few plans (LoRA, full training, generate, serve on Llama-3.1-8B, H100) and counts the passes
(`Scenario.from_dict`: what `resolve`, `replace` and `from_query` run) and the time per edit,
median over `--repeat` rounds, in one run for two ways of making the estimate's probes:

- old: every probe of the max batch / longest context search runs the pass
  (`sc.replace(batch_size=b)` / `sc.replace(seq_len=s)`), as estimate.py did before
  `scenario.variants`;
- new: `scenario.variants.Variants`: the field alone between two verified values; a key
  whose row says how the rules between keys read it (`Key.plain`: batch_size, seq_len on a
  decoder) verified by its row and the derivations (`plain_probe`, no pass), another by the
  pass at the ends.

The old way is rebuilt here as a Variants that passes at every probe, so both run the same
search and give the same estimate (checked on every edit). Both columns count the form's pass
(1 per edit; the share link runs none since to_query writes the given keys).

At 2026-12-02 (this machine, --repeat 7): passes per edit 5.38 -> 1.00 for the new way: the
form's pass only (the share link's 2 -> 0; the max-batch ends 2 -> 0; generate's
longest-context search 4-5 -> 0). Where the rows cannot tell, the probes still run the pass:
serve's couplings (max_num_seqs / max_model_len follow the batch / seq_len: serve's answers
come from the engine's figures, no search), an encoder-decoder's target_len (follows
seq_len), an image refusal that names `images` (the pass would drop them).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "app"))

from vramplan import estimate as E  # noqa: E402
from vramplan.scenario import Scenario  # noqa: E402
from vramplan.scenario.variants import Variants  # noqa: E402
from vramplan.ui.state.state import PlanState  # noqa: E402

H100 = "nvidia-h100-sxm5-80gb"
PLANS = ("lora", "train", "generate", "serve")
EDITS = (("batch_size", 2), ("seq_len", 4096), ("batch_size", 8), ("seq_len", 1024))


class EveryProbe(Variants):
    """The old way: the pass at every value asked for, nothing by the field alone."""

    def __init__(self, sc, key="batch_size", values=(), make=None, **_):
        super().__init__(sc, key, (), make)

    def get(self, v):
        self._slow(v)
        return self.cache[v]


def run(variants_cls, repeat: int) -> dict:
    """{(plan, key, value): (passes, median seconds, the estimate's JSON)}."""
    passes = [0]
    orig = Scenario.from_dict.__func__

    def counting(cls, d, **kw):
        passes[0] += 1
        return orig(cls, d, **kw)
    saved_cls, saved_fd = E.Variants, Scenario.__dict__["from_dict"]
    E.Variants, Scenario.from_dict = variants_cls, classmethod(counting)
    out: dict = {}
    try:
        for _ in range(repeat):
            st = PlanState(gpu=H100)
            for task in PLANS:
                st.set("task", task)
                for key, value in EDITS:
                    passes[0] = 0
                    t0 = time.perf_counter()
                    st.set(key, value)
                    dt = time.perf_counter() - t0
                    n, times, res = out.get((task, key, value), (0, [], None))
                    out[(task, key, value)] = (passes[0], times + [dt], st.result)
    finally:
        E.Variants, Scenario.from_dict = saved_cls, saved_fd
    return {k: (n, statistics.median(t), r) for k, (n, t, r) in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    run(Variants, 1)                        # warm the caches (catalog, hardware, imports)
    old, new = run(EveryProbe, args.repeat), run(Variants, args.repeat)
    print(f"{'plan':9} {'edit':16} {'passes old':>10} {'new':>4} {'ms old':>7} {'ms new':>7}")
    tot = [0, 0, 0.0, 0.0]
    for k in old:
        (n0, t0, r0), (n1, t1, r1) = old[k], new[k]
        if r0 != r1:
            raise SystemExit(f"{k}: the two ways gave different estimates")
        print(f"{k[0]:9} {k[1] + '=' + str(k[2]):16} {n0:>10} {n1:>4} {t0 * 1e3:7.2f} "
              f"{t1 * 1e3:7.2f}")
        tot = [tot[0] + n0, tot[1] + n1, tot[2] + t0, tot[3] + t1]
    m = len(old)
    print(f"per edit (mean of {m}): passes {tot[0] / m:.2f} -> {tot[1] / m:.2f}; "
          f"time {tot[2] / m * 1e3:.2f} ms -> {tot[3] / m * 1e3:.2f} ms "
          f"(new / old {tot[3] / tot[2]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
