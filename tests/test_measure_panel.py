"""Measure from the page: the job state machine (no widgets), the worker process (a real trace
through the panel's code path, a cancel that kills the process), the tracer's refusals as one
sentence, the live panel without a GPU and with a fake NVML (detect selects the GPU's id)."""
from __future__ import annotations

import io
import json
import os
import time

import pytest

from test_live import H200, NVMLError_LibraryNotFound, fake_nvml
from vramplan.errors import UnavailableError, VramplanError
from vramplan.hardware import default_db
from vramplan.measure import worker
from vramplan.ui.state import measure_state as M
from vramplan.ui.state.state import PlanState

GiB = 2 ** 30
SMALL = {"model": "gpt2", "task": "train", "batch_size": 1, "seq_len": 32, "precision": "fp32",
         "optimizer": "adamw", "gpu": "nvidia-h100-sxm5-80gb"}


# ------------------------------------------------------------------ state machine
def test_job_goes_idle_running_done_with_the_trace_fraction_by_hand():
    seen = []
    job = M.Job("trace")
    job.listen(lambda j: seen.append(j.state))
    assert job.state == M.IDLE and job.fraction == 0.0 and job.phase_text() == ""
    job.start({"job": "trace"})
    assert job.running and job.phase_text() == "Starting"
    # two steps: torch, build, step 1, step 2, allocator = 5 units
    job.progress("torch", 0, 2)
    assert job.fraction == 0.0 and job.phase_text() == "Starting torch"
    job.progress("build", 0, 2)
    assert job.fraction == pytest.approx(1 / 5)
    job.progress("step", 1, 2)
    assert job.fraction == pytest.approx(2 / 5) and job.phase_text() == "Step 1 of 2"
    job.progress("step", 2, 2)
    assert job.fraction == pytest.approx(3 / 5)
    job.progress("finish", 2, 2)
    assert job.fraction == pytest.approx(4 / 5)
    job.finish({"per_gpu": {"peak_allocated_bytes": 7}})
    assert job.state == M.DONE and job.fraction == 1.0 and job.result["per_gpu"]
    assert seen[0] == M.RUNNING and seen[-1] == M.DONE


def test_job_cancel_and_error_and_late_events_are_dropped():
    job = M.Job("live")
    assert job.cancel() is False and job.state == M.IDLE      # nothing to cancel
    job.start()
    with pytest.raises(VramplanError, match="already running"):
        job.start()
    assert job.fraction is None                                # a GPU run: no fraction
    job.progress("trial", 64, 4096)
    assert job.phase_text() == "Trying batch size 64"
    assert job.cancel() is True and job.state == M.CANCELLED
    job.progress("trial", 128, 4096)                           # from a killed process: ignored
    job.finish({"max_batch_size": 99})
    assert job.state == M.CANCELLED and job.result is None and job.phase == "trial"
    job.start()                                                # a new run starts clean
    job.sample({"t": 0, "index": 0, "used_bytes": 5})
    job.fail("CUDA out of memory")
    assert job.state == M.ERROR and job.error == "CUDA out of memory"
    assert job.samples == [{"t": 0, "index": 0, "used_bytes": 5}]
    job.start()
    assert job.samples == [] and job.error is None


def test_compare_and_largest_modules_by_hand():
    est = {"per_gpu": {"peak_allocated_bytes": 1000, "peak_reserved_bytes": 2000,
                       "device_used_bytes": None}}
    got = {"per_gpu": {"peak_allocated_bytes": 1100, "peak_reserved_bytes": 1500,
                       "device_used_bytes": 3000}}
    rows = M.compare(est, got)
    assert [(r["key"], r["diff_bytes"], r["diff_pct"]) for r in rows] == [
        ("peak_allocated_bytes", 100, 10.0), ("peak_reserved_bytes", -500, -25.0)]
    traced = {"trace": {"by_module": {"model.layers.0": 5, "model.layers.1": 7, "lm_head": 20,
                                      "(loss)": 3, "model.layers.2": 6, "head.3": 1}}}
    mods = M.largest_modules(traced)
    assert [(m["name"], m["bytes"], m["count"], m["each_bytes"]) for m in mods] == [
        ("lm_head", 20, 1, 20), ("model.layers.0-2", 18, 3, 7), ("(loss)", 3, 1, 3),
        ("head.3", 1, 1, 1)]
    assert M.peak_phase({"trace": {"peak_phase": "backward"}, "peak_phase": "x"}) == "backward"
    assert M.peak_phase({"measure": {"counter_peak_phase": "forward"}}) == "forward"


# ------------------------------------------------------------------ the worker process
def test_worker_refuses_a_bad_request_in_one_line():
    out = io.StringIO()
    assert worker.main(io.StringIO('{"job": "rm -rf"}'), out) == 2
    ev = json.loads(out.getvalue())
    assert ev["event"] == "error" and "worker job must be one of trace" in ev["message"]
    out = io.StringIO()
    assert worker.main(io.StringIO('{"job": "trace", "options": {"steps": 0}}'), out) == 2
    assert "'steps' must be a whole number in 1..100" in json.loads(out.getvalue())["message"]


