"""vramplan.sweep: every point of a grid equals `estimate` for that point, to the byte (device
used, reserved, allocated, fit, max batch), on every GPU of the database; grid syntax; how
many GPUs of each kind; the CLI."""
import json
import subprocess
import sys

import numpy as np
import pytest

from vramplan.estimate import MAX_BATCH_CAP, estimate
from vramplan.hardware import default_db
from vramplan.sweep import curve, engine, gpus_needed, max_batch, parse_values, sweep
from vramplan.sweep.grid import parse_vary

ALL = [d.id for d in default_db().devices]
# a spread of GPUs: pre-Ampere (legacy stack), Ampere..Blackwell, AMD, Apple, TPU
SOME = ["nvidia-v100-sxm2-32gb", "nvidia-t4", "nvidia-rtx-3060-12gb", "nvidia-rtx-4090",
        "nvidia-a100-sxm4-80gb", "nvidia-h100-sxm5-80gb", "nvidia-b200-sxm", "amd-mi300x",
        "apple-m3-max", "google-tpu-v5e"]

GRIDS = [
    ({"model": "meta-llama/Llama-3.1-8B", "task": "train", "seq_len": 1024},
     {"batch_size": "1..3", "checkpointing": "none,full", "gpu": "all"}),
    ({"model": "gpt2", "task": "train"},
     {"batch_size": "1,8", "precision": "fp32,bf16-mixed,fp16-mixed", "gpu": "all"}),
    ({"model": "Qwen/Qwen2.5-7B", "task": "lora"},
     {"seq_len": "512,2048", "parallel.gpus": "1,2", "gpu": SOME}),
    ({"model": "gpt2", "task": "serve"}, {"batch_size": "16,64", "gpu": "all"}),
    ({"model": "meta-llama/Llama-3.1-8B", "task": "generate"},
     {"batch_size": "1,4", "attention": "eager,sdpa", "gpu": SOME}),
    ({"model": "bert-base-uncased", "task": "train", "seq_len": 256},
     {"batch_size": "1..4", "gpu": SOME}),
    ({"model": "torchvision/resnet18", "task": "train"},
     {"batch_size": "1,16", "precision": "fp32,bf16-mixed", "gpu": SOME}),
    ({"model": "stable-diffusion-v1-5/stable-diffusion-v1-5", "task": "denoise"},
     {"batch_size": "1,2", "resolution": "512x512,768x768", "gpu": SOME}),
    # precision not given: its default follows the GPU (fp16 where there is no bf16, and
    # SDXL's VAE then decodes upcast to fp32), as estimate of the dict on that GPU reads it
    ({"model": "stabilityai/stable-diffusion-xl-base-1.0", "task": "denoise"},
     {"batch_size": "1,2", "gpu": SOME}),
    ({"task": "volume"}, {"batch_size": "1,2", "resolution": "128..512:x2", "gpu": "all"}),
    ({"task": "array", "arrays": [{"name": "a", "shape": [4096, 4096]}]},
     {"copies": "1,2", "gpu": SOME}),
    ({"task": "render"}, {"msaa": "1,4", "gpu": SOME}),
    # batch axes that go as one array (vramplan.vec): the batch-1 layout of a CNN splits them
    ({"model": "torchvision/resnet18", "task": "train"}, {"batch_size": "1..5", "gpu": SOME}),
    ({"model": "torchvision/vit_b_16", "task": "forward"}, {"batch_size": "2..6", "gpu": SOME}),
    ({"model": "mmdet/faster-rcnn_r50_fpn", "task": "train"},
     {"batch_size": "1..4", "gpu": SOME}),
    ({"model": "gpt2", "task": "generate"}, {"batch_size": "1..4", "gpu": SOME}),
    ({"model": "Qwen/Qwen2.5-0.5B", "task": "qlora", "seq_len": 512},
     {"batch_size": "1..6", "checkpointing": "none,full", "gpu": SOME}),
]


