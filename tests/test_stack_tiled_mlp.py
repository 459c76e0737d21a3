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
