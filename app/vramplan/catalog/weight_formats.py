"""A checkpoint's shipped weight format, read from config.json's `quantization_config`.

`weight_format(quantization_config)` gives a `WeightFormat`: the precision it is offered as
(vocab.PRECISIONS), the bytes one quantised parameter takes with its scales, and which parameter
groups stay unquantised. Formats and their storage (each from the loader that reads them):

* `mxfp4` (transformers `Mxfp4HfQuantizer`, integrations/mxfp4.py; gpt-oss): OCP MX v1.0, 4-bit
  E2M1 values + one E8M0 scale per 32 -> 4.25 bits.
* `fp8` (transformers `FineGrainedFP8Config`, DeepSeek-V3 / Qwen3-FP8 checkpoints): e4m3 values and
  one fp32 `weight_scale_inv` per `weight_block_size` block (128 x 128: 1 + 4/16384 B); without a
  block size one fp32 scale per tensor.
* `modelopt` (NVIDIA TensorRT Model Optimizer): `quant_algo` NVFP4 (4-bit + fp8 scale per
  `group_size` 16 + fp32 per-tensor scale: 4.5 bits) or FP8 (per-tensor scale).
* `compressed-tensors` (llm-compressor / vLLM): `config_groups.*.weights` num_bits, type
  (int / float), strategy (tensor / channel / group / block) and group_size; format
  `nvfp4-pack-quantized` is NVFP4.
* `gptq` / `awq` (auto-gptq / AutoAWQ packing): `bits`-bit values packed in int32, one fp16 scale
  and one `bits`-bit zero point per `group_size` inputs of an output row (group_size -1: per row).
* `bitsandbytes` (bitsandbytes Linear4bit / Linear8bitLt): `load_in_4bit` nf4 / fp4 with an fp32
  absmax per 64 values, or with `bnb_4bit_use_double_quant` an int8 absmax per 64 and an fp32
  scale per 256 absmax values; `load_in_8bit` int8 + one fp32 scale per output row (SCB).

What stays in 16 bit: embeddings and norms always (not Linear layers), biases, lm_head (every
quantizer skips it: transformers `get_keys_to_not_convert`), and the modules the config lists
(`modules_to_not_convert`, bitsandbytes `llm_int8_skip_modules`, compressed-tensors `ignore`),
mapped onto the parameter groups of `TransformerArch.param_groups`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ScenarioError

# parameter groups a module pattern names (TransformerArch.param_groups keys)
GROUPS = ("attention", "mlp", "experts", "router", "embeddings", "lm_head")
# substrings of module patterns -> the groups they keep unquantised (checked in order)
_PATTERN_GROUPS = (
    ("lm_head", ("lm_head",)), ("embed", ("embeddings",)), ("router", ("router",)),
    ("self_attn", ("attention",)), ("attention", ("attention",)),
    ("attn", ("attention",)), ("mamba", ("attention",)), ("linear_attn", ("attention",)),
    ("mixer", ("attention",)), ("shared_expert", ("mlp",)), ("experts", ("experts",)),
    ("mlp", ("mlp", "experts", "router")), ("feed_forward", ("mlp", "experts", "router")),
)


@dataclass(frozen=True)
class WeightFormat:
    """A checkpoint's stored weight format. `bytes_per_param(fan_in)` is per quantised
    parameter, scales included; `kept` the parameter groups left in 16 bit."""

    precision: str           # the scenario precision it is offered as
    method: str              # quantization_config.quant_method
    bits: float              # bits of one value (4, 8)
    group: int               # values per scale (0: one scale per output row, -1: per tensor)
    scale_bytes: float       # bytes of one group's scale(s) and zero point
    kept: frozenset = frozenset({"embeddings", "lm_head"})
    label: str = ""

    def bytes_per_param(self, fan_in: int = 4096) -> float:
        if self.group > 0:
            per = self.scale_bytes / self.group
        elif self.group == 0:
            per = self.scale_bytes / max(1, fan_in)
        else:
            per = 0.0
        return self.bits / 8 + per

    def describe(self, fan_in: int = 4096) -> str:
        kept = ", ".join(g for g in GROUPS if g in self.kept)
        return (f"{self.label} ({self.bytes_per_param(fan_in) * 8:.3g} bits per weight with "
                f"scales); kept in 16 bit: {kept or 'none'}, norms and biases")


def _bad(key: str, msg: str) -> ScenarioError:
    return ScenarioError("architecture", f"'quantization_config.{key}' {msg}")


def kept_groups(patterns, base=("embeddings", "lm_head")) -> frozenset:
    """The parameter groups module-name patterns keep unquantised (plus `base`)."""
    if patterns is None:
        patterns = []
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise _bad("modules_to_not_convert", f"must be a list of module names, got {patterns!r}")
    kept = set(base)
    for p in patterns:
        low = p.lower()
        if low.endswith(".gate") or ".gate." in low:   # Mixtral / Qwen-MoE router: mlp.gate
            kept.add("router")
            continue
        for sub, groups in _PATTERN_GROUPS:
            if sub in low:
                kept.update(groups)
                break
    return frozenset(kept)


def _int(qc: dict, key: str, default, allowed=None) -> int:
    v = qc.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or (allowed and v not in allowed):
        raise _bad(key, f"must be {'one of ' + str(allowed) if allowed else 'an integer'}, "
                        f"got {v!r}")
    return v


def _gptq(qc: dict, method: str) -> WeightFormat:
    bits = _int(qc, "bits", 4 if method == "awq" else None, (2, 3, 4, 8))
    g = _int(qc, "group_size", 128)
    if g == 0 or g < -1:
        raise _bad("group_size", f"must be a positive group or -1 (per output row), got {g}")
    # one fp16 scale + one packed `bits`-bit zero point per group of an output row
    return WeightFormat(precision="int4" if bits <= 4 else "int8", method=method, bits=bits,
                        group=0 if g == -1 else g, scale_bytes=2 + bits / 8,
                        kept=kept_groups(qc.get("modules_to_not_convert")),
                        label=f"{method.upper()} int{bits}, group size {g}")


def _bnb(qc: dict) -> WeightFormat:
    kept = kept_groups(qc.get("llm_int8_skip_modules"))
    if qc.get("load_in_4bit"):
        qt = qc.get("bnb_4bit_quant_type", "fp4")
        if qt not in ("nf4", "fp4"):
            raise _bad("bnb_4bit_quant_type", f"must be 'nf4' or 'fp4', got {qt!r}")
        if qc.get("bnb_4bit_use_double_quant"):   # int8 absmax per 64 + fp32 per 256 absmax
            return WeightFormat("nf4", "bitsandbytes", 4, 64, 1 + 4 / 256, kept,
                                f"bitsandbytes {qt}, double quantisation")
        return WeightFormat("nf4", "bitsandbytes", 4, 64, 4, kept, f"bitsandbytes {qt}")
    if qc.get("load_in_8bit"):
        return WeightFormat("int8", "bitsandbytes", 8, 0, 4, kept, "bitsandbytes LLM.int8")
    raise _bad("load_in_4bit", "or 'load_in_8bit' must be true for bitsandbytes")


def _fp8(qc: dict) -> WeightFormat:
    kept = kept_groups(qc.get("modules_to_not_convert"))
    block = qc.get("weight_block_size")
    if block is None:
        return WeightFormat("fp8", "fp8", 8, -1, 4, kept, "FP8 e4m3, per-tensor scale")
    if (not isinstance(block, list) or len(block) != 2
            or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
        raise _bad("weight_block_size", f"must be two positive integers, got {block!r}")
    return WeightFormat("fp8", "fp8", 8, block[0] * block[1], 4, kept,
                        f"FP8 e4m3, fp32 scale per {block[0]} x {block[1]} block")


def _modelopt(qc: dict) -> WeightFormat:
    q = qc.get("quantization", qc)
    algo = str(q.get("quant_algo", "")).upper()
    kept = kept_groups(q.get("exclude_modules") or qc.get("modules_to_not_convert"))
    if algo == "NVFP4":
        g = _int(q, "group_size", 16)
        return WeightFormat("nvfp4", "modelopt", 4, g, 1, kept,
                            f"NVFP4, fp8 scale per {g} + fp32 per-tensor scale")
    if algo.startswith("FP8"):
        return WeightFormat("fp8", "modelopt", 8, -1, 4, kept, "FP8 e4m3, per-tensor scale")
    raise _bad("quant_algo", f"must be NVFP4 or FP8, got {algo!r}")


def _compressed(qc: dict) -> WeightFormat:
    kept = kept_groups(qc.get("ignore"))
    if qc.get("format") == "nvfp4-pack-quantized":
        return WeightFormat("nvfp4", "compressed-tensors", 4, 16, 1, kept,
                            "NVFP4, fp8 scale per 16 + fp32 per-tensor scale")
    groups = qc.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise _bad("config_groups", "must name at least one group with 'weights'")
    w = next(iter(groups.values())).get("weights") or {}
    bits = _int(w, "num_bits", 8, (4, 8))
    strat, typ = w.get("strategy", "tensor"), w.get("type", "int")
    g = {"tensor": -1, "channel": 0}.get(strat)
    if g is None:
        blk = w.get("block_structure")
        g = blk[0] * blk[1] if strat == "block" and isinstance(blk, list) and len(blk) == 2 \
            else _int(w, "group_size", 128)
    scale = 4 if typ == "float" and bits == 8 else 2 + (0 if w.get("symmetric", True) else 2)
    prec = ("fp8" if typ == "float" else "int8") if bits == 8 else "int4"
    return WeightFormat(prec, "compressed-tensors", bits, g, scale, kept,
                        f"compressed-tensors {typ}{bits}, {strat} scales")


def weight_format(qc) -> WeightFormat | None:
    """The `WeightFormat` of a config.json `quantization_config` (None when absent).
    Raises ScenarioError('architecture', ...) naming the key for a format it cannot read."""
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise ScenarioError("architecture", f"'quantization_config' must be an object, "
                                            f"got {qc!r}")
    method = qc.get("quant_method")
    if method == "mxfp4":
        return WeightFormat("mxfp4", "mxfp4", 4, 32, 1,
                            kept_groups(qc.get("modules_to_not_convert")),
                            "MXFP4, e8m0 scale per 32")
    if method in ("gptq", "awq"):
        return _gptq(qc, method)
    if method == "bitsandbytes":
        return _bnb(qc)
    if method == "fp8":
        return _fp8(qc)
    if method == "modelopt":
        return _modelopt(qc)
    if method == "compressed-tensors":
        return _compressed(qc)
    raise _bad("quant_method", f"'{method}' is not a weight format vramplan reads (mxfp4, fp8, "
                               "modelopt, compressed-tensors, gptq, awq, bitsandbytes)")