def _point(base, row, axes):
    d = json.loads(json.dumps(base))
    for k in axes:
        if k == "gpu":
            continue
        if "." in k:
            head, sub = k.split(".", 1)
            d.setdefault(head, {})[sub] = row[k]
        else:
            d[k] = row[k]
    d["gpu"] = row["gpu"]
    return d


@pytest.mark.parametrize("base, vary", GRIDS, ids=[f"{b.get('model', b['task'])}-{b['task']}"
                                                     for b, _ in GRIDS])
def test_every_point_equals_estimate(base, vary):
    r = sweep(base, vary, with_max_batch=True)
    assert r.size == len(list(r.rows())) > 0
    for row in r.rows():
        d = _point(base, row, vary)
        e = estimate(d)
        assert "error" not in row, row
        assert row["device_used_bytes"] == e.device_used_bytes, (d, row)
        assert row["peak_reserved_bytes"] == e.peak_reserved_bytes, (d, row)
        assert row["peak_allocated_bytes"] == e.peak_allocated_bytes, (d, row)
        assert row["fits"] == e.fits, (d, row)
        assert row["headroom_bytes"] == e.headroom_bytes, (d, row)
        assert row["max_batch_size"] == e.max_batch_size, (d, row)


def test_refused_points_are_errors_there_and_in_estimate():
    r = sweep({"model": "gpt2", "task": "train"}, {"seq_len": "512,2048"},
              gpus=["nvidia-rtx-4090"])
    rows = list(r.rows())
    assert "error" not in rows[0]
    assert "1,024 positions" in rows[1]["error"]       # learned positions: refused by from_dict


def test_a_training_plan_over_the_database_needs_few_footprints():
    # the footprint reads the compute capability only to ask "pre-Ampere software stack?"
    eng = engine()
    r = sweep({"model": "meta-llama/Llama-3.1-8B", "task": "train"}, {"gpu": "all"}, eng=eng)
    assert len(r.gpus) == len(ALL)
    assert r.footprint_calls <= 3


def test_max_batch_on_every_gpu_equals_estimate():
    d = {"model": "gpt2", "task": "train", "seq_len": 512}
    mb = max_batch({**d, "gpu": ALL[0]}, gpus=ALL)
    for i, g in enumerate(ALL):
        want = estimate({**d, "gpu": g}).max_batch_size
        got = int(mb[i])
        assert (None if got >= MAX_BATCH_CAP else got) == want, g


def test_defaults_that_follow_the_gpu_in_max_batch_and_gpus_needed():
    d = {"model": "stabilityai/stable-diffusion-xl-base-1.0", "task": "denoise"}
    ids = ["nvidia-v100-sxm2-32gb", "nvidia-t4", "nvidia-a100-sxm4-40gb", "nvidia-rtx-4090"]
    fp16 = estimate({**d, "gpu": ids[0]})
    assert fp16.scenario.precision == "fp16"                  # V100: no bf16
    assert fp16.device_used_bytes > estimate({**d, "gpu": ids[0], "precision": "bf16"}) \
        .device_used_bytes                                    # the fp32 VAE decode
    mb = max_batch({**d, "gpu": ids[0]}, gpus=ids)
    for g in ids:
        assert int(mb[engine().index[g]]) == estimate({**d, "gpu": g}).max_batch_size, g
    for r in gpus_needed(d, ids):
        e = estimate({**d, "gpu": r["gpu"], "parallel": r["parallel"]})
        assert e.device_used_bytes == r["device_used_bytes"], r["gpu"]


def test_max_batch_fits_and_one_more_does_not():
    d = {"model": "bert-large-uncased", "task": "train", "seq_len": 512}
    mb = max_batch({**d, "gpu": "nvidia-rtx-4090"}, gpus=["nvidia-rtx-4090"])
    b = int(mb[engine().index["nvidia-rtx-4090"]])
    assert b > 1
    assert estimate({**d, "batch_size": b, "gpu": "nvidia-rtx-4090"}).fits
    assert not estimate({**d, "batch_size": b + 1, "gpu": "nvidia-rtx-4090"}).fits


