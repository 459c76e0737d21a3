"""A census of the `vramplan app` server's own memory, for finding what a burst of visitors
leaves behind. Off unless the server starts with $VRAMPLAN_SERVER_MEMORY_DEBUG naming a
folder: then each SIGUSR1 writes `census-<n>.json` there: resident bytes, live objects by
type and, from the second census on, the types that grew and the allocation sites whose live
bytes grew most since the first. The first census starts `tracemalloc` (so only what is
allocated after it is traced, and the server's start-up is not slowed); tracing costs time
and memory of its own, so a run with it gives no memory figures.
`benchmarks/load.py --memory-census` takes one at idle and one after each round."""
from __future__ import annotations

import collections
import gc
import json
import os
from pathlib import Path

ENV = "VRAMPLAN_SERVER_MEMORY_DEBUG"
FRAMES = 10       # frames kept per allocation (the sites are grouped by their whole traceback)
TOP = 25          # sites and types written per census


def _rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # not Linux
        return 0


def _types() -> collections.Counter:
    return collections.Counter(type(o).__qualname__ for o in gc.get_objects())


class Census:
    def __init__(self, folder: Path):
        self.folder = folder
        self.n = 0
        self.first = None
        self.first_types: collections.Counter | None = None

    def take(self, *_signal) -> Path:
        import tracemalloc

        from .serving_kernels import _libc_trim
        _libc_trim()                            # what the server gives back after shutdowns
        if not tracemalloc.is_tracing():
            tracemalloc.start(FRAMES)
        snap = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)])
        types = _types()
        current, peak = tracemalloc.get_traced_memory()
        out = {"n": self.n, "rss": _rss(), "traced": current, "traced_peak": peak,
               "objects": sum(types.values()),
               "types": dict(types.most_common(TOP))}
        if self.first is None:
            self.first, self.first_types = snap, types
        else:
            out["types_grown"] = dict((types - self.first_types).most_common(TOP))
            out["sites_grown"] = [
                {"size_diff": s.size_diff, "count_diff": s.count_diff,
                 "traceback": [f"{fr.filename}:{fr.lineno}" for fr in s.traceback][-6:]}
                for s in snap.compare_to(self.first, "traceback")[:TOP]]
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"census-{self.n}.json"
        part = path.with_suffix(".part")
        part.write_text(json.dumps(out, indent=1) + "\n")
        os.replace(part, path)                  # a reader never sees half a census
        self.n += 1
        return path


def install(environ=None) -> Census | None:
    """Answer SIGUSR1 with a census when $VRAMPLAN_SERVER_MEMORY_DEBUG is set (the
    server's `main`); otherwise nothing."""
    folder = (os.environ if environ is None else environ).get(ENV)
    if not folder:
        return None
    import signal
    census = Census(Path(folder))
    signal.signal(signal.SIGUSR1, census.take)
    return census
