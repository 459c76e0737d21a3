"""What walking the planner page as a planner showed wrong (helper page-QA, 2026-12-02), each
checked without a browser."""
from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

from vramplan.ui.state.i18n import speaking  # noqa: E402
from vramplan.ui.widgets.verdict import task_summary  # noqa: E402

# the GPUs-needed front's 32-GPU point for Llama-3.1-70B train, seq 8192, on H100s
LAYOUT_32 = {"gpus": 32, "data": 1, "tensor": 8, "pipeline": 2, "context": 2, "zero": 1}


def test_the_verdict_line_names_every_dimension_the_gpu_count_is_made_of():
    """1 x 8 x 2 x 2 = 32: the line read '32 GPUs (dp 1, tp 8, pp 2, ZeRO 1)', whose numbers
    multiply to 16."""
    sc = {"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 1,
          "seq_len": 8192, "precision": "bf16-mixed", "parallel": LAYOUT_32}
    assert "32 GPUs (dp 1, tp 8, pp 2, cp 2, ZeRO 1)" in task_summary(sc)
    no_cp = {**LAYOUT_32, "gpus": 16, "context": 1}
    assert "16 GPUs (dp 1, tp 8, pp 2, ZeRO 1)" in task_summary({**sc, "parallel": no_cp})
    with speaking("zh"):
        assert "32 张 GPU（dp 1、tp 8、pp 2、cp 2、ZeRO 1）" in task_summary(sc)
