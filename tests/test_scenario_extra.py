"""Every workload-specific key refuses bad values with a message naming it."""
import pytest
from hypothesis import given, settings, strategies as st

from vramplan.errors import ScenarioError
from vramplan.scenario.keys import EXTRA_DEFAULTS, EXTRA_KEYS, KEY_TASKS, normalise_extra

BAD = {
    "render_targets": [5, [{"format": "rgb9"}], [{"format": "rgba8", "count": 0}], [{}],
                       [{"format": "rgba8", "scale": 0}], [{"format": "rgba8", "colour": 1}]],
    "msaa": [3, 0, "4", True, 32],
    "swapchain_images": [0, 9, 2.5],
    "frames_in_flight": [0, "2"],
    "texture_budget": ["lots", -1, "2 XB", [1], True],
    "geometry_budget": ["x"],
    "fps": [0, -60, 2000, "60", float("nan")],
    "overdraw": [0.5, 100],
    "texture_bytes_per_pixel": [-1],
    "channels": [0, 1.5, "3"],
    "dtype": ["float128", 4],
    "copies": [0, 100],
    "patch": [[64, 64], [64, 64, 0], "64"],
    "arrays": [{}, [{"shape": []}], [{"shape": [4], "dtype": "f4"}],
               [{"name": "a", "shape": [2]}, {"name": "a", "shape": [3]}], [{"shape": [-1]}]],
    "work_buffers": [[], {"fft": "maybe"}, {"solver": "lu"}, {"restart": 0}, {"pivot": 1}],
    "video": [3, {"codec": "vp8"}, {"streams": 0}, {"format": "rgb"}, {"mode": "stream"}],
    "speculative": [3, {}, {"method": "medusa"}, {"method": "eagle"},
                    {"method": "draft_model", "model": "no-such-model",
                     "num_speculative_tokens": 2},
                    {"method": "draft_model", "model": "bert-base-uncased",
                     "num_speculative_tokens": 2},
                    {"method": "eagle", "num_speculative_tokens": 0},
                    {"method": "eagle", "model": "x", "num_speculative_tokens": 2},
                    {"method": "mtp", "heads": 2}],
    "offload_layers": [-1, "2", 1.5],
    "offload_experts": [-1, True],
    "images": [-1, 65, "2", 1.5],
    "image_size": [448, [448], [448, 448, 3], [0, 448], "448 by 448", [448, "x"]],
}


def test_every_key_has_bad_cases():
    assert set(BAD) == set(EXTRA_KEYS)


@pytest.mark.parametrize("key,value", [(k, v) for k, vs in BAD.items() for v in vs])
def test_bad_value_names_key(key, value):
    with pytest.raises(ScenarioError) as ei:
        EXTRA_KEYS[key](value)
    assert ei.value.key.startswith(key)
    assert key in str(ei.value)


def test_defaults_validate_and_round_trip():
    for task in ("render", "volume", "array"):
        d = EXTRA_DEFAULTS(task)
        for k, v in d.items():
            if v is not None:
                assert EXTRA_KEYS[k](v) == v, k


def test_key_refused_for_other_task():
    with pytest.raises(ScenarioError, match="msaa"):
        normalise_extra({"msaa": 4}, "array")


def test_sizes_and_bool_fft():
    assert EXTRA_KEYS["texture_budget"]("2 GiB") == 2 * 2**30
    assert EXTRA_KEYS["work_buffers"]({"fft": True})["fft"] == "out-of-place"
    assert all(k in KEY_TASKS for k in EXTRA_KEYS)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=-10**6, max_value=0))
def test_nonpositive_channels_refused(n):
    with pytest.raises(ScenarioError, match="channels"):
        EXTRA_KEYS["channels"](n)
