"""Parsing every file of the built-in hardware database: without the parse cache, with it cold
(an empty cache folder: parse and write), and warm (every file read back from its JSON entry),
side by side in one run (issue 19.6: tomllib was ~0.43 s of the planner kernel's start).

    python benchmarks/hwdb_load.py [--repeat N]

Each round times the three in turn (off, cold in a new empty folder, warm in that folder),
so machine load falls on all three alike; prints the median of each and the ratios. Also
times a whole `load_hwdb()` (parse + validation) without and with a warm cache. The cache
folders are temporary; the user's ~/.cache is not touched.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

from vramplan.hardware import builtin_path, load_hwdb, toml_cache  # noqa: E402
from vramplan.hardware.load import read_tree  # noqa: E402


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def parse_all() -> int:
    return len(read_tree(builtin_path(), "hwdb"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    times: dict[str, list[float]] = {k: [] for k in
                                     ("off", "cold", "warm", "load off", "load warm")}
    with tempfile.TemporaryDirectory(prefix="vramplan-hwdb-bench-") as tmp:
        os.environ[toml_cache.ENV] = "off"
        n_files = parse_all()
        for i in range(args.repeat):
            folder = os.path.join(tmp, f"r{i}")
            os.environ[toml_cache.ENV] = "off"
            times["off"].append(timed(parse_all))
            times["load off"].append(timed(lambda: load_hwdb(extra_paths=[])))
            os.environ[toml_cache.ENV] = folder
            times["cold"].append(timed(parse_all))
            times["warm"].append(timed(parse_all))
            times["load warm"].append(timed(lambda: load_hwdb(extra_paths=[])))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{n_files} files, median of {args.repeat} rounds (ms):")
    for k, v in med.items():
        print(f"  {k:<10} {v * 1e3:8.2f}")
    print(f"parse, cold / off   {med['cold'] / med['off']:.2f} x (the first load writes the cache)")
    print(f"parse, warm / off   {med['warm'] / med['off']:.3f} x  "
          f"(off / warm = {med['off'] / med['warm']:.1f} x faster)")
    print(f"parse, warm / cold  {med['warm'] / med['cold']:.3f} x")
    print(f"load_hwdb, warm / off {med['load warm'] / med['load off']:.2f} x")


if __name__ == "__main__":
    main()
