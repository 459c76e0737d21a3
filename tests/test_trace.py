"""trace: fake-mode counting agrees with real CPU execution; CUDA emulation; result shape; CLI.

Shapes are tiny so the file runs in well under a minute on two CPUs.
"""
import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from vramplan.measure import trace as T  # noqa: E402
from vramplan.vocab import OVERHEAD_COMPONENTS  # noqa: E402

LLAMA = {"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 256,
         "vocab_size": 512, "max_position_embeddings": 256}
GPT2 = {"model_type": "gpt2", "n_embd": 128, "n_layer": 2, "n_head": 4, "vocab_size": 512,
        "n_positions": 256, "resid_pdrop": 0.1, "attn_pdrop": 0.1, "embd_pdrop": 0.1}
BERT = {"model_type": "bert", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 512, "vocab_size": 512, "max_position_embeddings": 256,
        "type_vocab_size": 2}


def scn(arch, **kw):
    d = {"architecture": arch, "task": "train", "batch_size": 2, "seq_len": 64,
         "precision": "fp32", "optimizer": "adamw", "attention": "eager"}
    d.update(kw)
    return d


# six scenarios of the issue: fake (CPU kernels) == real CPU execution within 2 %
AGREE = [
    ("decoder-fp32-dropout", scn(GPT2), None),
    ("decoder-fp32-dropout-full-ckpt", scn(GPT2, checkpointing="full"), None),
    ("encoder-forward", scn(BERT, task="forward", optimizer="none"), None),
    ("vit-train", {"task": "train", "batch_size": 2, "precision": "fp32", "optimizer": "adamw",
                   "attention": "eager", "model": "torchvision/vit_b_16"},
     ("vit", {"hidden": 64, "layers": 2, "heads": 4, "patch": 8, "resolution": [32, 32],
              "num_classes": 10})),
    ("resnet-train", {"task": "train", "batch_size": 2, "precision": "fp32",
                      "optimizer": "sgd-momentum", "model": "torchvision/resnet50"},
     ("cnn", {"depths": [1, 1, 1, 1], "block": "bottleneck", "widths": [8, 16, 32, 64],
              "num_classes": 10, "resolution": [64, 64]})),
    ("decoder-bf16-mixed", scn(LLAMA, precision="bf16-mixed", attention="sdpa"), None),
]


def _trace(sc, spec, **kw):
    return T.trace(sc, spec=spec, timeline=False, **kw)


@pytest.mark.parametrize("name,sc,spec", AGREE, ids=[a[0] for a in AGREE])
def test_fake_matches_cpu_execution(name, sc, spec):
    fake = _trace(sc, spec, mode="fake", kernels="cpu")
    real = _trace(sc, spec, mode="cpu", kernels="cpu")
    assert fake.peak_allocated_bytes > 0
    err = abs(fake.peak_allocated_bytes - real.peak_allocated_bytes) / real.peak_allocated_bytes
    assert err <= 0.02, (name, fake.peak_allocated_bytes, real.peak_allocated_bytes)
    # in practice they agree to the byte, breakdown included
    assert fake.components == real.components
    assert fake.peak_phase == real.peak_phase


def test_components_sum_to_peak_and_shape():
    r = T.trace(scn(GPT2), timeline=True)
    assert r.source == "trace"
    live = {k: v for k, v in r.components.items() if k not in OVERHEAD_COMPONENTS}
    assert sum(live.values()) == r.peak_allocated_bytes
    assert sum(r.by_module.values()) == r.peak_allocated_bytes
    assert r.peak_allocated_bytes % 512 == 0          # CUDA allocator rounding
    assert r.peak_reserved_bytes >= r.peak_allocated_bytes
    d = r.to_dict(timeline=True)
    assert d["source"] == "trace"
    pg = d["per_gpu"]
    for k in ("weights", "gradients", "optimizer_states", "activations", "kv_cache", "temporary",
              "cuda_context", "allocator_slack"):
        assert isinstance(pg["components"][k], int)
    assert pg["peak_allocated_bytes"] == r.peak_allocated_bytes
    assert d["trace"]["peak_phase"] in ("forward", "backward", "optimizer-step")
    assert max(e[2] for e in d["trace"]["timeline"]) == r.peak_allocated_bytes
    json.dumps(d)


