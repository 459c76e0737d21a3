"""live under faults, with fakes for pynvml and torch: NVML missing or failing mid-probe, torch
missing, CUDA out of memory or a CUDA error during a measurement, a GPU taken by another process,
broken scenario files. probe / measure / monitor keep what they can, say what is missing in one
line, exit 2 only where nothing can be done, and a measurement always gives its memory back."""
import json
import sys
import types

import pytest

from test_live import H200, NVMLError, fake_nvml
from vramplan.cli import main
from vramplan.errors import UnavailableError

GiB = 2 ** 30
GPT2 = {"model": "gpt2", "task": "train", "batch_size": 4, "seq_len": 8}


class FakeOOM(RuntimeError):
    pass


class Block:
    """A tensor's memory: allocated while referenced, freed when dropped (like torch)."""

    def __init__(self, cuda, n):
        self.cuda, self.n = cuda, n
        cuda.allocated += n
        cuda.reserved = max(cuda.reserved, cuda.allocated)
        cuda.peak_alloc = max(cuda.peak_alloc, cuda.allocated)
        cuda.peak_res = max(cuda.peak_res, cuda.reserved)

    def __del__(self):
        self.cuda.allocated -= self.n


class FakeCuda:
    """torch.cuda with a caching allocator: `reserved` only drops at empty_cache()."""

    def __init__(self, total=80 * GiB, others=0, busy=False):
        self.total, self.others, self.busy = total, others, busy
        self.allocated = self.reserved = self.peak_alloc = self.peak_res = 0
        self.calls = []
        self.memory = types.SimpleNamespace(
            _record_memory_history=lambda *a, **k: self.calls.append(("history", k)),
            _dump_snapshot=lambda f: self.calls.append(("snapshot", f)))

    def is_available(self):
        return True

    def device_count(self):
        return 1

    def set_device(self, d):
        if self.busy:
            raise RuntimeError("CUDA error: all CUDA-capable devices are busy or unavailable\n"
                               "CUDA kernel errors might be asynchronously reported")
        self.calls.append("set_device")

    def synchronize(self, d=None):
        self.calls.append("synchronize")

    def empty_cache(self):
        self.calls.append("empty_cache")
        self.reserved = self.allocated

    def reset_peak_memory_stats(self, d=None):
        self.calls.append("reset_peak_memory_stats")
        self.peak_alloc, self.peak_res = self.allocated, self.reserved

    def memory_allocated(self, d=None):
        return self.allocated

    def memory_reserved(self, d=None):
        return self.reserved

    def max_memory_allocated(self, d=None):
        return self.peak_alloc

    def max_memory_reserved(self, d=None):
        return self.peak_res

    def memory_stats(self, d=None):
        return {"num_ooms": 0, "num_alloc_retries": 0}

    def mem_get_info(self, d=0):
        return self.total - self.others - self.reserved, self.total

    def get_device_name(self, d=0):
        return "NVIDIA H200"

    def get_device_properties(self, d=0):
        return types.SimpleNamespace(total_memory=self.total, pci_domain_id=0, pci_bus_id=1,
                                     pci_device_id=0)


def fake_torch(cuda):
    return types.SimpleNamespace(cuda=cuda, OutOfMemoryError=FakeOOM, __version__="2.5.1",
                                 version=types.SimpleNamespace(cuda="12.4"))


@pytest.fixture
def gpu(monkeypatch):
    """Install a fake torch (and the fake run of a scenario): returns the fake torch.cuda.
    The run holds 6 GiB of weights, then 2 GiB of activations; fail() makes the error raised in
    the step (a new one each run, as torch does: its traceback holds the step's tensors)."""
    import vramplan.measure.live.cuda as cu

    def install(fail=None, **kw):
        cuda = FakeCuda(**kw)
        monkeypatch.setitem(sys.modules, "torch", fake_torch(cuda))

        def run(scn, spec, steps, on_step=None):
            weights = Block(cuda, 6 * GiB)
            acts = Block(cuda, 2 * GiB)
            if fail:
                raise fail()
            del acts
            counter = types.SimpleNamespace(peak=8 * GiB, peak_phase="backward",
                                            peak_cat={"weights": 6 * GiB, "activations": 2 * GiB})
            return types.SimpleNamespace(counter=counter, model=weights)
        monkeypatch.setattr(cu, "_run_steps", run)
        return cuda
    return install


def no_module(monkeypatch, name):
    monkeypatch.setitem(sys.modules, name, None)    # `import name` raises ImportError


