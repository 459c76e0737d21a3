"""Unsloth's LoRA kernels (issue 22: 'its fused / chunked cross-entropy and LoRA kernels'):
unsloth/kernels/fast_lora.py, in the first upload c3d6def6 (2023-11-30), what it saves
unchanged at 015bdef0. LoRA_MLP.forward: ctx.save_for_backward(gateA, gateB, upA, upB, downA,
downB, X, e, g); its backward makes DW = dY @ down^T, swiglu_DWf_DW_dfg_kernel(DW, e, g)
rewrites the three in place and dX is written into X. LoRA_QKV saves X once for q, k, v and
LoRA_W its input X, which the layer model already counts. Patched in when gate_proj, up_proj
and down_proj all carry adapters and lora_dropout is 0 (models/llama.py patch_peft_model)."""
import pytest

from vramplan.estimate import estimate
from vramplan.workloads import stack_mechanisms as mech
from vramplan.workloads.transformer import footprint

ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LORA = {"model": "meta-llama/Llama-3.1-8B", "task": "lora", "batch_size": 1, "seq_len": 4096,
        "gpu": "nvidia-h100-sxm5-80gb", "lora": {"targets": ALL}}
# Llama-3.1-8B: h 4096, f 14336, 32 layers, bf16 (p 2); 1 x 4096 tokens
H, F, LAYERS, P, T = 4096, 14336, 32, 2, 4096


def _est(d):
    return estimate(d, with_max_batch=False)


def _fwd(e) -> int:
    return e.footprint.phases["forward"]["activations"]


def _block_backward(monkeypatch, d) -> float:
    """One block's backward temporaries as the estimate computes them (a spy on
    stage_activations.StageActivations._block_backward)."""
    seen = []
    real = footprint._Ctx._block_backward

    def spy(self, blk):
        seen.append(real(self, blk))
        return seen[-1]

    monkeypatch.setattr(footprint._Ctx, "_block_backward", spy)
    _est(d)
    return seen[-1]


def test_lora_mlp_keeps_x_e_g_only():
    """PEFT on a frozen gated MLP, every linear adapted, keeps X (shared by gate and up), the
    gate output e, act(e), the up output g and the product h (down's input): p h + 4 p f per
    token per layer. LoRA_MLP keeps X, e, g: p h + 2 p f. 32 layers x 2 p f T fewer bytes:
    32 * 2 * 2 * 14336 * 4096 = 7,516,192,768. Unsloth before its first release (2023-11)
    has no change point yet and keeps what PEFT keeps."""
    old, new = _est({**LORA, "stack": "unsloth@2023-11"}), _est({**LORA, "stack": "unsloth"})
    assert _fwd(old) - _fwd(new) == LAYERS * 2 * P * F * T == 7_516_192_768
    assert _fwd(_est({**LORA, "stack": "hf"})) == _fwd(old)
    assert any("'unsloth-lora-kernels'" in n and "c3d6def6" in n for n in new.notes)
    assert not any("'unsloth-lora-kernels'" in n for n in old.notes)
    assert mech.lora_mlp_coeff(2, 2, F / H) == 2 + 4 * F / H


def test_lora_mlp_backward_holds_one_f_wide_gradient(monkeypatch):
    """The block backward's f-wide gradients: the product's two factors (2 p f T) in PEFT; one
    DW in LoRA_MLP (h, df, de written into DW, e, g): p f T = 2 * 14336 * 4096 =
    117,440,512 bytes less per block backward."""
    old = _block_backward(monkeypatch, {**LORA, "stack": "unsloth@2023-11"})
    new = _block_backward(monkeypatch, {**LORA, "stack": "unsloth@2023-12"})
    assert old - new == P * F * T == 117_440_512


@pytest.mark.parametrize("change", [
    {"lora": {"targets": ["q_proj", "v_proj"]}},                       # MLP not adapted
    {"lora": {"targets": ["q_proj", "v_proj", "gate_proj", "up_proj"]}},   # down not adapted
    {"lora": {"targets": ALL, "dropout": 0.05}},                      # PEFT's dropout path
    {"stack": "hf"},                                                  # not Unsloth
])
def test_not_patched(change):
    """Unsloth patches an MLP only when gate, up and down are all adapted and dropout is 0
    (patch_peft_model's condition); other stacks run PEFT's layers."""
    d = {**LORA, "stack": "unsloth", **change}
    e = _est(d)
    assert not any("'unsloth-lora-kernels'" in n for n in e.notes)
    ref = _est({**d, "stack": "unsloth@2023-11"})
    assert _fwd(e) == _fwd(ref)


def test_all_linear_is_patched_too():
    e = _est({**LORA, "stack": "unsloth", "lora": {"targets": ["all-linear"]}})
    assert _fwd(e) == _fwd(_est({**LORA, "stack": "unsloth"}))