def test_memory_grows_with_the_batch_curve():
    c = curve({"model": "gpt2", "task": "train", "gpu": "nvidia-h100-sxm5-80gb"},
              "batch_size", "1..32")
    used = [u for _, u in c]
    assert [v for v, _ in c] == list(range(1, 33))
    assert all(b >= a for a, b in zip(used, used[1:]))
    assert used[-1] > used[0]


def test_grid_values():
    assert parse_values("batch_size", "1..5") == [1, 2, 3, 4, 5]
    assert parse_values("batch_size", "1..256:x2") == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert parse_values("seq_len", "512..2048:+512") == [512, 1024, 1536, 2048]
    assert parse_values("precision", "bf16-mixed,fp32") == ["bf16-mixed", "fp32"]
    assert parse_values("checkpointing", "all") == ["none", "selective", "full"]
    assert parse_values("resolution", "512x512,768x1024") == [[512, 512], [768, 1024]]
    assert parse_values("gpu", "nvidia-h100-sxm5*") == ["nvidia-h100-sxm5-80gb",
                                                        "nvidia-h100-sxm5-96gb"]
    assert parse_values("gpu", "all") == ALL
    assert parse_vary(["batch_size=1..4", "gpu=all"]) == {"batch_size": "1..4", "gpu": "all"}


@pytest.mark.parametrize("items, msg", [
    (["batch_size=9..1"], "empty"), (["bogus=1"], "not a scenario key"),
    (["batch_size"], "KEY=VALUES"), (["gpu=nope*"], "no GPU id matches"),
    (["seq_len=1..4", "seq_len=5"], "given twice"), (["optimizer=all", "=3"], "no key"),
])
def test_bad_axes_are_one_clear_error(items, msg):
    from vramplan.errors import VramplanError
    with pytest.raises(VramplanError, match=msg):
        axes = parse_vary(items)
        for k, v in axes.items():
            parse_values(k, v)


def test_gpus_needed_is_the_fewest_that_fit():
    d = {"model": "meta-llama/Llama-3.1-8B", "task": "train", "seq_len": 2048,
         "checkpointing": "full"}
    ids = ["nvidia-rtx-4090", "nvidia-a100-sxm4-40gb", "nvidia-h100-sxm5-80gb"]
    rows = gpus_needed(d, ids)
    assert [r["gpu"] for r in rows] == sorted(ids, key=ALL.index)
    for r in rows:
        assert r["gpus"] is not None and r["gpus"] > 1       # 8B x 16 B/param > 80 GB
        e = estimate({**d, "gpu": r["gpu"], "parallel": r["parallel"]})
        assert e.fits and e.device_used_bytes == r["device_used_bytes"]
        half = gpus_needed(d, [r["gpu"]], counts=(r["gpus"] // 2,))[0]
        assert half["gpus"] is None                            # half as many do not fit


def test_results_are_numpy_arrays_by_point_and_gpu():
    r = sweep({"model": "gpt2", "task": "train"}, {"batch_size": "1..4", "gpu": SOME})
    assert r.used.shape == (4, len(SOME)) and r.used.dtype == np.int64
    assert (np.diff(r.used, axis=0) >= 0).all()


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "vramplan.cli", *args], capture_output=True,
                          text=True)


