"""The page's measurements as plain state (no widgets): a `Job` state machine (the `Worker`
that runs one measurement in a process of its own is the measure stage's,
`vramplan.measure.client`), and the figures the panels show (trace or measurement against the estimate, largest modules).

    job = Job("trace")              idle -> running -> done | cancelled | error -> running ...
    w = Worker(job, post)           post(fn): run fn on the page's loop (default: at once)
    w.start({"job": "trace", "scenario": sc.to_dict()})
    w.cancel()                      kills the process (its whole group) and marks cancelled
    job.state, job.fraction, job.phase_text(), job.result, job.error, job.samples

A process, not a thread: torch's import and a traced step cannot be interrupted from another
thread, a killed process can (and gives back what it held). Events after a cancel, or from a
process an earlier start left, are dropped.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from ...errors import VramplanError
from ...measure.client import Worker, package_root, poster  # noqa: F401 (the panels' names)
from .i18n import N_

IDLE, RUNNING, DONE, CANCELLED, ERROR = "idle", "running", "done", "cancelled", "error"
STATES = (IDLE, RUNNING, DONE, CANCELLED, ERROR)
PHASES = {"start": N_("Starting"), "torch": N_("Starting torch"),
          "build": N_("Building the module"), "step": N_("Step {k} of {n}"),
          "finish": N_("Counting the allocator's segments"),
          "run": N_("Running the plan on the GPU"), "trial": N_("Trying batch size {k}"),
          "sample": N_("Sampling the GPU's memory")}


class Job:
    """One kind of measurement and where it stands. `listen(fn)`: fn(job) after each change."""

    def __init__(self, kind: str, translate: Callable[[str], str] | None = None):
        self.kind = kind
        self.state = IDLE
        self.phase: str | None = None
        self.k = self.n = 0
        self.result: Any = None
        self.error: str | None = None
        self.samples: list[dict] = []
        self.started = self.ended = None
        self.request: dict | None = None
        self._ = translate or (lambda s: s)
        self._listeners: list[Callable[[Job], None]] = []

    def listen(self, fn: Callable[["Job"], None]) -> None:
        self._listeners.append(fn)

    def _emit(self) -> None:
        for fn in list(self._listeners):
            fn(self)

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    def start(self, request: dict | None = None) -> None:
        if self.running:
            raise VramplanError(f"a {self.kind} is already running")
        self.state, self.phase, self.k, self.n = RUNNING, "start", 0, 0
        self.result = self.error = None
        self.samples = []
        self.request = request
        self.started, self.ended = time.monotonic(), None
        self._emit()

    def progress(self, phase: str, k: int = 0, n: int = 0) -> None:
        if self.running:
            self.phase, self.k, self.n = phase, int(k), int(n)
            self._emit()

    def sample(self, row: dict) -> None:
        if self.running:
            self.samples.append(row)
            self.phase = "sample"
            self._emit()

    def _end(self, state: str) -> None:
        self.state, self.ended = state, time.monotonic()
        self._emit()

    def finish(self, result: Any) -> None:
        if self.running:
            self.result = result
            self._end(DONE)

    def fail(self, message: str) -> None:
        if self.running:
            self.error = str(message)
            self._end(ERROR)

    def cancel(self) -> bool:
        """Running -> cancelled (True); anything else is left as it is (False)."""
        if not self.running:
            return False
        self._end(CANCELLED)
        return True

    @property
    def fraction(self) -> float | None:
        """How far the run is, 0..1, or None where it cannot tell (a GPU run, a search)."""
        if self.state == DONE:
            return 1.0
        if not self.running:
            return 0.0
        if self.kind != "trace":
            return None
        n = max(self.n, 1)
        # torch, build, one unit per step, the allocator model: n + 3 units
        at = {"start": 0, "torch": 0, "build": 1, "step": 1 + self.k, "finish": n + 2}
        return min(1.0, at.get(self.phase, 0) / (n + 3))

    def phase_text(self) -> str:
        if self.state == RUNNING:
            text = self._(PHASES.get(self.phase or "start", self.phase or ""))
            return text.format(k=self.k, n=self.n)
        return ""

    @property
    def seconds(self) -> float:
        if self.started is None:
            return 0.0
        return (self.ended or time.monotonic()) - self.started


# ------------------------------------------------------------------ what the panels show
def trace_refusal(scenario) -> str | None:
    """Why trace cannot build this plan (the tracer's own check, no torch), or None."""
    if scenario is None:
        return N_("There is no plan to trace yet.")
    from ...measure import buildable
    try:
        buildable.check(scenario)
    except VramplanError as exc:
        return str(exc)
    return None


def _per_gpu(d: dict) -> dict:
    return (d or {}).get("per_gpu") or {}


FIGURES = (("peak_allocated_bytes", N_("Peak allocated")),
           ("peak_reserved_bytes", N_("Peak reserved")), ("device_used_bytes", N_("Device used")))


def compare(estimate: dict, measured: dict) -> list[dict]:
    """One row per figure both have: estimate bytes, measured (traced) bytes, the difference
    (measured - estimate) in bytes and in % of the estimate."""
    e, m = _per_gpu(estimate), _per_gpu(measured)
    rows = []
    for key, label in FIGURES:
        a, b = e.get(key), m.get(key)
        if not isinstance(a, int) or not isinstance(b, int):
            continue
        rows.append({"key": key, "label": label, "estimate_bytes": a, "measured_bytes": b,
                     "diff_bytes": b - a, "diff_pct": 100.0 * (b - a) / a if a else None})
    return rows


def peak_phase(report: dict) -> str | None:
    """The phase of a report's peak: a trace's, a measurement's counter, or an estimate's."""
    sec = (report or {}).get("trace") or (report or {}).get("measure") or {}
    return sec.get("peak_phase") or sec.get("counter_peak_phase") or (report or {}).get(
        "peak_phase")


def largest_modules(traced: dict, n: int = 6) -> list[dict]:
    """The module groups holding the most at the traced peak, numbered blocks folded into one
    row ('model.layers.0-31': 32 blocks, their sum, the largest one): name, bytes, count,
    each_bytes (the largest single group)."""
    by = ((traced or {}).get("trace") or {}).get("by_module") or {}
    folded: dict[str, dict] = {}
    for name, b in by.items():
        head, _, tail = name.rpartition(".")
        key = head if tail.isdigit() and head else name
        r = folded.setdefault(key, {"name": key, "bytes": 0, "count": 0, "each_bytes": 0,
                                    "numbers": []})
        r["bytes"] += int(b)
        r["count"] += 1
        r["each_bytes"] = max(r["each_bytes"], int(b))
        if tail.isdigit() and head:
            r["numbers"].append(int(tail))
    out = []
    for r in folded.values():
        nums = r.pop("numbers")
        if nums:
            r["name"] = f"{r['name']}.{min(nums)}-{max(nums)}" if len(nums) > 1 else \
                f"{r['name']}.{nums[0]}"
        out.append(r)
    out.sort(key=lambda r: (-r["bytes"], r["name"]))
    return out[:n]


def timeline(traced: dict) -> list:
    """The traced timeline's (event, phase, bytes) points, [] when the trace has none."""
    return list(((traced or {}).get("trace") or {}).get("timeline") or [])


# ------------------------------------------------------------------ the local GPU
NO_GPU = N_("No GPU to measure on here: {why}. The estimate and “Trace this plan” work without "
            "one.")


def probe_local(db, probe=None) -> dict:
    """What NVML sees: {"gpus": [probe rows, each with "hwdb_id" matched through
    `HardwareDB.match`], "message": None}, or {"gpus": [], "message": one sentence} when there
    is no NVML, no driver or no GPU. Never raises (a page must not break on it)."""
    if probe is None:
        from ...measure.live import probe
    try:
        gpus = list(probe())
    except VramplanError as exc:
        return {"gpus": [], "message": NO_GPU.format(why=_why(str(exc)))}
    except Exception as exc:  # a broken NVML binding: still one sentence
        return {"gpus": [], "message": NO_GPU.format(why=f"{type(exc).__name__}: {exc}")}
    if not gpus:
        return {"gpus": [], "message": NO_GPU.format(why="NVML sees no GPU")}
    for g in gpus:
        dev = db.match(g.get("name"), g.get("memory_total_bytes"))
        g["hwdb_id"] = dev.id if dev is not None else None
    return {"gpus": gpus, "message": None}


def _why(text: str) -> str:
    return text.rstrip(".")


def measured_max_batch(result: dict) -> int | None:
    v = (result or {}).get("max_batch_size")
    return v if isinstance(v, int) else None


def monitor_rows(samples: list[dict], index: int | None = None) -> list[dict]:
    """Monitor samples of GPU `index` (default: the first one sampled) with a reading."""
    if index is None and samples:
        index = samples[0].get("index")
    return [s for s in samples if s.get("index") == index and isinstance(s.get("used_bytes"), int)]
