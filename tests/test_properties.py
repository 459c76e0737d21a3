"""Monotonicity and ordering properties of the transformer estimate."""
from hypothesis import given, settings, strategies as st

from vramplan.estimate import estimate

GPU = "nvidia-h100-sxm5-80gb"
MODELS = ["meta-llama/Llama-3.2-3B-Instruct", "meta-llama/Llama-2-7b-hf", "bert-large-uncased",
          "facebook/opt-350m"]
TASKS = ["train", "lora", "forward", "generate"]


def fig(**kw):
    d = {"gpu": GPU}
    d.update(kw)
    return estimate(d, with_max_batch=False)


common = dict(model=st.sampled_from(MODELS), b=st.integers(1, 16), s=st.integers(16, 440),
              ckpt=st.sampled_from(["none", "selective", "full"]),
              att=st.sampled_from(["eager", "sdpa", "flash"]),
              prec=st.sampled_from(["fp32", "bf16", "bf16-mixed", "fp16"]))


@settings(max_examples=40, deadline=None)
@given(task=st.sampled_from(TASKS), **common)
def test_monotone_in_batch_and_seq(task, model, b, s, ckpt, att, prec):
    if task == "generate" and model == "bert-large-uncased":
        task = "forward"
    base = dict(model=model, task=task, seq_len=s, attention=att, precision=prec)
    if task in ("train", "lora"):
        base["checkpointing"] = ckpt
    e1 = fig(batch_size=b, **base)
    e2 = fig(batch_size=b + 1, **base)
    assert e2.peak_allocated_bytes >= e1.peak_allocated_bytes
    e3 = fig(batch_size=b, **{**base, "seq_len": s + 64})
    assert e3.peak_allocated_bytes >= e1.peak_allocated_bytes
    for e in (e1, e2, e3):
        assert sum(e.footprint.components.values()) == e.peak_allocated_bytes
        assert e.peak_reserved_bytes >= e.peak_allocated_bytes
        assert e.device_used_bytes >= e.peak_reserved_bytes


@settings(max_examples=20, deadline=None)
@given(b=st.integers(1, 8), s=st.integers(64, 4096), zero=st.integers(0, 2))
def test_zero_never_raises_model_states(b, s, zero):
    base = dict(model="meta-llama/Llama-2-7b-hf", task="train", batch_size=b, seq_len=s,
                precision="bf16-mixed", optimizer="adamw")
    lo = fig(parallel={"gpus": 8, "data": 8, "zero": zero + 1}, **base)
    hi = fig(parallel={"gpus": 8, "data": 8, "zero": zero}, **base)
    for ph in ("backward",):
        ms = lambda e: sum(e.footprint.phases[ph][k] for k in  # noqa: E731
                           ("weights", "gradients", "optimizer_states"))
        assert ms(lo) <= ms(hi)


@settings(max_examples=20, deadline=None)
@given(b=st.integers(1, 8), s=st.integers(64, 4096), r=st.sampled_from([8, 16, 64]))
def test_lora_le_full_finetune(b, s, r):
    base = dict(model="meta-llama/Llama-2-7b-hf", batch_size=b, seq_len=s, precision="bf16",
                optimizer="adamw", attention="sdpa")
    full = fig(task="train", **base)
    lora = fig(task="lora", lora={"rank": r, "targets": ["q_proj", "v_proj"]}, **base)
    assert lora.peak_allocated_bytes <= full.peak_allocated_bytes


def test_model_size_monotone():
    small = fig(architecture={"params": 1e9}, task="train", precision="bf16")
    big = fig(architecture={"params": 7e9}, task="train", precision="bf16")
    assert big.peak_allocated_bytes > small.peak_allocated_bytes


def test_weight_formats_order():
    w = {p: fig(model="meta-llama/Llama-2-7b-hf", task="load", precision=p).components["weights"]
         for p in ("int4", "int8", "bf16")}
    assert w["int4"] <= w["int8"] <= w["bf16"]
