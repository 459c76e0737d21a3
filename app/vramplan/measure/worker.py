"""One measurement in a process of its own, so a page can show its progress and stop it:

    echo '{"job": "trace", "scenario": {...}}' | python -m vramplan.measure.worker

reads one request (a JSON object) on stdin and writes JSON lines on stdout, each an event:

    {"event": "progress", "phase": "torch", "k": 0, "n": 2}   torch is being imported
    {"event": "progress", "phase": "build" | "step" | "finish", "k": .., "n": steps}  (trace)
    {"event": "progress", "phase": "run", ...}  /  {"phase": "trial", "k": batch}  (live)
    {"event": "sample", "sample": {...}}       one `live.monitor` reading
    {"event": "result", "result": {...}}       the report (`to_dict()`), then the process ends
    {"event": "error", "message": "..."}       a VramplanError's one line (exit 2) or a crash (1)

Jobs: "trace" (options: steps, mode, kernels; the result carries the trace timeline),
"measure" (steps, device), "max_batch" (max_share, limit, device) and "monitor" (interval,
count, device). Killing the process is how a run is cancelled: nothing here needs cleaning up
that the operating system does not (the CUDA driver frees a killed process's memory).
"""
from __future__ import annotations

import json
import sys
import time

from .. import safejson
from ..errors import VramplanError

JOBS = ("trace", "measure", "max_batch", "monitor")
MAX_STEPS = 100
PARENT_ENV = "VRAMPLAN_WORKER_PARENT"   # the starter's pid (set by measure.client.Worker)
MONITOR_COUNT = 3600          # samples before a forgotten monitor stops by itself


def _emit(out, **event) -> None:
    out.write(json.dumps(event, allow_nan=False) + "\n")
    out.flush()


def _int(opts: dict, key: str, default: int, lo: int, hi: int) -> int:
    v = opts.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise VramplanError(f"worker option '{key}' must be a whole number in {lo}..{hi}, "
                            f"got {v!r}")
    return v


def run(request: dict, out=sys.stdout) -> None:
    """Do the request's job, writing its events to `out`."""
    if not isinstance(request, dict):
        raise VramplanError("a worker request is a JSON object")
    job = request.get("job")
    if job not in JOBS:
        raise VramplanError(f"worker job must be one of {', '.join(JOBS)}, got {job!r}")
    opts = request.get("options") or {}
    if not isinstance(opts, dict):
        raise VramplanError("worker 'options' must be an object")
    scenario = request.get("scenario")
    steps = _int(opts, "steps", 2, 1, MAX_STEPS)
    device = _int(opts, "device", 0, 0, 1023)
    if job == "monitor":
        _monitor(opts, device if "device" in opts else None, out)
        return
    _emit(out, event="progress", phase="torch", k=0, n=steps)
    if job == "trace":
        from .trace import trace
        r = trace(scenario, mode=opts.get("mode", "fake"), kernels=opts.get("kernels", "cuda"),
                  steps=steps, timeline=True,
                  progress=lambda phase, k: _emit(out, event="progress", phase=phase, k=k,
                                                  n=steps))
        _emit(out, event="result", result=r.to_dict(timeline=True))
        return
    from .buildable import scenario_of
    from .live import cuda
    scn = scenario_of(scenario)
    if job == "measure":
        _emit(out, event="progress", phase="run", k=0, n=steps)
        _emit(out, event="result", result=cuda.measure(scn, steps=steps, device=device).to_dict())
        return
    share = opts.get("max_share", 0.9)
    if isinstance(share, bool) or not isinstance(share, (int, float)):
        raise VramplanError(f"worker option 'max_share' must be a number, got {share!r}")
    limit = _int(opts, "limit", 4096, 1, 1 << 20)

    def trial(b: int):
        _emit(out, event="progress", phase="trial", k=b, n=limit)
        return cuda.measure(scn.replace(batch_size=b), steps=steps, device=device)
    _emit(out, event="result", result=cuda.max_batch(scn, max_share=float(share), limit=limit,
                                                     device=device, trial=trial))


def _monitor(opts: dict, device: int | None, out) -> None:
    from .live import monitor
    interval = opts.get("interval", 1.0)
    if isinstance(interval, bool) or not isinstance(interval, (int, float)):
        raise VramplanError(f"worker option 'interval' must be a number, got {interval!r}")
    count = _int(opts, "count", MONITOR_COUNT, 1, 1 << 20)
    for s in monitor(interval=float(interval), count=count, index=device):
        _emit(out, event="sample", sample=s)
    _emit(out, event="result", result={"samples": count})


def _orphan_guard(interval: float = 1.0) -> None:
    """End this process when the one that started it goes (a page's kernel shut down): the
    worker runs in a session of its own, so nothing else would stop a long trace."""
    import os
    import threading
    given = os.environ.get(PARENT_ENV, "")
    parent = int(given) if given.isdigit() else os.getppid()

    def watch():
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(1)
    threading.Thread(target=watch, name="vramplan-worker-parent", daemon=True).start()


def main(stdin=sys.stdin, out=sys.stdout) -> int:
    try:
        run(safejson.loads(stdin.read(), "worker request"), out)
    except VramplanError as exc:
        _emit(out, event="error", message=str(exc))
        return 2
    except (BrokenPipeError, KeyboardInterrupt):   # the page went away or stopped us
        return 1
    except Exception as exc:  # a crash: its one line, not a traceback on a page
        _emit(out, event="error", message=f"{type(exc).__name__}: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    _orphan_guard()
    sys.exit(main())
