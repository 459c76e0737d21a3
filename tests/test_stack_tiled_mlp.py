"""Unsloth's long-context tiled MLP (issue 22: 'its long-context tiled MLP when stated'):
unsloth-zoo unsloth_zoo/tiled_mlp.py TiledMLP (PR #350, c9c7693d; read at ce232d6c) runs each
MLP under no_grad in tiles of h tokens and save_for_backward(x) only; its backward recomputes
one tile at a time. Option `tiled-mlp`, stack `unsloth` from 2025-11 only."""
import pytest

from vramplan.errors import ScenarioError
from vramplan.estimate import estimate

LORA = {"model": "meta-llama/Llama-3.1-8B", "task": "lora", "batch_size": 1,
        "seq_len": 32768, "gpu": "nvidia-h200-sxm-141gb", "stack": "unsloth"}


def _fwd(e) -> int:
    return e.footprint.phases["forward"]["activations"]


def test_the_mlp_keeps_only_its_input():
    plain, tiled = estimate(LORA), estimate({**LORA, "options": ["tiled-mlp"]})
    # Llama-3.1-8B: h 4096, f 14336, 32 layers, bf16 (p 2), T = 32768. LoRA on q_proj / v_proj:
    # gate / up / down are frozen, so the plain MLP saves gate, silu(gate) and up (the product
    # is the frozen down's input, not kept): 3 p f T bytes per layer. Tiled: x alone, p h T.
    per_layer = (3 * 2 * 14336 - 2 * 4096) * 32768          # 2,550,136,832 bytes
    assert _fwd(plain) - _fwd(tiled) == 32 * per_layer == 81_604_378_624
    assert any("'tiled-mlp'" in n and "c9c7693d" in n for n in tiled.notes)
    assert not any("'tiled-mlp'" in n for n in plain.notes)


@pytest.mark.parametrize("stack", ["hf", "pytorch", "unsloth@2025-10"])
def test_refused_without_unsloth_naming_options(stack):
    with pytest.raises(ScenarioError) as err:
        estimate({**LORA, "stack": stack, "options": ["tiled-mlp"]})
    assert "options" in str(err.value) and "unsloth" in str(err.value)


def test_the_form_offers_tiled_mlp_only_where_the_stack_has_it():
    """The page asks the core which options apply: tiled-mlp is offered for an unsloth plan
    from 2025-11 on and nowhere else (it was offered to every training plan, then refused)."""
    from vramplan.scenario import form

    def offered(stack):
        d = {"model": "meta-llama/Llama-3.1-8B", "task": "lora"}
        if stack is not None:
            d["stack"] = stack
        f = next(x for x in form.fields(d, "nvidia-h100-sxm5-80gb") if x.key == "options")
        return "tiled-mlp" in (f.choices or ())

    assert offered("unsloth") and offered("unsloth@2025-12")
    assert not any(offered(s) for s in (None, "hf", "unsloth@2025-10", "no-such-stack"))


def _block_backward(monkeypatch, d) -> float:
    """One block's backward temporaries as the estimate computes them (a spy on
    stage_activations.StageActivations._block_backward)."""
    from vramplan.workloads.transformer import footprint
    seen, real = [], footprint._Ctx._block_backward

    def spy(self, blk):
        seen.append(real(self, blk))
        return seen[-1]

    monkeypatch.setattr(footprint._Ctx, "_block_backward", spy)
    estimate(d, with_max_batch=False)
    return seen[-1]


def test_block_backward_holds_one_tiles_mlp(monkeypatch):
    """TiledMLP.backward recomputes one tile of min(h, T) = 4096 tokens at a time with grad
    enabled: its f-wide gradients (2 p f per token) and its MLP's saved tensors (q_proj /
    v_proj LoRA: gate, silu(gate), up = 3 p f per token) live for that tile only, not the
    f-wide gradients of all T = 32768 tokens. Per block backward:
    plain 2 * 2 * 14336 * 32768 = 1,879,048,192;
    tiled (2 + 3) * 2 * 14336 * 4096 = 587,202,560; difference 1,291,845,632."""
    plain = _block_backward(monkeypatch, LORA)
    tiled = _block_backward(monkeypatch, {**LORA, "options": ["tiled-mlp"]})
    f, T, tile = 14336, 32768, 4096
    assert plain - tiled == 2 * 2 * f * T - (2 + 3) * 2 * f * tile == 1_291_845_632


def test_tiles_recompute_unsloths_lora_mlp(monkeypatch):
    """With gate / up / down adapted Unsloth's LoRA_MLP runs inside each tile (TiledMLP wraps
    mlp._unsloth_forward, unsloth/models/llama.py patch_peft_model): a tile keeps X, e, g
    (p h + 2 p f per token) and its backward one f-wide gradient DW (p f). Per block backward:
    plain 2 * 14336 * 32768 = 939,524,096; tiled 2 * 14336 * 4096 + (2 * 4096 + 4 * 14336) *
    4096 = 117,440,512 + 268,435,456; difference 553,648,128."""
    d = {**LORA, "lora": {"targets": ["all-linear"]}}
    plain = _block_backward(monkeypatch, d)
    tiled = _block_backward(monkeypatch, {**d, "options": ["tiled-mlp"]})
    h, f, T, tile = 4096, 14336, 32768, 4096
    assert plain - tiled == 2 * f * T - (2 * f * tile + (2 * h + 4 * f) * tile) == 553_648_128
