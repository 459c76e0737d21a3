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

tests/browser/test_load.py runs the same code at 4 sessions.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import os
import platform
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
sys.path.insert(0, str(ROOT / "app"))

import psutil  # noqa: E402

import serving  # noqa: E402

MIB = 2 ** 20
MEMORY_TOLERANCE = 0.10   # memory after the sessions close: within 10 % of idle
SMALL_GPU = "nvidia-rtx-4060"          # 8 GB: the default 8B LoRA plan does not fit
CHANGES = ("batch", "gpu", "model", "batch2")


# ------------------------------------------------------------------ server memory
class Sampler(threading.Thread):
    """Samples the server tree's RSS and kernel count every `step` seconds."""

    def __init__(self, proc, step: float = 0.25):
        super().__init__(daemon=True, name="rss-sampler")
        self.proc, self.step = proc, step
        self.peak = 0
        self.peak_kernels = 0
        self.max_load = 0.0
        self.samples: list[tuple[float, int, int]] = []   # (t, rss, kernels)
        self._halt = threading.Event()
        self.t0 = time.monotonic()

    def run(self):
        while not self._halt.is_set():
            rss, k = serving.tree_rss(self.proc), len(serving.kernels(self.proc))
            self.samples.append((time.monotonic() - self.t0, rss, k))
            self.peak = max(self.peak, rss)
            self.peak_kernels = max(self.peak_kernels, k)
            self.max_load = max(self.max_load, os.getloadavg()[0])
            self._halt.wait(self.step)

    def stop(self):
        self._halt.set()
        self.join(timeout=5)


def _helpers_gone(proc) -> bool:
    """The server's start-up helper (the chart cache warm-up) has exited."""
    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return True
    for c in kids:
        try:
            if "altair_offline" in " ".join(c.cmdline()):
                return False
        except psutil.Error:
            continue
    return True


def _wait_pool(proc, log_name: str, n: int, timeout: float = 240) -> bool:
    """Wait until Voila logs its pre-heated pool as full (kernels started and rendered)."""
    log = serving.ARTIFACTS / log_name
    want = log.read_text(errors="replace").count("is filled with") + 1
    return serving.wait_until(
        lambda: log.read_text(errors="replace").count("is filled with") >= want, timeout)


def _own_rss(proc) -> int:
    """Resident bytes of the server process alone (no kernels, no helpers)."""
    try:
        return psutil.Process(proc.pid).memory_info().rss
    except psutil.Error:
        return 0


LOG_EVENTS = {  # server log lines worth counting under load
    "iopub_timeouts": "Timeout waiting for IOPub output",
    "kernels_culled": "Culling 'idle' kernel",
    "kernels_died": "Kernel died",
    "cell_errors": "Error at server while executing cell",
    "culler_errors": "while checking the idle duration",
}


CENSUS_DIR = serving.ARTIFACTS / "memory-census"


def census(proc, n: int, timeout: float = 120) -> dict | None:
    """Ask a server started with --memory-census for its n-th census (SIGUSR1;
    vramplan/commands/server_memory.py) and read it back, bytes in MiB."""
    path = CENSUS_DIR / f"census-{n}.json"
    os.kill(proc.pid, signal.SIGUSR1)
    if not serving.wait_until(path.exists, timeout):
        return None
    c = json.loads(path.read_text())
    for k in ("rss", "traced", "traced_peak"):
        c[k + "_mib"] = round(c.pop(k) / MIB, 2)
    for site in c.get("sites_grown", []):
        site["size_diff_kib"] = round(site.pop("size_diff") / 1024, 1)
    return c


def settled_rss(proc, seconds: float = 3.0, step: float = 0.5) -> int:
    """The tree's RSS once it stops moving: the last of `seconds` of samples."""
    vals = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        vals.append(serving.tree_rss(proc))
        time.sleep(step)
    return vals[-1] if vals else serving.tree_rss(proc)


# ------------------------------------------------------------------ one session
async def _text(page, sel: str) -> str:
    return await page.evaluate("s => document.querySelector(s)?.textContent || ''", sel)


async def _state(page) -> str:
    return (await _text(page, ".vp-verdict")) + "|" + (await _text(page, ".vp-figs"))


