"""transformers' post-load cached blocks (issue 22: 'say when it applies'): from v4.50.0
(2025-03, caching_allocator_warmup) a quantised from_pretrained(device_map=...) leaves cached
blocks that a reserved reading taken right after loading includes until empty_cache. The
estimate says so on an `hf` plan with 4-bit or 8-bit weights from that change point on, and
adds no bytes (the amount depends on the tensor order and the scenario does not say how the
model reached the GPU: docs/stacks.md)."""
from vramplan.estimate import estimate

QLORA = {"model": "meta-llama/Llama-3.1-8B", "task": "qlora", "batch_size": 1,
         "seq_len": 2048, "gpu": "nvidia-rtx-4090"}
NAME = "post-load-cached-blocks"


def _said(e) -> bool:
    return any(f"'{NAME}'" in n for n in e.notes)


def _applied(e) -> bool:
    mechs = {m["name"]: m["applied"] for m in e.to_dict()["stack"]["mechanisms"]}
    return mechs.get(NAME, False)


def test_said_for_a_quantised_hf_load_from_2025_03_with_no_bytes():
    before, after = (estimate({**QLORA, "stack": s}) for s in ("hf@2025-02", "hf@2025-06"))
    assert not _said(before) and _said(after) and _applied(after)
    assert after.device_used_bytes == before.device_used_bytes
    assert "empty_cache" in next(n for n in after.notes if f"'{NAME}'" in n)


def test_not_said_where_it_does_not_apply():
    bf16 = estimate({"model": "meta-llama/Llama-3.1-8B", "task": "lora", "batch_size": 1,
                     "seq_len": 2048, "gpu": "nvidia-h100-sxm5-80gb", "stack": "hf@2025-06"})
    assert not _said(bf16)                       # 16-bit weights: the warm-up segment fills
    assert not _said(estimate({**QLORA, "stack": "pytorch"}))
