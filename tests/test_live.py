"""live: NVML probe / monitor against a fake pynvml; max-batch search against a fake torch.cuda;
every failure is one clear message and exit status 2."""
import types

import pytest

from vramplan.errors import UnavailableError, VramplanError

GiB = 2 ** 30


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


def fake_nvml(gpus=None, init_error=None, broken=()):
    """A pynvml stand-in: `gpus` is a list of dicts (name, total, used, procs)."""
    gpus = gpus if gpus is not None else []
    m = types.SimpleNamespace(NVMLError=NVMLError, NVML_CLOCK_MEM=2, NVML_CLOCK_SM=1,
                              NVML_NVLINK_MAX_LINKS=4, calls=[])

    def init():
        if init_error:
            raise init_error
    m.nvmlInit = init
    m.nvmlShutdown = lambda: m.calls.append("shutdown")
    m.nvmlDeviceGetCount = lambda: len(gpus)
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    m.nvmlSystemGetCudaDriverVersion = lambda: 12040

    def guard(name, fn):
        def call(*a):
            if name in broken:
                raise NVMLError("Not Supported")
            return fn(*a)
        return call
    m.nvmlDeviceGetName = guard("name", lambda h: gpus[h]["name"])
    m.nvmlDeviceGetUUID = lambda h: f"GPU-{h}"
    m.nvmlDeviceGetMemoryInfo = guard("mem", lambda h: types.SimpleNamespace(
        total=gpus[h]["total"], used=gpus[h]["used"], free=gpus[h]["total"] - gpus[h]["used"]))
    m.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=f"00000000:{h + 1:02x}:00.0".encode())
    m.nvmlDeviceGetMemoryBusWidth = guard("bus", lambda h: 5120)
    m.nvmlDeviceGetMaxClockInfo = lambda h, t: 2619 if t == 2 else 1980
    m.nvmlDeviceGetClockInfo = lambda h, t: 2619
    m.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: 5
    m.nvmlDeviceGetCurrPcieLinkWidth = lambda h: 16
    m.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: 5
    m.nvmlDeviceGetNvLinkState = guard("nvlink", lambda h, link: 1)
    m.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=37, memory=10)
    m.nvmlDeviceGetComputeRunningProcesses = lambda h: [
        types.SimpleNamespace(pid=p, usedGpuMemory=b) for p, b in gpus[h].get("procs", [])]
    m.nvmlDeviceGetGraphicsRunningProcesses = lambda h: []
    return m


H200 = {"name": "NVIDIA H200", "total": 141 * GiB, "used": 30 * GiB, "procs": [(4242, 29 * GiB)]}


def test_probe_two_gpus_and_other_processes(nvml):
    from vramplan.measure.live import probe
    nv = nvml(fake_nvml([H200, dict(H200, used=1 * GiB, procs=[])]))
    g = probe()
    assert len(g) == 2
    assert g[0]["memory_total_bytes"] == 141 * GiB and g[0]["memory_free_bytes"] == 111 * GiB
    assert g[0]["other_processes_bytes"] == 29 * GiB and g[1]["other_processes_bytes"] == 0
    assert g[0]["bus_width_bits"] == 5120 and g[0]["nvlink_active_links"] == 4
    assert g[0]["cuda_driver_version"] == "12.4" and g[0]["pcie_generation"] == 5
    assert nv.calls == ["shutdown"]


def test_probe_degrades_per_field(nvml):
    from vramplan.measure.live import probe
    nvml(fake_nvml([H200], broken=("bus", "nvlink", "mem")))
    g = probe()[0]
    assert g["bus_width_bits"] is None and g["memory_total_bytes"] is None
    assert g["nvlink_active_links"] == 0 and g["name"] == "NVIDIA H200"


def test_no_driver_is_unavailable(nvml):
    from vramplan.measure.live import probe
    nvml(fake_nvml(init_error=NVMLError_LibraryNotFound("NVML Shared Library Not Found")))
    with pytest.raises(UnavailableError, match="no NVIDIA driver"):
        probe()


def test_monitor_samples(nvml):
    from vramplan.measure.live import monitor
    nvml(fake_nvml([H200, H200]))
    slept = []
    s = list(monitor(0.5, count=3, sleep=slept.append))
    assert len(s) == 6 and slept == [0.5, 0.5]
    assert s[0]["used_bytes"] == 30 * GiB and s[0]["utilization_pct"] == 37