def one_line(capsys, prefix="vramplan: error:"):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(prefix), err
    return err


def released(cuda):
    """Everything the run held was freed, the cache emptied and the peaks reset, in that order."""
    assert cuda.allocated == 0 and cuda.reserved == 0
    assert cuda.calls[-2:] == ["empty_cache", "reset_peak_memory_stats"]


# --- measure ----------------------------------------------------------------------------------

def test_measure_reports_peaks_and_gives_memory_back(gpu, nvml):
    import os
    from vramplan.measure.live import measure
    cuda = gpu()
    nvml(fake_nvml([dict(H200, procs=[(os.getpid(), 9 * GiB)])]))
    rep = measure(GPT2)
    assert rep.source == "measure" and rep.peak_allocated_bytes == 8 * GiB
    r = rep.to_dict()
    assert r["source"] == "measure" and r["fits"] is True       # 9 GiB used of an H200
    assert r["per_gpu"]["peak_allocated_bytes"] == 8 * GiB      # 6 GiB weights + 2 GiB activations
    assert r["per_gpu"]["peak_reserved_bytes"] == 8 * GiB
    assert r["per_gpu"]["device_used_bytes"] == 9 * GiB         # what NVML says this process held
    assert r["measure"]["driver"] == "550.54.15" and "missing" not in r
    released(cuda)


def test_measure_without_nvml_keeps_the_torch_figures(gpu, monkeypatch, tmp_path, capsys):
    cuda = gpu()
    no_module(monkeypatch, "pynvml")
    f = tmp_path / "s.json"
    f.write_text(json.dumps(GPT2))
    assert main(["measure", "--scenario", str(f), "--format", "json"]) == 0
    out = capsys.readouterr()
    r = json.loads(out.out)
    assert r["per_gpu"]["peak_allocated_bytes"] == 8 * GiB and r["per_gpu"]["device_used_bytes"] is None
    assert "no NVML bindings" in r["missing"]["device_used_bytes"]
    note = out.err.strip()
    assert len(note.splitlines()) == 1
    assert note.startswith("vramplan: note: not measured: device-used memory (no NVML bindings")
    released(cuda)


def test_out_of_memory_mid_step_is_one_line_and_memory_is_given_back(gpu, nvml, tmp_path, capsys):
    """Was: the cache was emptied inside `except`, while the error's traceback still held the
    step's tensors: 8 GiB stayed reserved."""
    cuda = gpu(fail=lambda: FakeOOM("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail"),
               others=60 * GiB)
    nvml(fake_nvml([dict(H200, procs=[(4242, 60 * GiB)])]))
    f = tmp_path / "s.json"
    f.write_text(json.dumps(GPT2))
    assert main(["measure", "--scenario", str(f)]) == 2
    err = one_line(capsys)
    assert "CUDA out of memory at batch 4 (20.00 GiB free at the start; other processes hold " \
           "60.00 GiB of it): CUDA out of memory. Tried to allocate 2.00 GiB" in err
    released(cuda)


def test_cuda_error_mid_step_releases_memory_too(gpu, nvml):
    from vramplan.measure.live import measure
    from vramplan.measure.live.cuda import MeasureError
    cuda = gpu(fail=lambda: RuntimeError("CUDA error: an illegal memory access was encountered"))
    nvml(fake_nvml([H200]))
    with pytest.raises(MeasureError, match="CUDA failed at batch 4: CUDA error: an illegal"):
        measure(GPT2, snapshot="snap.pickle")
    assert ("history", {"enabled": None}) in cuda.calls       # recording stopped
    released(cuda)


def test_interrupt_still_releases(gpu, nvml):
    from vramplan.measure.live import measure
    cuda = gpu(fail=KeyboardInterrupt)
    nvml(fake_nvml([H200]))
    with pytest.raises(KeyboardInterrupt):
        measure(GPT2)
    assert cuda.calls[-2:] == ["empty_cache", "reset_peak_memory_stats"]


def test_gpu_taken_by_another_process_is_one_line(gpu, nvml, tmp_path, capsys):
    gpu(busy=True)
    nvml(fake_nvml([H200]))
    f = tmp_path / "s.json"
    f.write_text(json.dumps(GPT2))
    assert main(["measure", "--scenario", str(f)]) == 2
    err = one_line(capsys)
    assert "GPU 0 is busy or unavailable (taken by another process" in err


