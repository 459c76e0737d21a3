"""Video denoisers train on every latent frame: `lora` / `train` count the same image tokens
as one `denoise` call (before, only one latent frame's patches were counted).

Hand model (workloads/diffusion/footprint.py `_training`, DiT branch, SDPA so no score
matrices): per layer b x n x (12 hidden + 3 ffn) x e bytes saved; without checkpointing all
layers keep it and the backward works on 2 more layers' worth; under checkpointing each
layer keeps its input (b x n x hidden x e).
"""
from vramplan.scenario import Scenario
from vramplan.workloads.dispatch import footprint
from vramplan.workloads.diffusion.footprint import image_tokens


def fp(**kw):
    sc = Scenario.from_dict(kw)
    return footprint(sc, sc.spec, None)


WAN = "Wan-AI/Wan2.1-T2V-1.3B-Diffusers"


def test_wan_lora_counts_all_21_latent_frames():
    # 81 frames 480 x 832: Wan VAE 4x temporal, 8x spatial -> latent (81-1)/4+1 = 21 x 60 x 104;
    # 1 x 2 x 2 patches -> 21 x 30 x 52 = 32,760 tokens (one frame: 1,560)
    f = fp(model=WAN, task="lora", frames=81, resolution=[480, 832], batch_size=1,
           checkpointing="none", attention="sdpa", precision="bf16")
    n = 21 * 30 * 52
    assert n == 32_760
    per_layer = 1 * n * (12 * 1536 + 3 * 8960) * 2          # 2,968,842,240 B
    assert per_layer == 2_968_842_240
    assert f.phases["backward"]["activations"] == 30 * per_layer + 2 * per_layer
    assert f.phases["backward"]["activations"] == 95_002_951_680   # old code: 4,523,950,080


def test_wan_checkpointed_keeps_layer_inputs_of_all_frames():
    f = fp(model=WAN, task="lora", frames=81, resolution=[480, 832], batch_size=1,
           checkpointing="full", attention="sdpa", precision="bf16")
    n = 32_760
    saved = 30 * n * 1536 * 2                                 # 3,019,161,600 B
    work = 2 * n * (12 * 1536 + 3 * 8960) * 2
    assert f.phases["backward"]["activations"] == saved + work == 8_956_846_080


def test_cogvideox_train_tokens_equal_denoise_tokens():
    # CogVideoX-2b, 49 frames 480 x 720: latent 13 x 60 x 90, 2 x 2 patches -> 13 x 30 x 45 =
    # 17,550 video tokens + 226 text tokens in the joint sequence
    sc = Scenario.from_dict(dict(model="THUDM/CogVideoX-2b", task="train", frames=49,
                                 resolution=[480, 720], batch_size=1, checkpointing="full",
                                 attention="sdpa", precision="bf16"))
    den = sc.spec.config["components"]["transformer"]
    assert image_tokens(sc.spec.config, den, 60, 90, 13) == 17_550
    f = footprint(sc, sc.spec, None)
    n = 17_550 + 226
    hd, ffn, layers = den["hidden"], den["ffn"], den["layers"]
    assert (hd, ffn, layers) == (1920, 7680, 30)
    want = layers * n * hd * 2 + 2 * n * (12 * hd + 3 * ffn) * 2
    assert f.phases["backward"]["activations"] == want == 5_324_267_520


def test_training_activations_grow_with_frames():
    a = fp(model=WAN, task="lora", frames=17, resolution=[480, 832], checkpointing="none")
    b = fp(model=WAN, task="lora", frames=81, resolution=[480, 832], checkpointing="none")
    # latent frames 5 -> 21: the saved activations scale with the token count
    assert b.phases["backward"]["activations"] * 5 == a.phases["backward"]["activations"] * 21