async def _wait_change(page, before: str, sel: str, needle: str, timeout_ms: int) -> None:
    """Wait until `sel` contains `needle` and verdict + figures differ from `before`."""
    await page.wait_for_function(
        """([before, sel, needle]) => {
             const t = s => document.querySelector(s)?.textContent || '';
             return t(sel).includes(needle) && (t('.vp-verdict') + '|' + t('.vp-figs')) !== before;
           }""", arg=[before, sel, needle], timeout=timeout_ms)


async def _enter(page, field: str, value: str) -> None:
    box = page.locator(f".vp-f-{field} input").first
    await box.fill(value)
    await box.press("Enter")


async def _chart_width(page, sel: str = ".vp-breakdown svg") -> float:
    return await page.evaluate(
        "s => { const e = document.querySelector(s); return e ? e.getBoundingClientRect().width"
        " : -1; }", sel)


async def _all_chart_widths(page) -> list[float]:
    """Width of every chart's svg that is on screen (display not none)."""
    return await page.evaluate(
        """() => [...document.querySelectorAll('.vp-chart svg')]
                 .filter(e => e.closest('.vp-chart').offsetParent !== null)
                 .map(e => e.getBoundingClientRect().width)""")


async def _pick_gpu(page, name: str, label: str, timeout_ms: int) -> None:
    await page.locator(".vp-gpu-picker input[type=text]").first.fill(name)
    select = page.locator(".vp-gpu-picker select[size]")
    # wait for the filtered list: a pick made on the full list is applied by its index to the
    # filtered one when that arrives (the pick is lost, or lands on another GPU)
    await page.wait_for_function(
        """needle => { const o = [...document.querySelectorAll('.vp-gpu-picker select[size] option')];
                       return o.length > 0 && o.every(e =>
                           e.textContent.replace(/\u00a0/g, ' ').includes(needle)); }""",
        arg=label.split(" · ")[0], timeout=timeout_ms)
    await select.locator("option", has_text=label).first.wait_for(timeout=timeout_ms)
    await select.select_option(label=label)


async def _stuck_state(page, base: str) -> dict:
    """What a page that did not render shows, and its kernel as the server sees it (busy:
    the kernel never answered; idle with a connection: the page stopped asking)."""
    state = await page.evaluate(
        """() => { let c = {}; try { c = JSON.parse(document.getElementById(
                     'jupyter-config-data').textContent); } catch (e) {}
                   return {kernel_id: c.kernelId || null,
                           loading: document.body.innerText.slice(0, 200),
                           views: document.querySelectorAll('.jupyter-widgets').length}; }""")
    if state.get("kernel_id"):
        try:
            resp = await page.request.get(f"{base}/api/kernels/{state['kernel_id']}",
                                          timeout=10_000)
            state["server_kernel"] = await resp.json() if resp.ok else resp.status
        except Exception as exc:
            state["server_kernel"] = f"{type(exc).__name__}"
    return state


def _page_error(exc) -> str:
    """The message and the first lines of its stack (where in the page's code it came from)."""
    stack = [ln.strip() for ln in (getattr(exc, "stack", None) or "").splitlines()[1:4]]
    return str(exc) + (" | " + " | ".join(stack) if stack else "")