def test_cli_sweep_formats(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": "gpt2", "task": "train", "gpu": "nvidia-rtx-4090"}))
    out = _cli("sweep", "--scenario", str(f), "--vary", "batch_size=1..4", "--format", "json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert [p["batch_size"] for p in d["points"]] == [1, 2, 3, 4]
    e = estimate({"model": "gpt2", "task": "train", "gpu": "nvidia-rtx-4090", "batch_size": 3})
    assert d["points"][2]["device_used_bytes"] == e.device_used_bytes
    out = _cli("sweep", "--scenario", str(f), "--vary", "batch_size=1,2", "--vary",
               "gpu=nvidia-rtx-4090,nvidia-t4", "--format", "csv")
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("batch_size,gpu,peak_allocated_bytes") and len(lines) == 5
    out = _cli("sweep", "--scenario", str(f), "--vary", "batch_size=1..2", "--max-batch")
    assert out.returncode == 0 and "max batch" in out.stdout


@pytest.mark.parametrize("args", [["--vary", "batch_size=0..2:x2"], ["--vary", "nope=1"],
                                  [], ["--vary", "seq_len=4096"]])
def test_cli_sweep_bad_input_is_one_line(tmp_path, args):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": "gpt2", "task": "train", "gpu": "nvidia-rtx-4090"}))
    out = _cli("sweep", "--scenario", str(f), *args)
    assert out.returncode == 2
    assert out.stderr.startswith("vramplan: error: ") and out.stderr.count("\n") == 1
    assert "Traceback" not in out.stderr


def test_forked_workers_give_the_same_grid():
    d = {"model": "gpt2", "task": "train"}
    vary = {"batch_size": "1..6", "checkpointing": "all", "precision": "fp32,bf16-mixed",
            "gpu": SOME}
    one = sweep(d, vary, workers=1, with_max_batch=True)
    two = sweep(d, vary, workers=2, with_max_batch=True)
    assert one.points == two.points and one.errors == two.errors
    for a, b in zip((one.used, one.reserved, one.allocated, one.fits, one.max_batch),
                    (two.used, two.reserved, two.allocated, two.fits, two.max_batch)):
        assert (a == b).all()


def test_the_batch_axis_goes_as_one_array_where_the_workload_takes_it():
    r = sweep({"model": "gpt2", "task": "train"}, {"batch_size": "1..32", "gpu": "all"})
    assert r.vector_groups >= 1 and not r.fallbacks
    assert r.footprint_calls == r.vector_groups <= 3     # 32 batch values, one call per group
    # a CNN's batch-1 layout differs (vec.Divergent): batch 1 alone, 2..8 as one array
    c = sweep({"model": "torchvision/resnet18", "task": "train"}, {"batch_size": "1..8"},
              gpus=["nvidia-rtx-4090"])
    assert c.vector_groups == 1 and not c.fallbacks and c.footprint_calls == 3
    s = sweep({"model": "gpt2", "task": "serve"}, {"batch_size": "16,64"}, gpus=SOME)
    assert s.vector_groups == 0 and any("max_num_seqs" in k for k in s.fallbacks)


@pytest.mark.parametrize("d", [{"model": "torchvision/resnet50", "task": "train"},
                               {"model": "torchvision/vit_b_16", "task": "train",
                                "precision": "bf16-mixed"},
                               {"model": "stable-diffusion-v1-5/stable-diffusion-v1-5",
                                "task": "denoise", "precision": "fp16"}],
                         ids=["resnet50", "vit_b_16", "sd15"])
def test_max_batch_searches_in_lockstep_equal_estimate(d):
    # every GPU's search probes its own batches; each round's probes go as one array call
    mb = max_batch({**d, "gpu": ALL[0]}, gpus=ALL)
    for i, g in enumerate(ALL):
        got = int(mb[i])
        assert (None if got >= MAX_BATCH_CAP else got) == estimate({**d, "gpu": g}) \
            .max_batch_size, g


def test_cli_sweep_prints_a_summary_and_writes_every_point_with_o(tmp_path):
    """The README's grid (64 batch values x every GPU) printed 5,000+ lines; now one row per
    GPU, every point in the -o file (CSV: a header and a row per point)."""
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": "gpt2", "task": "train", "gpu": "nvidia-rtx-4090"}))
    grid = tmp_path / "grid.csv"
    gpus = "nvidia-rtx-4090,nvidia-t4,nvidia-a100-sxm4-80gb"
    out = _cli("sweep", "--scenario", str(f), "--vary", "batch_size=1..64", "--vary",
               f"gpu={gpus}", "-o", str(grid))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    # the limit column: usable less the safety margin, said on the line before the count
    assert lines[0].split()[:3] == ["gpu", "limit", "GiB"] and len(lines) == 2 + 3 + 3
    assert lines[-2].startswith("memory limit: usable memory - safety margin 0 (default")
    assert f"every point: {grid}" in lines[-1]
    rows = grid.read_text().strip().splitlines()
    assert rows[0].startswith("batch_size,gpu,") and len(rows) == 1 + 64 * 3
    r = sweep({"model": "gpt2", "task": "train"}, {"batch_size": "1..64", "gpu": gpus})
    for c, g in enumerate(r.gpus):          # the summary's count and largest batch, by hand
        fit = [p["batch_size"] for i, p in enumerate(r.points) if r.fits[i, c]]
        line = next(x for x in lines if x.startswith(g))
        assert f"{len(fit)} of 64" in line and line.split()[-2] == str(max(fit) if fit else "-")


# one plan per family and per task whose footprint reads a different set of device traits
DECLARED_CASES = [
    ({"model": "gpt2", "task": "train"}, 2),                       # legacy stack or not
    ({"model": "meta-llama/Llama-3.1-8B", "task": "qlora"}, 2),
    ({"model": "meta-llama/Llama-3.1-8B", "task": "generate"}, 2),
    ({"model": "meta-llama/Llama-3.1-8B", "task": "serve"}, None),  # usable memory: many
    ({"model": "meta-llama/Llama-3.1-8B", "task": "train",
      "parallel": {"gpus": 8, "tensor": 8}}, 2),
    ({"model": "resnet50", "task": "train"}, 2),
    ({"model": "resnet50", "task": "forward"}, 1),
    ({"model": "stabilityai/stable-diffusion-xl-base-1.0", "task": "denoise"}, 1),
    ({"task": "render"}, None),                                   # bandwidth: frames per s
    ({"task": "volume"}, 1),                                      # no network: no trait
    ({"task": "array"}, 1),
]


@pytest.mark.parametrize("d,groups", DECLARED_CASES, ids=lambda x: str(x)[:40])
def test_declared_device_traits_group_gpus_as_estimate_answers(d, groups):
    """The sweep groups GPUs by the traits each footprint declares it reads
    (workloads/dispatch.py DEVICE_TRAITS), not by walking stack frames: every GPU of the
    database gets the bytes and fit of `estimate` on it, and a training step still takes two
    footprints (pre-Ampere software stack or not)."""
    from vramplan.scenario import Scenario
    from vramplan.sweep.engine import spec_of
    eng = engine()
    sc = Scenario.from_dict(d)
    calls = eng.footprint_calls
    pt = eng.evaluate(sc)
    if groups is not None:
        assert eng.footprint_calls - calls == groups
    for i, dev in enumerate(eng.devices):
        if i in pt.errors:
            continue
        e = estimate(sc, dev, with_max_batch=False)        # the same plan on this GPU
        assert (int(pt.used[i]), bool(pt.fits[i])) == (e.device_used_bytes, e.fits), dev.id
    assert spec_of(sc) is None or spec_of(sc).family


def test_the_sweep_walks_no_stack_frames():
    """Before: sweep/engine.py attributed device reads by sys._getframe and keyed functions by
    __code__ (renaming runtime.legacy_stack would have changed the grouping silently)."""
    import inspect

    import vramplan.sweep.engine as eng_mod
    src = inspect.getsource(eng_mod)
    assert "_getframe" not in src and "__code__" not in src
