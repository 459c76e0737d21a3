"""Every image-key error (images, image_size) reads in Simplified Chinese
(locale/zh/images.toml): each raise site of scenario/multimodal_keys.py, the Qwen-VL resize
rule (catalog/qwen_resize.py) and the VLM tracer (measure/tracing/vlm.py) is triggered here
and its message must translate, with its values kept."""
import re
from pathlib import Path

import pytest

from vramplan import i18n
from vramplan.catalog.qwen_resize import smart_resize
from vramplan.errors import ScenarioError
from vramplan.scenario import Scenario

QWEN = "Qwen/Qwen2.5-VL-7B-Instruct"
APP = Path(__file__).resolve().parents[1] / "app" / "vramplan"
CASES = {
    "no vision tower": {"model": "Qwen/Qwen2.5-7B", "task": "generate", "images": 1},
    "size required": {"model": QWEN, "task": "generate", "images": 1},
    "size refused": {"model": "meta-llama/Llama-3.2-11B-Vision", "task": "generate",
                     "images": 1, "image_size": [560, 560]},
    "images required": {"model": QWEN, "task": "generate", "image_size": [448, 448]},
    "task": {"model": QWEN, "task": "serve", "images": 1},
    "count": {"model": QWEN, "task": "generate", "images": 65, "image_size": [448, 448]},
    "shape": {"model": QWEN, "task": "generate", "images": 1, "image_size": [448, 448, 3]},
    "side": {"model": QWEN, "task": "generate", "images": 1, "image_size": [448, 0]},
    "too many tokens": {"model": QWEN, "task": "generate", "images": 64,
                        "image_size": [4000, 4000], "seq_len": 1000},
    "seq_len room": {"model": QWEN, "task": "generate", "images": 4,
                     "image_size": [2000, 2000], "seq_len": 120000},
}


def _message(scenario) -> str:
    with pytest.raises(ScenarioError) as exc:
        Scenario.from_dict({"gpu": "H100", **scenario})
    assert exc.value.key in ("images", "image_size", "seq_len")
    return exc.value.message


def _chinese(text: str) -> bool:
    return re.search(r"[\u4e00-\u9fff]", text) is not None


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_image_key_error_reads_in_chinese(case):
    msg = _message(CASES[case])
    zh = i18n.translate_message(msg, "zh")
    assert zh != msg and _chinese(zh), msg
    for number in re.findall(r"\d(?:[\d,]*\d)?", msg):   # the values stay as they are
        assert number in zh, (number, zh)


def test_the_position_reason_inside_is_translated_too():
    """'(max_position_embeddings 128000; rope_scaling default already counted)' is the
    nested `why` of the positions message: it reads in Chinese inside the Chinese sentence."""
    zh = i18n.translate_message(_message(CASES["seq_len room"]), "zh")
    assert "已计入" in zh and "107,580" in zh


def test_resize_and_tracer_errors_read_in_chinese():
    from vramplan.measure.tracing.vlm import TRACED
    msgs = []
    with pytest.raises(ScenarioError) as exc:
        smart_resize(100, 30000, 28, 3136, 12_845_056)
    msgs.append(exc.value.message)
    msgs += [f"the whole model is traced with images for {', '.join(TRACED)}; not 'llava'",
             "a VLM with images is traced for train, forward or generate; not 'lora'",
             "seq_len 3 leaves no text beside 2 image(s)' start and end tokens"]
    for msg in msgs:
        assert _chinese(i18n.translate_message(msg, "zh")), msg


def test_every_image_key_raise_site_is_covered():
    """Count the ScenarioError('images' | 'image_size', ...) raise sites in the image modules;
    each distinct message above covers one, so a new raise site without a case (and an entry)
    fails here."""
    sites = 0
    for rel in ("scenario/multimodal_keys.py", "catalog/qwen_resize.py",
                "measure/tracing/vlm.py"):
        sites += len(re.findall(r'ScenarioError\(\s*"(?:images|image_size)"|'
                                r'ScenarioError\("images" if',
                                (APP / rel).read_text()))
    # multimodal_keys: 2 read_image_size + 4 check_images + 1 check_context (images);
    # qwen_resize: 1; vlm: 1 -> 9 sites; CASES add the generic range / task refusals
    assert sites == 9
    assert len(CASES) + 2 >= sites


def test_no_conflicting_entries():
    assert i18n.conflicts("zh") == []