def _wait(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def test_trace_through_the_panel_shows_the_tracers_peak():
    pytest.importorskip("torch")
    from vramplan.measure import trace
    from vramplan.ui.state.text import size
    from vramplan.ui.widgets.trace_panel import TracePanel
    st = PlanState()
    st.apply(SMALL)
    panel = TracePanel(st)
    phases = []
    panel.job.listen(lambda j: phases.append(j.phase))
    panel.start()
    assert panel.button.disabled and not panel.progress.cancel.disabled
    assert panel.worker.wait(600), "the trace did not finish in 10 minutes"
    assert panel.job.state == M.DONE, panel.job.error
    for p in ("torch", "build", "step", "finish"):
        assert p in phases
    direct = trace.trace(st.scenario)           # the tracer's own figure, in this process
    peak = panel.job.result["per_gpu"]["peak_allocated_bytes"]
    assert peak == direct.peak_allocated_bytes
    assert f"Traced peak {size(peak)}" in panel.output.value
    row = M.compare(st.result, panel.job.result)[0]
    assert row["diff_bytes"] == peak - st.result["per_gpu"]["peak_allocated_bytes"]
    assert "Largest modules at the traced peak" in panel.output.value
    assert "model.layers.0-11" in panel.output.value       # gpt2's 12 blocks, folded
    assert not panel.button.disabled and panel.progress.layout.display == "none"


def test_cancel_kills_the_worker_process():
    pytest.importorskip("torch")
    job = M.Job("trace")
    w = M.Worker(job)
    w.start({"job": "trace", "scenario": {**SMALL, "model": "meta-llama/Llama-3.1-8B",
                                          "seq_len": 2048}})
    pid = w.pid
    assert pid and _wait(lambda: job.phase not in (None, "start"), 120)   # it is running
    assert w.cancel() is True and job.state == M.CANCELLED
    assert w.wait(30)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)                                    # gone (reaped by cancel)
    time.sleep(0.5)
    assert job.state == M.CANCELLED and job.result is None


def test_the_tracers_refusal_is_one_sentence_and_no_button():
    from vramplan.ui.widgets.trace_panel import TracePanel
    st = PlanState()
    st.apply({"model": "meta-llama/Llama-3.1-8B", "task": "qlora"})
    panel = TracePanel(st)
    assert panel.button.disabled
    assert "trace cannot run qlora" in panel.intro.value
    st.apply({"model": "gpt2", "task": "train"})
    assert not panel.button.disabled and "fake tensors" in panel.intro.value
    assert M.trace_refusal(None) == "There is no plan to trace yet."


# ------------------------------------------------------------------ the local GPU
def test_no_gpu_is_one_sentence(monkeypatch):
    from vramplan.ui.widgets.live_panel import LivePanel

    def probe():
        raise UnavailableError("no NVIDIA driver or GPU (NVML: NVML Shared Library Not Found)")
    st = PlanState()
    panel = LivePanel(st, probe=probe)
    assert panel.body.value.count(".") >= 1 and "No GPU to measure on here: no NVIDIA driver" \
        in panel.body.value
    assert panel.row.layout.display == "none"              # no buttons without a GPU
    panel.start("measure")                                 # and nothing starts
    assert panel.job.state == M.IDLE


def test_fake_nvml_probe_detects_and_selects_the_gpu(monkeypatch):
    import sys
    from vramplan.ui import App
    nv = fake_nvml([dict(H200, name="NVIDIA H200 NVL")])
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    app = App(charts=False)
    g = app.live.gpu
    assert g["name"] == "NVIDIA H200 NVL" and g["hwdb_id"] == "nvidia-h200-nvl-141gb"
    assert "141.00 GiB total, 111.00 GiB free" in app.live.body.value
    assert "550.54.15 · CUDA 12.4" in app.live.body.value
    assert not app.live.detect.disabled and app.state.gpu != "nvidia-h200-nvl-141gb"
    app.live.detect.click()
    assert app.state.gpu == "nvidia-h200-nvl-141gb" and app.picker.value == app.state.gpu
    assert app.live.detect.disabled                        # it is the chosen one now


def test_no_driver_through_the_app_breaks_nothing(monkeypatch):
    import sys
    from vramplan.ui import App
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(
        init_error=NVMLError_LibraryNotFound("NVML Shared Library Not Found")))
    app = App(charts=False)
    assert app.live.gpu is None and "No GPU to measure on here" in app.live.body.value
    assert app.estimate is not None


def test_hardware_match_finds_a_reported_variant():
    db = default_db()
    assert db.match("NVIDIA H200", 141 * GiB).id == "nvidia-h200-sxm-141gb"   # an alias
    assert db.match("NVIDIA H100 80GB HBM3e", 80 * GiB).id == "nvidia-h100-sxm5-80gb"
    assert db.match("NVIDIA H200 NVL rev 2").id == "nvidia-h200-nvl-141gb"    # longest key
    assert db.match("Some Accelerator 9000") is None and db.match("") is None