def test_bandwidth_on_a_full_gpu_is_noted_and_the_measurement_kept(gpu, nvml, tmp_path, capsys):
    cuda = gpu(others=80 * GiB)              # another process holds all of it
    nvml(fake_nvml([dict(H200, procs=[(4242, 80 * GiB)])]))
    f = tmp_path / "s.json"
    f.write_text(json.dumps(GPT2))
    assert main(["measure", "--scenario", str(f), "--bandwidth"]) == 0
    out = capsys.readouterr()
    assert "peak_allocated_bytes" in out.out and "8.00 GiB" in out.out
    note = out.err.strip()
    assert len(note.splitlines()) == 1 and "bandwidth (no free memory on GPU 0 for the bandwidth buffer (other processes hold 80.00 GiB of it))" in note
    released(cuda)


def test_torch_missing_measure_exits_2_probe_still_works(monkeypatch, nvml, tmp_path, capsys):
    no_module(monkeypatch, "torch")
    nvml(fake_nvml([H200]))
    f = tmp_path / "s.json"
    f.write_text(json.dumps(GPT2))
    assert main(["measure", "--scenario", str(f)]) == 2
    assert "no torch" in one_line(capsys)
    assert main(["probe"]) == 0
    assert "NVIDIA H200" in capsys.readouterr().out


def test_wrong_device_index_is_one_line(gpu, tmp_path, capsys):
    gpu()
    f = tmp_path / "s.json"
    f.write_text(json.dumps(GPT2))
    assert main(["measure", "--scenario", str(f), "--device", "3"]) == 2
    assert "no CUDA device 3: torch sees 1 (0..0)" in one_line(capsys)


@pytest.mark.parametrize("content, problem", [
    (b"\x89PNG\r\n\x1a\n\xff\xd8\xff", "not UTF-8 text (a binary file?)"),
    (b'{"model": "gpt2\x00\x00"}', "not JSON text (a binary file?)"),
    (('{"model": "gpt2", "architecture": ' + "[" * 5000 + "]" * 5000 + "}").encode(),
     "nested more than 32 levels deep"),
    (b"[" * 100_000, "nested more than 32 levels deep"),
    (b'{"model": "gpt2", "batch_size": 1e999}', "1e999 is too large"),
    (b"[1, 2]", "expected one scenario (a JSON object)"),
])
def test_broken_scenario_file_for_measure_is_one_line(content, problem, tmp_path, capsys, gpu):
    """Was: UnicodeDecodeError / RecursionError tracebacks."""
    cuda = gpu()
    f = tmp_path / "s.json"
    f.write_bytes(content)
    assert main(["measure", "--scenario", str(f)]) == 2
    err = one_line(capsys)
    assert f"scenario file {f}" in err and problem in err
    assert cuda.calls == []                      # refused before touching the GPU


def test_deep_dict_given_to_the_api_is_refused(gpu):
    from vramplan.errors import VramplanError
    from vramplan.measure.live import measure
    deep = []
    for _ in range(3000):
        deep = [deep]
    with pytest.raises(VramplanError, match="nested more than 32 levels deep"):
        measure({**GPT2, "architecture": {"x": deep}})


# --- probe / monitor ---------------------------------------------------------------------------

def test_nvml_missing_probe_and_monitor_exit_2(monkeypatch, capsys):
    no_module(monkeypatch, "pynvml")
    for cmd in (["probe"], ["monitor", "--count", "1"]):
        assert main(cmd) == 2
        assert "no NVML bindings: pip install nvidia-ml-py" in one_line(capsys)


def lost_after(nv, n_ok):
    """GPUs from index n_ok on fall off the bus: NVML cannot open them."""
    real = nv.nvmlDeviceGetHandleByIndex

    def handle(i):
        if i >= n_ok:
            raise NVMLError("GPU is lost")
        return real(i)
    nv.nvmlDeviceGetHandleByIndex = handle
    return nv


