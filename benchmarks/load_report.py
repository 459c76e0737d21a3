"""The figures of benchmarks/load.py: the statistics it takes of its sessions and the table
it prints of a result."""
from __future__ import annotations

import statistics


def pct(vals, q):
    vals = sorted(vals)
    if not vals:
        return None
    return vals[min(len(vals) - 1, int(round(q * (len(vals) - 1))))]


def med(vals):
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