def _log(plan: dict, msg: str) -> None:
    if plan.get("verbose"):
        print(f"[load {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


async def run_session(i: int, browser, base: str, plan: dict, res: dict) -> None:
    """One visitor: open the page, wait for the chart, make the changes, leave."""
    t_render, t_step = plan["render_timeout_ms"], plan["step_timeout_ms"]
    res.update(index=i, rendered=False, changes_done=0, console_errors=[], page_errors=[],
               external=[], error=None)
    context = await browser.new_context(viewport={"width": 1440, "height": 1000})

    def on_request(request):
        host = urlparse(request.url).hostname or ""
        if request.url.startswith(("http://", "https://", "ws://", "wss://")) and \
                host not in serving.LOCAL_HOSTS:
            res["external"].append(request.url)

    if plan.get("block_outside"):
        # aborting through Playwright's request interception changes the page's load timing;
        # with it the charts stay 0 px wide (see docs/serving.md), so it is off by default:
        # outside requests are recorded (and fail the run) either way
        await context.route(lambda url: (urlparse(url).hostname or "") not in serving.LOCAL_HOSTS
                            and url.startswith(("http://", "https://")),
                            lambda route: route.abort())
    page = await context.new_page()
    page.on("request", on_request)
    # errors while the page is being left (about:blank) are kept apart: nobody sees them
    res["leave_errors"] = []
    page.on("console", lambda m: (res["leave_errors"] if res.get("leaving") else
                                  res["console_errors"]).append(m.text)
            if m.type == "error" else None)
    page.on("pageerror", lambda exc: (res["leave_errors"] if res.get("leaving") else
                                      res["page_errors"]).append(_page_error(exc)))
    try:
        t0 = time.monotonic()
        await page.goto(base + "/", timeout=t_render, wait_until="domcontentloaded")
        await page.locator(".vp-verdict").first.wait_for(timeout=t_render)
        res["verdict_s"] = round(time.monotonic() - t0, 2)
        _log(plan, f"#{i} verdict after {res['verdict_s']} s")
        # the width is read in the same call that sees the chart: the static first chart is
        # swapped for the interactive one later, and a second query could fall between the two
        seen = await page.wait_for_function(
            "() => { const e = document.querySelector('.vp-breakdown svg');"
            " const w = e ? e.getBoundingClientRect().width : 0; return w > 0 ? w : 0; }",
            timeout=t_render)
        res["first_chart_s"] = round(time.monotonic() - t0, 2)
        res["first_chart_width_px"] = await seen.json_value()
        res["rendered"] = True
        _log(plan, f"#{i} first chart after {res['first_chart_s']} s, "
                   f"{res['first_chart_width_px']:.0f} px wide")

        for n, change in enumerate(CHANGES[:plan["changes"]] if plan["changes"] <= len(CHANGES)
                                   else [CHANGES[k % len(CHANGES)]
                                         for k in range(plan["changes"])]):
            before = await _state(page)
            t = time.monotonic()
            if change in ("batch", "batch2"):
                b = 2 + (i + n) % 6 if change == "batch" else 16 + i % 8
                await _enter(page, "batch_size", str(b))
                await _wait_change(page, before, ".vp-verdict-sub", f"batch {b}", t_step)
            elif change == "gpu":
                await _pick_gpu(page, plan["small_gpu_name"], plan["small_gpu_label"], t_step)
                try:
                    await _wait_change(page, before, ".vp-verdict-title",
                                       plan["small_gpu_name"], t_step // 2)
                except Exception:  # the list re-rendered under the pick: pick again once
                    await _pick_gpu(page, plan["small_gpu_name"], plan["small_gpu_label"], t_step)
                    await _wait_change(page, before, ".vp-verdict-title",
                                       plan["small_gpu_name"], t_step)
            elif change == "model":
                await _enter(page, "model", "gpt2")
                await _wait_change(page, before, ".vp-verdict-sub", "gpt2", t_step)
            res.setdefault("change_s", []).append(round(time.monotonic() - t, 2))
            res["changes_done"] += 1
            _log(plan, f"#{i} {change} in {res['change_s'][-1]} s")
        await page.wait_for_timeout(300)
        res["chart_widths_px"] = await _all_chart_widths(page)
        res["last_chart_width_px"] = await _chart_width(page)
    except Exception as exc:  # recorded, the other sessions go on
        res["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        _log(plan, f"#{i} failed: {res['error']}")
        try:
            shot = serving.ARTIFACTS / f"load-failed-{i}.png"
            await page.screenshot(path=str(shot), full_page=True)
        except Exception:
            pass
        try:
            res["chart_widths_px"] = await _all_chart_widths(page)
            res["stuck"] = await _stuck_state(page, base)
        except Exception:
            pass
    finally:
        res["leaving"] = True
        try:
            await page.goto("about:blank", timeout=30_000)  # fires the kernel shutdown beacon
        except Exception:
            pass
        await page.close()
        await context.close()


async def _drive(base: str, n: int, plan: dict, stagger_s: float) -> list[dict]:
    from playwright.async_api import async_playwright
    results = [dict() for _ in range(n)]
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=serving.CHROMIUM, headless=True,
                                           args=serving.CHROMIUM_ARGS)
        try:
            async def one(i):
                await asyncio.sleep(i * stagger_s)
                await run_session(i, browser, base, plan, results[i])
            await asyncio.gather(*(one(i) for i in range(n)))
        finally:
            await browser.close()
    return results


# ------------------------------------------------------------------ the benchmark
def _pct(vals, q):
    vals = sorted(vals)
    if not vals:
        return None
    return vals[min(len(vals) - 1, int(round(q * (len(vals) - 1))))]


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
    from vramplan.ui.controls import GpuPicker
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
        serving.wait_until(lambda: _helpers_gone(proc), timeout=60)
        if preheat:  # the pool is part of the idle server
            serving.wait_until(lambda: len(serving.kernels(proc)) >= preheat, timeout=180)
            _wait_pool(proc, log_name, preheat)
        cold = settled_rss(proc)
        warm = []
        if warmup:  # the server's one-time caches (first render), then back to idle
            warm = asyncio.run(_drive(base, warmup, {**plan, "changes": 0}, 0.0))
            serving.wait_until(lambda: len(serving.kernels(proc)) <= (preheat or 0),
                               timeout=recover_timeout_s)
            if preheat:
                serving.wait_until(lambda: len(serving.kernels(proc)) >= preheat, timeout=180)
                _wait_pool(proc, log_name, preheat)
        idle = settled_rss(proc)
        idle_own = _own_rss(proc)
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
            got = asyncio.run(_drive(base, sessions, plan, stagger_s))
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
            after_own = _own_rss(proc)
            if memory_census:
                censuses.append(census(proc, len(censuses)))
            round_info.append({"round": rnd, "after_mib": round(after / MIB, 1),
                               "server_process_after_mib": round(after_own / MIB, 1),
                               "kernels_gone_s": round(t_gone, 1) if gone else None,
                               "back_within_10pct_s": round(t_back, 1) if back else None})
            _log(plan, f"round {rnd + 1}/{rounds}: after {after / MIB:.0f} MiB "
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
        "verdict_s": {"median": _med(verdict), "max": max(verdict, default=None)},
        "first_chart_s": {"median": _med(first), "p90": _pct(first, 0.9),
                          "max": max(first, default=None)},
        "change_s": {"median": _med(steps), "max": max(steps, default=None)},
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


def _med(vals):
    return round(statistics.median(vals), 2) if vals else None


def table(r: dict) -> str:
    m, c = r["memory"], r["config"]
    rows = [
        ("sessions rendered", f"{r['sessions_rendered']} / {r['sessions_total']}"),
        ("control changes", f"{r['changes_completed']} / {r['changes_expected']}"),
        ("preheat / cull idle / stagger", f"{c['preheat']} / {c['cull_idle_s']} s / "
                                          f"{c['stagger_s']} s"),
        ("machine load (1-min avg, start / max)",
         f"{r['load_average']['start'][0]} / {r['load_average']['max_1min']} "
         f"on {r['machine']['cpus']} CPUs"),
        ("errors (console/page/session)", f"{len(r['console_errors'])} / "
                                          f"{len(r['page_errors'])} / {len(r['session_errors'])}"),
        ("outside requests", str(len(r["external_requests"]))),
        ("server log: IOPub timeouts / culled / died",
         "{iopub_timeouts} / {kernels_culled} / {kernels_died}".format(**r["server_log_events"])),
        ("verdict s (median / max)", f"{r['verdict_s']['median']} / {r['verdict_s']['max']}"),
        ("first chart s (median / max)",
         f"{r['first_chart_s']['median']} / {r['first_chart_s']['max']}"),
        ("control change s (median / max)", f"{r['change_s']['median']} / {r['change_s']['max']}"),
        ("first chart width px (min)", str(r["first_chart_width_px"]["min"])),
        ("0 px chart sessions", str(r["zero_px_chart_sessions"] or "none")),
        ("server idle MiB (cold / warm)",
         f"{m['cold_idle_mib']} / {m['idle_mib']} ({m['idle_kernels']} kernels)"),
        ("server peak MiB", f"{m['peak_mib']} ({m['peak_kernels']} kernels)"),
        ("MiB per session", str(m["per_session_mib"])),
        ("after close MiB / warm idle", f"{m['after_mib']} ({m['after_over_idle']:.3f}x; "
                                       f"{m['after_over_cold_idle']:.3f}x cold)"),
        ("server process alone MiB (idle / after)",
         f"{m['server_process_idle_mib']} / {m['server_process_after_mib']}"),
        ("kernels gone after s", str(m["kernels_gone_s"])),
        ("memory within 10% after s", str(m["back_within_10pct_s"])),
        ("after each round MiB", ", ".join(str(x["after_mib"]) for x in r["rounds"])),
        ("wall time s (sessions / all)", f"{r['sessions_s']} / {r['total_s']}"),
        ("result", "PASS" if r["ok"] else "FAIL: " + "; ".join(r["failures"])),
    ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


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
