"""One visitor of benchmarks/load.py in a browser: open the planner, wait for the verdict and
the breakdown chart, make the control changes (`CHANGES`), record console / page errors and
requests outside the server, leave (about:blank fires the kernel shutdown beacon).
`drive` runs N of them at once in one headless Chromium.

Imported by load.py, which puts tests/browser (`serving`) on sys.path."""
from __future__ import annotations

import asyncio
import sys
import time
from urllib.parse import urlparse

import serving

CHANGES = ("batch", "gpu", "model", "batch2")


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


def log(plan: dict, msg: str) -> None:
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
        log(plan, f"#{i} verdict after {res['verdict_s']} s")
        # the width is read in the same call that sees the chart: the static first chart is
        # swapped for the interactive one later, and a second query could fall between the two
        seen = await page.wait_for_function(
            "() => { const e = document.querySelector('.vp-breakdown svg');"
            " const w = e ? e.getBoundingClientRect().width : 0; return w > 0 ? w : 0; }",
            timeout=t_render)
        res["first_chart_s"] = round(time.monotonic() - t0, 2)
        res["first_chart_width_px"] = await seen.json_value()
        res["rendered"] = True
        log(plan, f"#{i} first chart after {res['first_chart_s']} s, "
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
            log(plan, f"#{i} {change} in {res['change_s'][-1]} s")
        await page.wait_for_timeout(300)
        res["chart_widths_px"] = await _all_chart_widths(page)
        res["last_chart_width_px"] = await _chart_width(page)
    except Exception as exc:  # recorded, the other sessions go on
        res["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        log(plan, f"#{i} failed: {res['error']}")
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


async def drive(base: str, n: int, plan: dict, stagger_s: float) -> list[dict]:
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
