"""Many planners at once: N concurrent browser sessions against one `vramplan app`.

    .venv/bin/python benchmarks/load.py [--sessions 16] [--preheat N] [--changes 3]
                                         [--json benchmarks/results/load-DATE.json]

Starts `vramplan app` (tests/browser/serving.py) with a 1 s culling interval, measures the
idle server's memory (the server and every process under it), opens N sessions in one headless
Chromium (a context and page each, all at once), waits for each planner to render (the verdict,
and the breakdown chart's svg with a non-zero width), drives each through control changes
(batch size, a GPU pick, a model change; each must change the verdict and the figures),
records console errors, page errors and any request to a host other than the server, closes
the pages (about:blank, which fires the page's kernel shutdown, then close) and waits for the
kernels to go and the memory to come back.

Prints a table and a JSON object (`--json PATH` writes it too). Exits 1 when a criterion fails:
every session rendered, no console / page error, no outside request, no 0 px chart, and the
server's memory after the sessions close within 10 % of idle.

tests/browser/test_load.py runs the same code at 4 sessions. The parts beside this file:
load_server.py (the server's memory, kernels and census), load_session.py (one browser
session and N at once), load_report.py (the statistics and the table).
"""
from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
sys.path.insert(0, str(ROOT / "app"))
sys.path.insert(0, str(Path(__file__).resolve().parent))   # the load_* parts beside this file

import psutil  # noqa: E402

import serving  # noqa: E402
from load_report import med, pct, table  # noqa: E402
from load_server import (  # noqa: E402
    CENSUS_DIR,
    LOG_EVENTS,
    MIB,
    Sampler,
    census,
    helpers_gone,
    own_rss,
    settled_rss,
    wait_pool,
)
from load_session import CHANGES, drive, log  # noqa: E402

MEMORY_TOLERANCE = 0.10   # memory after the sessions close: within 10 % of idle
SMALL_GPU = "nvidia-rtx-4060"          # 8 GB: the default 8B LoRA plan does not fit

__all__ = ["run_load", "table", "main"]


