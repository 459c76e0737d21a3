"""Gemma 2's tanh soft-capping (catalog/softcap.py; activations.softcap_scores_saved /
softcap_logits_saved). transformers 5.23.0 models/gemma2/modeling_gemma2.py:
eager_attention_forward divides the scores by `attn_logit_softcapping`, takes tanh and
multiplies back; Gemma2ForCausalLM.forward does the same to the logits with
`final_logit_softcapping`. The scalar divide and multiply save nothing; tanh saves its output
(derivatives.yaml: tanh_backward(grad, result)): one more score tensor per layer and one more
logits tensor, in the 16-bit dtype under autocast. Before, the config keys were not read and
neither tensor was counted (the differences below were 0)."""
import json

import pytest

from vramplan.catalog import get_model
from vramplan.catalog.hf_config import arch_from_config
from vramplan.errors import ScenarioError
from vramplan.estimate import estimate

GPU = "nvidia-h100-sxm5-80gb"


def _gemma2(**over):
    cfg = json.loads(json.dumps(get_model("google/gemma-2-2b").config))
    cfg.update(over)
    return cfg


def _peak(cfg, attention="eager"):
    sc = {"task": "train", "batch_size": 4, "seq_len": 1024, "precision": "bf16-mixed",
          "optimizer": "adamw", "attention": attention, "gpu": GPU, "architecture": cfg}
    return estimate(sc, with_max_batch=False).peak_allocated_bytes


def test_the_catalog_reads_the_softcapping_keys():
    a = arch_from_config(_gemma2())
    assert (a.attn_softcap, a.final_softcap) == (50.0, 30.0)   # gemma-2-2b config.json
    cfg = _gemma2()
    del cfg["attn_logit_softcapping"], cfg["final_logit_softcapping"]
    a = arch_from_config(cfg)                                  # Gemma2Config defaults
    assert (a.attn_softcap, a.final_softcap) == (50.0, 30.0)
    a = arch_from_config(_gemma2(attn_logit_softcapping=None, final_logit_softcapping=None))
    assert (a.attn_softcap, a.final_softcap) == (0.0, 0.0)
    a = arch_from_config(dict(get_model("google/gemma-3-1b-pt").config))
    assert (a.attn_softcap, a.final_softcap) == (0.0, 0.0)     # Gemma3TextConfig: None
    # LlamaAttention has no soft-capping: the keys do nothing there
    llama = {**dict(get_model("meta-llama/Llama-3.2-1B").config), "attn_logit_softcapping": 50.0}
    assert arch_from_config(llama).attn_softcap == 0.0


@pytest.mark.parametrize("bad", ["50", -1.0, 0, True])
def test_a_bad_softcap_names_the_key(bad):
    with pytest.raises(ScenarioError, match="attn_logit_softcapping"):
        arch_from_config(_gemma2(attn_logit_softcapping=bad))


def test_gemma2_training_keeps_the_tanh_outputs():
    """gemma-2-2b, 4 x 1024 tokens, bf16 autocast, eager (transformers' only Gemma 2 path).
    Attention: 26 layers x (4 x 8 heads x 1024 x 1024) scores x 2 B = 1,744,830,464 B.
    Logits: 4096 tokens x 256,000 x 2 B = 2,097,152,000 B, alive at the loss's backward."""
    off = _peak(_gemma2(attn_logit_softcapping=None, final_logit_softcapping=None))
    attn_only = _peak(_gemma2(final_logit_softcapping=None))
    assert attn_only - off == 26 * 4 * 8 * 1024 * 1024 * 2 == 1_744_830_464
    assert _peak(_gemma2()) - attn_only == 4096 * 256_000 * 2 == 2_097_152_000


def test_fused_attention_keeps_no_score_tensor():
    """SDPA / flash recompute the scores in backward: the attention cap adds nothing there."""
    assert _peak(_gemma2(), "sdpa") == _peak(_gemma2(attn_logit_softcapping=None), "sdpa")