def test_probe_with_a_gpu_lost_mid_probe_lists_the_rest(nvml, capsys):
    nv = nvml(lost_after(fake_nvml([H200, H200]), 1))
    assert main(["probe"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert "NVIDIA H200" in lines[2] and lines[3].split()[:3] == ["1", "?", "?"]
    assert out.err.strip() == "vramplan: note: GPU 1: not readable (GPU is lost)"
    assert nv.calls == ["shutdown"]


def test_probe_names_the_readings_nvml_failed_on(nvml, capsys):
    nv = fake_nvml([H200])
    nv.nvmlDeviceGetMemoryInfo = lambda h: (_ for _ in ()).throw(NVMLError("Unknown Error"))
    nvml(nv)
    from vramplan.measure.live import probe
    g = probe()[0]
    assert g["memory_total_bytes"] is None and g["missing"] == {"memory": "Unknown Error"}
    assert g["bus_width_bits"] == 5120
    assert main(["probe"]) == 0
    assert capsys.readouterr().err.strip() == \
        "vramplan: note: GPU 0: memory not read (Unknown Error)"


def test_not_supported_readings_are_not_reported_as_missing(nvml):
    from vramplan.measure.live import probe
    nvml(fake_nvml([H200], broken=("bus",)))
    g = probe()[0]
    assert g["bus_width_bits"] is None and g["missing"] == {}


def test_nvml_failing_to_count_is_unavailable(nvml, capsys):
    nv = fake_nvml([H200])
    nv.nvmlDeviceGetCount = lambda: (_ for _ in ()).throw(NVMLError("Driver/library version mismatch"))
    nvml(nv)
    assert main(["probe"]) == 2
    assert "NVML cannot count the GPUs: Driver/library version mismatch" in one_line(capsys)


def test_monitor_goes_on_when_a_reading_fails_mid_run(nvml, capsys):
    nv = fake_nvml([H200])
    calls = {"n": 0}
    real = nv.nvmlDeviceGetMemoryInfo

    def flaky(h):
        calls["n"] += 1
        if calls["n"] == 2:
            raise NVMLError("GPU is lost")
        return real(h)
    nv.nvmlDeviceGetMemoryInfo = flaky
    nvml(nv)
    assert main(["monitor", "--count", "3", "--interval", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert "used 30.00 GiB" in lines[0] and "used -" in lines[1] and "(NVML: GPU is lost)" in lines[1]
    assert "used 30.00 GiB" in lines[2]


@pytest.mark.parametrize("args, problem", [
    (["--device", "5", "--count", "1"], "no GPU 5: NVML sees 1 (0..0)"),
    (["--count", "0"], "--count must be at least 1"),
    (["--interval", "-1", "--count", "1"], "--interval must be 0 or more seconds"),
])
def test_monitor_bad_flags_are_one_line(args, problem, nvml, capsys):
    nvml(fake_nvml([H200]))
    assert main(["monitor", *args]) == 2
    assert problem in one_line(capsys)


def test_every_live_flag_has_help_and_monitor_a_description():
    from vramplan.cli import build_parser
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in ("probe", "measure", "monitor"):
        p = sub.choices[name]
        assert p.description, name
        for a in p._actions:
            assert a.help, f"{name} {a.option_strings}"


def test_unavailable_is_a_vramplan_error():
    assert issubclass(UnavailableError, RuntimeError)


# --- measure --calibrate ------------------------------------------------------------------------

def test_measure_calibrate_stores_one_row(gpu, nvml, tmp_path, capsys):
    import os
    from vramplan.measure import calibration
    gpu()
    nvml(fake_nvml([dict(H200, procs=[(os.getpid(), 9 * GiB)])]))
    f, db = tmp_path / "s.json", tmp_path / "cal.db"
    f.write_text(json.dumps(GPT2))
    assert main(["measure", "--scenario", str(f), "--calibrate", "--calibration", str(db)]) == 0
    assert capsys.readouterr().err == ""
    [s] = calibration.samples(file=db)
    assert s["software"] == {"torch": "2.5.1", "cuda": "12.4", "driver": "550.54.15"}
    assert s["measured"] == {"peak_allocated_bytes": 8 * GiB, "peak_reserved_bytes": 8 * GiB,
                             "device_used_bytes": 9 * GiB}
    assert s["scenario"]["model"] == "gpt2" and s["estimate"]["device_used_bytes"] > 0


def test_measure_calibrate_without_a_home_says_so_and_keeps_going(gpu, nvml, tmp_path, capsys,
                                                                 monkeypatch):
    from vramplan.measure.calibration import store as calibration_store
    calibration_store.forget_memory()
    monkeypatch.delenv("VRAMPLAN_CALIBRATION", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "no-home"))
    gpu()
    nvml(fake_nvml([H200]))
    f = tmp_path / "s.json"
    f.write_text(json.dumps(GPT2))
    try:
        assert main(["measure", "--scenario", str(f), "--calibrate"]) == 0
    finally:
        calibration_store.forget_memory()
    out = capsys.readouterr()
    assert "measured on NVIDIA H200" in out.out
    note = out.err.strip()
    assert len(note.splitlines()) == 1 and note.startswith("vramplan: note:"), note
    assert "does not exist" in note and "in memory for this run only" in note