def run_load(sessions: int = 16, preheat: int = 0, changes: int = 3, cull_idle: int = 120,
             cull_interval: int = 1, stagger_s: float = 0.0, render_timeout_s: float = 900,
             step_timeout_s: float = 120, recover_timeout_s: float | None = None,
             log_name: str = "voila-load.log", verbose: bool = False, warmup: int = 1,
             block_outside: bool = False, rounds: int = 1, settle_timeout_s: float = 30,
             server_env: dict | None = None, memory_census: bool = False) -> dict:
    """Run the benchmark; returns the result dict (`result["ok"]`, `result["failures"]`)."""
    if recover_timeout_s is None:  # the page's shutdown beacon, else culling
        recover_timeout_s = cull_idle + 2 * cull_interval + 60
    from vramplan.hardware import default_db
    from vramplan.ui.widgets.controls import GpuPicker
    small = default_db().get(SMALL_GPU)
    plan = {"changes": changes, "render_timeout_ms": int(render_timeout_s * 1000),
            "step_timeout_ms": int(step_timeout_s * 1000), "small_gpu_name": small.name,
            "small_gpu_label": GpuPicker.label(small), "verbose": verbose,
            "block_outside": block_outside}
    app_args = ("--cull-idle", str(cull_idle), "--cull-interval", str(cull_interval))
    if preheat:
        app_args += ("--preheat", str(preheat))
    out: dict = {
        "benchmark": "load", "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total
                                                                / 2 ** 30, 1),
                    "platform": platform.platform(), "python": platform.python_version(),
                    "gpu": None},
        "config": {"sessions": sessions, "preheat": preheat, "changes": changes,
                   "memory_census": memory_census,
                   "cull_idle_s": cull_idle, "cull_interval_s": cull_interval,
                   "stagger_s": stagger_s, "changes_list": list(CHANGES[:changes]),
                   "warmup": warmup, "block_outside": block_outside, "rounds": rounds,
                   "server_env": server_env or {}},
    }
    t_all = time.monotonic()
    load_start = [round(x, 2) for x in os.getloadavg()]  # other work on the machine
    # the server and its kernels run this checkout's package, whatever else is installed
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "app")] + [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]), **(server_env or {})}
    censuses: list = []
    if memory_census:  # the server traces its allocations: slower, and its memory is not idle's
        for old in CENSUS_DIR.glob("census-*.json"):
            old.unlink()
        env["VRAMPLAN_SERVER_MEMORY_DEBUG"] = str(CENSUS_DIR)
    with serving.app_server(app_args=app_args, env=env, log_name=log_name) as (base, proc):
        t_up = time.monotonic() - t_all
        serving.wait_until(lambda: helpers_gone(proc), timeout=60)
        if preheat:  # the pool is part of the idle server
            serving.wait_until(lambda: len(serving.kernels(proc)) >= preheat, timeout=180)
            wait_pool(proc, log_name, preheat)
        cold = settled_rss(proc)
        warm = []
        if warmup:  # the server's one-time caches (first render), then back to idle
            warm = asyncio.run(drive(base, warmup, {**plan, "changes": 0}, 0.0))
            serving.wait_until(lambda: len(serving.kernels(proc)) <= (preheat or 0),
                               timeout=recover_timeout_s)
            if preheat:
                serving.wait_until(lambda: len(serving.kernels(proc)) >= preheat, timeout=180)
                wait_pool(proc, log_name, preheat)
        idle = settled_rss(proc)
        idle_own = own_rss(proc)
        idle_kernels = len(serving.kernels(proc))
        if memory_census:
            censuses.append(census(proc, 0))
        log_mark = len((serving.ARTIFACTS / log_name).read_text(errors="replace"))
        sampler = Sampler(proc)
        sampler.start()
        t0 = time.monotonic()
        results, round_info = [], []
        target = idle * (1 + MEMORY_TOLERANCE)
        for rnd in range(rounds):
            got = asyncio.run(drive(base, sessions, plan, stagger_s))
            for r in got:
                r["round"], r["index"] = rnd, r["index"] + rnd * sessions
            results += got
            t_closed = time.monotonic()
            # kernels go (the beacon, or culling), then the memory comes back
            gone = serving.wait_until(lambda: len(serving.kernels(proc)) <= idle_kernels,
                                      timeout=recover_timeout_s)
            t_gone = time.monotonic() - t_closed
            back = serving.wait_until(lambda: serving.tree_rss(proc) <= target,
                                      timeout=settle_timeout_s, step=0.5)
            t_back = time.monotonic() - t_closed
            after = settled_rss(proc, seconds=2.0)
            after_own = own_rss(proc)
            if memory_census:
                censuses.append(census(proc, len(censuses)))
            round_info.append({"round": rnd, "after_mib": round(after / MIB, 1),
                               "server_process_after_mib": round(after_own / MIB, 1),
                               "kernels_gone_s": round(t_gone, 1) if gone else None,
                               "back_within_10pct_s": round(t_back, 1) if back else None})
            log(plan, f"round {rnd + 1}/{rounds}: after {after / MIB:.0f} MiB "
                       f"(idle {idle / MIB:.0f}), kernels gone {gone} after {t_gone:.1f} s")
        t_closed = time.monotonic()
        sampler.stop()
        after_kernels = len(serving.kernels(proc))
        server_alive = proc.poll() is None
    log_text = (serving.ARTIFACTS / log_name).read_text(errors="replace")[log_mark:]

    rendered = [r for r in results if r.get("rendered")]
    first = [r["first_chart_s"] for r in rendered]
    verdict = [r["verdict_s"] for r in results if "verdict_s" in r]
    steps = [s for r in results for s in r.get("change_s", [])]
    widths = [r.get("first_chart_width_px", 0) for r in rendered]
    zero = [r["index"] for r in results
            if r.get("rendered") and (r.get("first_chart_width_px", 0) <= 0
                                      or any(w <= 0 for w in r.get("chart_widths_px", [])))]
    console = [f"#{r['index']}: {e}" for r in results for e in r["console_errors"]]
    page_err = [f"#{r['index']}: {e}" for r in results for e in r["page_errors"]]
    external = [u for r in results for u in r["external"]]
    leave_err = [f"#{r['index']}: {e}" for r in results for e in r.get("leave_errors", [])]
    sess_err = [f"#{r['index']}: {r['error']}" for r in results if r.get("error")]
    log_errors = [ln for ln in log_text.splitlines()
                  if "Traceback" in ln or " ERROR" in ln or "[E " in ln][:20]
    out.update({
        "load_average": {"start": load_start, "max_1min": round(sampler.max_load, 2),
                         "end": [round(x, 2) for x in os.getloadavg()]},
        "server_up_s": round(t_up, 1),
        "sessions_total": sessions * rounds, "sessions_rendered": len(rendered),
        "changes_completed": sum(r.get("changes_done", 0) for r in results),
        "changes_expected": sessions * rounds * changes,
        "verdict_s": {"median": med(verdict), "max": max(verdict, default=None)},
        "first_chart_s": {"median": med(first), "p90": pct(first, 0.9),
                          "max": max(first, default=None)},
        "change_s": {"median": med(steps), "max": max(steps, default=None)},
        "first_chart_width_px": {"min": min(widths, default=None),
                                 "max": max(widths, default=None)},
        "zero_px_chart_sessions": zero,
        "console_errors": console, "page_errors": page_err, "external_requests": external,
        "errors_while_leaving": leave_err,
        "session_errors": sess_err, "server_log_errors": log_errors,
        "server_log_events": {k: log_text.count(v) for k, v in LOG_EVENTS.items()},
        "sessions_s": round(t_closed - t0, 1),
        "rounds": round_info,
        "memory": {
            "cold_idle_mib": round(cold / MIB, 1),
            "idle_mib": round(idle / MIB, 1), "idle_kernels": idle_kernels,
            "peak_mib": round(sampler.peak / MIB, 1), "peak_kernels": sampler.peak_kernels,
            "per_session_mib": round((sampler.peak - idle) / MIB / sessions, 1),
            "after_mib": round(after / MIB, 1), "after_kernels": after_kernels,
            "server_process_idle_mib": round(idle_own / MIB, 1),
            "server_process_after_mib": round(after_own / MIB, 1),
            "after_over_idle": round(after / idle, 3),
            "after_over_cold_idle": round(after / cold, 3),
            "kernels_gone_s": round(t_gone, 1) if gone else None,
            "back_within_10pct_s": round(t_back, 1) if back else None,
        },
        "server_alive": server_alive,
        "memory_census": censuses or None,
        "warmup_sessions": [{k: w.get(k) for k in ("rendered", "first_chart_s", "error")}
                            for w in warm],
        "per_session": results,
        "total_s": round(time.monotonic() - t_all, 1),
    })
    failures = []
    if len(rendered) != sessions * rounds:
        failures.append(f"{sessions * rounds - len(rendered)} of {sessions * rounds} sessions "
                        "did not render")
    if out["changes_completed"] != out["changes_expected"]:
        failures.append(f"{out['changes_expected'] - out['changes_completed']} control changes "
                        "did not change the verdict / figures")
    if zero:
        failures.append(f"0 px chart in sessions {zero}")
    if console or page_err or sess_err:
        failures.append(f"{len(console)} console errors, {len(page_err)} page errors, "
                        f"{len(sess_err)} session errors")
    if external:
        failures.append(f"{len(external)} requests outside the server")
    if any(ri["kernels_gone_s"] is None for ri in round_info):
        failures.append(f"kernels not shut down after {recover_timeout_s:.0f} s "
                        f"({after_kernels} left, {idle_kernels} at idle)")
    if after > idle * (1 + MEMORY_TOLERANCE):
        failures.append(f"memory after close {after / MIB:.0f} MiB is "
                        f"{after / idle - 1:+.0%} of idle {idle / MIB:.0f} MiB (limit +10%)")
    if not server_alive:
        failures.append("the server exited")
    out["failures"] = failures
    out["ok"] = not failures
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--preheat", type=int, default=0, metavar="N",
                    help="pass --preheat N to vramplan app")
    ap.add_argument("--changes", type=int, default=3,
                    help=f"control changes per session (cycling {', '.join(CHANGES)})")
    ap.add_argument("--cull-idle", type=int, default=120,
                    help="vramplan app --cull-idle (default 120, the app's own; below the "
                         "time a kernel takes to start under load, starting kernels are culled)")
    ap.add_argument("--cull-interval", type=int, default=1)
    ap.add_argument("--stagger", type=float, default=0.0,
                    help="seconds between session starts (default 0: all at once)")
    ap.add_argument("--render-timeout", type=float, default=900,
                    help="seconds a page may take to show its first chart, its wait for a "
                         "start turn included (pages start --start-slots at a time; default "
                         "900: the 16th of 16 pages on 2 busy cores)")
    ap.add_argument("--warmup", type=int, default=1, metavar="N",
                    help="sessions opened and closed before idle memory is measured (the "
                         "server's one-time caches of its first render; default 1, 0 for none)")
    ap.add_argument("--block-outside", action="store_true",
                    help="abort requests to other hosts via Playwright interception (off by "
                         "default: it changes load timing; they are recorded either way)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="open and close the N sessions this many times (memory after each)")
    ap.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                    help="extra environment for the server and its kernels (repeatable)")
    ap.add_argument("--memory-census", action="store_true",
                    help="the server traces its allocations and writes a census at idle and "
                         "after each round (what it holds, by type and allocation site; "
                         "test-artifacts/memory-census/): for finding a leak, not for the "
                         "memory figures, which tracing changes")
    ap.add_argument("--json", metavar="PATH", help="write the result here")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    a = ap.parse_args(argv)
    if not os.path.exists(serving.CHROMIUM):
        print(f"no Chromium at {serving.CHROMIUM}", file=sys.stderr)
        return 2
    r = run_load(a.sessions, a.preheat, a.changes, a.cull_idle, a.cull_interval, a.stagger,
                 render_timeout_s=a.render_timeout, verbose=not a.quiet, warmup=a.warmup,
                 block_outside=a.block_outside, rounds=a.rounds,
                 server_env=dict(kv.split("=", 1) for kv in a.server_env),
                 memory_census=a.memory_census)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(r, indent=2) + "\n")
    summary = {k: v for k, v in r.items() if k != "per_session"}
    print(json.dumps(summary, indent=2))
    print()
    print(table(r))
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