def test_weights_and_states_by_hand():
    """fp32 AdamW: weights 4 B/param, states 8 B/param, each tensor rounded to 512 B."""
    r = _trace(scn(LLAMA, attention="sdpa"), None)
    from vramplan.catalog.hf_config import arch_from_config
    from vramplan.measure.tracing.transformer import CausalLM
    m = CausalLM(arch_from_config(LLAMA))
    want = sum(-(-p.numel() * 4 // 512) * 512 for p in m.parameters())
    assert r.components["weights"] == want + 512  # + the RoPE inv_freq buffer
    assert r.phases["optimizer-step"]["components"]["optimizer_states"] == 2 * want


def test_second_step_holds_optimizer_state():
    sc = scn(LLAMA, attention="eager", seq_len=256, batch_size=4)
    one = _trace(sc, None, steps=1, kernels="cpu")
    two = _trace(sc, None, steps=2, kernels="cpu")
    assert two.peak_step == 2
    assert two.peak_allocated_bytes > one.peak_allocated_bytes


def test_cuda_emulation_dropout_mask_and_sdpa():
    cpu = _trace(scn(GPT2, attention="sdpa"), None, kernels="cpu")
    cuda = _trace(scn(GPT2, attention="sdpa"), None, kernels="cuda")
    assert cuda.rewrites.get("dropout->native_dropout", 0) > 0
    assert cuda.rewrites.get("sdpa-dropout->fused", 0) > 0
    # CUDA: 1-byte masks and no s x s dropout path: fewer activation bytes at the peak
    assert cuda.phases["forward"]["components"]["activations"] < \
        cpu.phases["forward"]["components"]["activations"]


def test_cuda_emulation_foreach_adam_temporary():
    cpu = _trace(scn(LLAMA, attention="sdpa", seq_len=8, batch_size=1), None, kernels="cpu")
    cuda = _trace(scn(LLAMA, attention="sdpa", seq_len=8, batch_size=1), None, kernels="cuda")
    w = cuda.components["weights"]
    # foreach: a whole-model temporary (sqrt of exp_avg_sq) at the optimizer step
    assert cuda.phases["optimizer-step"]["bytes"] - cpu.phases["optimizer-step"]["bytes"] > 0.5 * w


def test_cuda_autocast_fp32_ops():
    from vramplan.measure.tracing.emulation import CudaKernels
    x = torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.nn.functional.linear(x, torch.randn(8, 8))
        assert torch.softmax(y, -1).dtype == torch.bfloat16          # CPU autocast
        with CudaKernels():
            assert torch.softmax(y, -1).dtype == torch.float32       # CUDA autocast
            assert torch.nn.functional.layer_norm(y, (8,)).dtype == torch.float32
            assert y.pow(2).dtype == torch.float32
            assert y.sum().dtype == torch.float32


def test_checkpointing_lowers_activations():
    """selective is torchtitan's op-level SAC (tracing/recompute.py): it keeps aten.mm and SDPA
    outputs, so a Llama block (no biases) keeps some; a GPT-2 block's biased linears run addmm,
    which the policy does not save: there selective keeps what full does."""
    def f(arch, ckpt, **kw):
        r = _trace(scn(arch, seq_len=128, checkpointing=ckpt, **kw), None)
        return r.phases["forward"]["bytes"]
    assert f(LLAMA, "full", attention="sdpa") < f(LLAMA, "selective", attention="sdpa") \
        < f(LLAMA, "none", attention="sdpa")
    assert f(GPT2, "full") == f(GPT2, "selective") < f(GPT2, "none")


def test_generate_kv_cache_exact():
    r = _trace(scn(LLAMA, task="generate", optimizer="none", seq_len=32, new_tokens=16,
                   precision="bf16"), None)
    # 2 (k, v) x layers x batch x kv_heads x (32 + 16) x head_dim x 2 bytes
    assert r.components["kv_cache"] == 2 * 2 * (2 * 2 * 48 * 32 * 2)
    assert r.peak_phase in ("prefill", "decode")


def test_lora_trains_only_adapters():
    full = _trace(scn(LLAMA, attention="sdpa"), None)
    lora = _trace(scn(LLAMA, task="lora", attention="sdpa",
                      lora={"rank": 4, "alpha": 8, "targets": ["q_proj", "v_proj"]}), None)
    assert lora.components.get("optimizer_states", 0) < full.components["optimizer_states"] / 10


def test_trace_module_user_module():
    def make():
        return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
    x, y = torch.randn(16, 64), torch.randint(0, 4, (16,))
    lf = torch.nn.functional.cross_entropy
    fake = T.trace_module(make, (x,), lf, (y,), mode="fake", kernels="cpu")
    real = T.trace_module(make(), (x,), lf, (y,), mode="cpu", kernels="cpu")
    assert fake.peak_allocated_bytes == real.peak_allocated_bytes
    assert fake.components["optimizer_states"] > 0


def test_import_does_not_import_torch():
    code = "import sys, vramplan.measure.trace; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unbuildable_family_names_the_families():
    from vramplan.catalog import get_model
    from vramplan.errors import ScenarioError
    from vramplan.measure.buildable import fit
    with pytest.raises(ScenarioError, match="decoder.*encoder.*vit.*cnn.*unet"):
        fit(get_model("black-forest-labs/FLUX.1-dev"))


def test_cli_trace_json(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(scn(LLAMA, attention="sdpa")))
    from vramplan.cli import main
    import io
    import contextlib
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["trace", "--scenario", str(f), "--format", "json"])
    assert rc == 0
    d = json.loads(buf.getvalue())
    assert d["source"] == "trace" and d["per_gpu"]["peak_allocated_bytes"] > 0


def test_cli_trace_unknown_family_exits_2(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": "t5-small", "task": "train", "batch_size": 1,
                             "seq_len": 8, "target_len": 8}))
    from vramplan.cli import main
    assert main(["trace", "--scenario", str(f)]) == 2
    err = capsys.readouterr().err
    assert "decoder" in err and "Traceback" not in err
