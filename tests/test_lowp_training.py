"""MXFP8 / NVFP4 training (precisions mxfp8-train, nvfp4-train): the bytes of a Llama-3-8B
layer by hand, from torchao's training linears (pytorch/ao@36027d8: mxfp8_linear.py `mx_mm`
saves the bf16 input and weight; nvfp4_linear.py `nvfp4_mm_triton` saves the input's NVFP4
codes + scales and the weight's transposed NVFP4 copy) and torchtitan's NVFP4 recipe (the last
ceil(0.15 x 32) = 5 blocks stay bf16)."""
import pytest

from vramplan import precision as P
from vramplan.errors import ScenarioError
from vramplan.scenario import Scenario
from vramplan.workloads.dispatch import footprint
from vramplan.workloads.transformer import lowp_training as lowp

LLAMA = "meta-llama/Meta-Llama-3-8B"
MX, NV = P.LOW_PRECISION_TRAINING["mxfp8-train"], P.LOW_PRECISION_TRAINING["nvfp4-train"]


def fp(**kw):
    d = dict(model=LLAMA, task="train", batch_size=1, seq_len=2048, attention="flash",
             optimizer="adamw", checkpointing="none")
    d.update(kw)
    sc = Scenario.from_dict(d)
    return sc, footprint(sc, sc.spec, None)


def test_scale_bytes_of_one_gate_projection():
    n = 4096 * 14336                                  # 58,720,256 values
    # MXFP8: 1 B e4m3 + one e8m0 byte per 32: 58,720,256 + 1,835,008
    assert MX.cast_bytes(n) == 60_555_264
    # NVFP4: 0.5 B e2m1 + one e4m3 byte per 16 + one fp32 per tensor
    assert NV.cast_bytes(n) == 29_360_128 + 3_670_016 + 4 == 33_030_148


def test_llama3_8b_layer_linears_and_weight_copies():
    arch = Scenario.from_dict(dict(model=LLAMA, task="train")).spec.arch
    shapes = lowp.linear_shapes(arch)
    # q 4096x4096, k and v 4096x1024, o 4096x4096, gate and up 4096x14336, down 14336x4096
    assert sum(i * o for i, o in shapes) == 2 * 4096 * 4096 + 2 * 4096 * 1024 + \
        3 * 4096 * 14336 == 218_103_808
    assert lowp.converted_layers(arch, NV) == 27 and lowp.converted_layers(arch, MX) == 32
    # NVFP4 transposed copies of one layer: 218,103,808 x 0.5625 + 7 fp32 amaxes
    assert lowp.saved_weight_bytes(arch, NV, "full", 32, 1) == 122_683_392 + 28
    assert lowp.saved_weight_bytes(arch, MX, "none", 32, 1) == 0


def test_nvfp4_train_activations_by_hand():
    _, bf = fp(precision="bf16")
    _, nv = fp(precision="nvfp4-train")
    # per token of a converted layer: bf16 tensors only the linears kept, 2 B x (4096 attention
    # input + 4096 context into o + 4096 MLP input + 14336 gated product) = 53,248 B, replaced
    # by NVFP4 copies (0.5 B + 1/16 B a value): wq, wk, wv, w1, w3 each 4096 x 0.5625 = 2,304,
    # wo 2,304, w2 14336 x 0.5625 = 8,064 -> 5 x 2,304 + 2,304 + 8,064 = 21,888 B
    per_token = 21_888 - 53_248
    assert per_token == -31_360
    copies = 27 * 122_683_420
    want = 27 * per_token * 2048 + copies
    assert want == 1_578_369_780
    for ph in ("forward", "backward"):
        assert nv.phases[ph]["activations"] - bf.phases[ph]["activations"] == want
    assert nv.components["weights"] == bf.components["weights"]
    assert nv.components["optimizer_states"] == bf.components["optimizer_states"]


def test_nvfp4_under_full_checkpointing_holds_one_blocks_copies():
    _, bf = fp(precision="bf16", checkpointing="full")
    _, nv = fp(precision="nvfp4-train", checkpointing="full")
    # the recomputed block: its weight copies, its saved inputs (the mean block: 27/32 converted)
    want = 122_683_420 - 31_360 * 2048 * 27 // 32
    assert want == 68_493_340
    assert nv.phases["forward"]["activations"] - bf.phases["forward"]["activations"] == want


def test_mxfp8_keeps_bf16_saved_tensors_and_casts_in_backward():
    _, bf = fp(precision="bf16")
    _, mx = fp(precision="mxfp8-train")
    assert mx.phases["forward"] == bf.phases["forward"]
    arch = Scenario.from_dict(dict(model=LLAMA, task="train")).spec.arch
    # widest backward: gate/up (4096 -> 14336) at 2048 tokens: grad_output dim0 + dim1
    # 2 x 30,277,632, the weight along dim1 60,555,264, the input along dim1 8,650,752
    assert lowp.cast_temporary_bytes(arch, MX, 2048, 1) == \
        2 * 30_277_632 + 60_555_264 + 8_650_752 == 129_761_280
    # NVFP4: only grad_output's row and column codes (2 x 2048 x 14336 x 0.5625 + 2 amaxes)
    assert lowp.cast_temporary_bytes(arch, NV, 2048, 1) == 2 * (16_515_072 + 4)


@pytest.mark.parametrize("d, key", [
    (dict(model=LLAMA, task="lora", precision="nvfp4-train"), "precision"),
    (dict(model=LLAMA, task="generate", precision="mxfp8-train"), "precision"),
    (dict(model=LLAMA, task="train", precision="mxfp8-train", options=["float8-linears"]),
     "options"),
    (dict(model="google/vit-base-patch16-224", task="train", precision="nvfp4-train"),
     "precision"),
])
def test_refused_outside_transformer_train(d, key):
    """Refused naming the key: by the scenario (the task's precisions leave the training
    recipes out) or by the footprint (a family or an option that cannot take them)."""
    with pytest.raises(ScenarioError) as e:
        sc = Scenario.from_dict(d)
        footprint(sc, sc.spec, None)
    assert e.value.key == key


def test_matmul_rate_is_the_format_s():
    from vramplan.hardware import default_db
    from vramplan.hardware.capabilities import compute_rate
    db = default_db()
    b200, h100 = db.get("nvidia-b200-sxm"), db.get("nvidia-h100-sxm5-80gb")
    assert compute_rate(b200, "mxfp8-train")[1] == "fp8"
    assert compute_rate(b200, "nvfp4-train")[1] == "fp4"
    assert compute_rate(h100, "nvfp4-train")[1] == "fp8"      # no fp4 figure: its fp8 rate