def test_process_used(nvml):
    import os
    from vramplan.measure.live import nvml_process_used
    nvml(fake_nvml([dict(H200, procs=[(os.getpid(), 5 * GiB)])]))
    assert nvml_process_used(0) == 5 * GiB


@pytest.mark.parametrize("cmd", [["probe"], ["monitor", "--count", "1"],
                                 ["measure", "--scenario", "x.json"]])
def test_cli_without_gpu_one_line_exit_2(cmd, nvml, capsys, tmp_path, monkeypatch):
    nvml(fake_nvml(init_error=NVMLError_LibraryNotFound("NVML Shared Library Not Found")))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.json").write_text('{"model": "gpt2", "task": "train", "batch_size": 1, "seq_len": 8}')
    import vramplan.measure.live.cuda as cu
    monkeypatch.setattr(cu, "_torch_cuda", lambda: (_ for _ in ()).throw(
        UnavailableError("no CUDA device visible to torch")))
    from vramplan.cli import main
    assert main(cmd) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("vramplan: error:")


class FakeOOM(RuntimeError):
    pass


class FakeCuda:
    def __init__(self, free=80 * GiB, total=80 * GiB):
        self.free, self.total, self.fraction, self.emptied = free, total, 1.0, 0
        self.held = 0

    def mem_get_info(self, device=0):
        return self.free, self.total

    def memory_reserved(self, device=0):
        return self.held

    def set_per_process_memory_fraction(self, f, device=0):
        self.fraction = f

    def empty_cache(self):
        self.emptied += 1
        self.held = 0

    def synchronize(self, device=None):
        pass


def test_max_batch_search_releases_memory_after_oom(monkeypatch):
    import vramplan.measure.live.cuda as cu
    cuda = FakeCuda()
    torch = types.SimpleNamespace(cuda=cuda, OutOfMemoryError=FakeOOM)
    monkeypatch.setattr(cu, "_torch_cuda", lambda: torch)
    per_sample = 5 * GiB
    seen = []

    def trial(b):
        seen.append(b)
        assert cuda.held == 0, "memory of the previous trial was not released"
        need = b * per_sample
        if need > cuda.fraction * cuda.total:
            cuda.held = int(cuda.fraction * cuda.total)   # OOM mid-step, memory cached
            raise FakeOOM("CUDA out of memory")
        cuda.held = need
        return types.SimpleNamespace(peak_reserved_bytes=need)   # a MemoryReport's figure

    r = cu.max_batch({"model": "gpt2"}, max_share=0.9, trial=trial)
    assert r["max_batch_size"] == 14            # 14 * 5 GiB <= 0.9 * 80 GiB < 15 * 5 GiB
    assert r["budget_bytes"] == int(0.9 * 80 * GiB)
    assert cuda.fraction == 1.0                 # cap removed afterwards
    assert cuda.emptied >= len(seen)            # emptied after every trial
    assert any(not t["fits"] for t in r["trials"])
    assert seen[:5] == [1, 2, 4, 8, 16]


def test_max_batch_nothing_fits(monkeypatch):
    import vramplan.measure.live.cuda as cu
    torch = types.SimpleNamespace(cuda=FakeCuda(free=1 * GiB), OutOfMemoryError=FakeOOM)
    monkeypatch.setattr(cu, "_torch_cuda", lambda: torch)

    def trial(b):
        raise FakeOOM("CUDA out of memory")
    assert cu.max_batch({"model": "gpt2"}, trial=trial)["max_batch_size"] == 0


def test_max_share_validated():
    import vramplan.measure.live.cuda as cu
    with pytest.raises(VramplanError, match="max-share"):
        cu.max_batch({"model": "gpt2"}, max_share=1.5)


def test_no_cuda_on_this_machine_is_clear():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    from vramplan.measure.live import measure, bandwidth
    with pytest.raises(UnavailableError, match="no CUDA device"):
        measure({"model": "gpt2", "task": "train", "batch_size": 1, "seq_len": 8})
    with pytest.raises(UnavailableError):
        bandwidth()
