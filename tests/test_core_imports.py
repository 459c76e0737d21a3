"""The layering rule: the core (units .. estimate, every workload loaded by an estimate of each
family) imports no torch, altair, ipywidgets or pynvml, so the planner and CLI start fast and run
where those are missing; trace/live import them only inside functions."""
import subprocess
import sys

CODE = """
import sys
import vramplan.cli, vramplan.estimate, vramplan.measure.trace, vramplan.measure.live
import vramplan.measure.calibration
from vramplan.estimate import estimate
for d in ({'model': 'gpt2', 'task': 'train'}, {'model': 'torchvision/resnet50', 'task': 'train'},
          {'model': 'stable-diffusion-v1-5/stable-diffusion-v1-5', 'task': 'denoise'},
          {'task': 'render'}, {'task': 'volume'}, {'task': 'array'}):
    estimate({**d, 'gpu': 'nvidia-l4'})
heavy = {'torch', 'altair', 'ipywidgets', 'pynvml'} & set(sys.modules)
assert not heavy, heavy
"""


def test_core_imports_no_torch_altair_widgets_or_nvml():
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