def test_monitor_rows_keep_one_gpu_with_readings():
    samples = [{"t": 0, "index": 0, "used_bytes": 1}, {"t": 0, "index": 1, "used_bytes": 2},
               {"t": 1, "index": 0, "used_bytes": None}, {"t": 2, "index": 0, "used_bytes": 3}]
    assert [s["used_bytes"] for s in M.monitor_rows(samples)] == [1, 3]


def test_a_worker_whose_starter_went_away_ends_itself(tmp_path):
    pytest.importorskip("torch")
    import subprocess
    import sys
    starter = tmp_path / "starter.py"
    starter.write_text(
        "import json, os, subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-m', 'vramplan.measure.worker'], text=True,\n"
        "    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True,\n"
        "    env={**os.environ, 'VRAMPLAN_WORKER_PARENT': str(os.getpid())})\n"
        "p.stdin.write(json.dumps({'job': 'trace', 'scenario': {'model': "
        "'meta-llama/Llama-3.1-8B', 'task': 'lora'}}))\n"
        "p.stdin.close()\nprint(p.pid)\n")
    pid = int(subprocess.run([sys.executable, str(starter)], capture_output=True, text=True,
                             check=True).stdout)

    def gone():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    try:   # an 8B trace runs for a minute or more: gone within seconds means the guard ended it
        assert _wait(gone, 15)
    finally:
        if not gone():
            os.kill(pid, 9)


def test_trace_timeline_chart_marks_the_estimate_and_the_traced_peak():
    from vramplan.charts.trace_timeline import monitor_chart, trace_timeline_chart
    events = [(0, "setup", 1 * GiB), (5, "forward", 3 * GiB), (9, "backward", 2 * GiB)]
    spec = trace_timeline_chart(events, estimate_peak_bytes=4 * GiB, usable_bytes=8 * GiB,
                                gpu_name="Small GPU").to_dict()
    values = [v for layer in spec["layer"] for v in (layer.get("data") or {}).get("values", [])]
    texts = [v.get("text") for v in values if v.get("text")]
    assert "estimate: 4.00 GiB" in texts and "Small GPU: 8.00 GiB usable" in texts
    assert "peak 3.00 GiB (Forward)" in texts
    from vramplan.charts.theme import title_text
    assert title_text(spec) == "Traced memory over two steps (GiB per GPU)"
    m = monitor_chart([{"t": 0, "used_bytes": GiB}, {"t": 1, "used_bytes": 2 * GiB},
                       {"t": 2, "used_bytes": None}], total_bytes=16 * GiB).to_dict()
    pts = m["layer"][0]["data"]["values"]
    assert [p["gib"] for p in pts] == [1.0, 2.0]
    assert m["layer"][1]["data"]["values"][0]["gib"] == 16.0


def test_measure_on_a_gpu_torch_cannot_see_fails_in_one_line(monkeypatch):
    """NVML (a fake) sees a GPU, the worker's torch (CPU build here) does not: the run ends in
    the worker's one-line message on the panel, the buttons come back."""
    pytest.importorskip("torch")
    import sys
    from vramplan.ui.widgets.live_panel import LivePanel
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([H200]))
    st = PlanState()
    st.apply(SMALL)
    panel = LivePanel(st)
    assert panel.gpu["hwdb_id"] == "nvidia-h200-sxm-141gb"
    panel.buttons["measure"].click()
    assert panel.job.running and panel.buttons["max_batch"].disabled
    assert panel.worker.wait(300)
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: the run would measure for real")
    assert panel.job.state == M.ERROR and "no CUDA device visible to torch" in panel.job.error
    assert "Measure this plan failed: no CUDA device visible to torch" in panel.output.value
    assert not panel.buttons["max_batch"].disabled


def test_a_trace_result_reads_in_both_languages():
    from vramplan.ui.state.i18n import set_lang
    from vramplan.ui.widgets.trace_panel import TracePanel
    st = PlanState()
    st.apply(SMALL)
    panel = TracePanel(st)
    panel.for_scenario = st.scenario
    panel.for_estimate = {"per_gpu": {"peak_allocated_bytes": 10 * GiB}, "peak_phase": "forward"}
    result = {"per_gpu": {"peak_allocated_bytes": 11 * GiB},
              "trace": {"peak_phase": "backward", "peak_step": 2, "ops": 1234, "seconds": 2.5,
                        "by_module": {"h.0": GiB, "h.1": 2 * GiB}, "timeline": []}}
    panel.job.start()
    panel.job.finish(result)
    out = panel.output.value
    assert "Traced peak 11.00 GiB: Backward, step 2" in out and "1,234 ops in 2.5 s" in out
    assert "+1.00 GiB (+10.0%)" in out and "The estimate&#x27;s peak: Forward." in out
    assert "h.0-1" in out and "2 blocks, 2.00 GiB each at most" in out
    set_lang(st, "zh")
    out = panel.output.value
    assert "追踪峰值 11.00 GiB：第 2 步，反向" in out and "估算的峰值：前向。" in out
    assert "2 个块，单个最多 2.00 GiB" in out and panel.button.description == "追踪此方案"
