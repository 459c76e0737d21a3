"""Text in, values out; values in, text out. What a text box holds and how a number is
printed on the page. Plain Python (no widgets), tested on its own.

Parsing never decides validity: text that does not read as the field's kind is handed on as
typed, and the scenario's form (`vramplan.scenario.form.check`) names the key and says why.
"""
from __future__ import annotations

import html
import math
import re
from typing import Any

from ...catalog.size_only import looks_like_size, parse_params  # noqa: F401 (the page's names)
from ...units import format_gbs, format_gib, format_seconds, format_size


# words whose capitals a generic label keeps ('kv_pool_tokens' -> 'KV pool tokens')
ACRONYMS = {"kv": "KV", "gpu": "GPU", "gpus": "GPUs", "cpu": "CPU", "cfg": "CFG", "vae": "VAE",
            "lora": "LoRA", "qlora": "QLoRA", "fft": "FFT", "msaa": "MSAA", "tp": "TP",
            "dp": "DP", "pp": "PP", "nccl": "NCCL", "cuda": "CUDA", "mla": "MLA", "moe": "MoE",
            "flops": "FLOPs", "flop": "FLOP", "tflops": "TFLOPS", "hbm": "HBM", "llm": "LLM",
            "dram": "DRAM", "l2": "L2", "sm": "SM", "sms": "SMs", "fp8": "FP8", "fp16": "FP16",
            "bf16": "BF16", "fp32": "FP32", "gb": "GB", "gib": "GiB", "id": "id", "ids": "ids",
            "mlp": "MLP", "qkv": "QKV"}


# ---------------------------------------------------------------- text -> values
def parse_int(text: Any) -> Any:
    """'2,048' / '2 048' / '2_048' -> 2048; other text as typed (the form names the key)."""
    if not isinstance(text, str):
        return text
    t = re.sub(r"[,_\s]", "", text)
    try:
        return int(t)
    except ValueError:
        pass
    try:                       # '1e4', '4096.0': whole numbers written as floats
        f = float(t)
    except ValueError:
        return text.strip()
    return int(f) if math.isfinite(f) and f.is_integer() else text.strip()


def parse_number(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    t = re.sub(r"[,_\s]", "", text)
    try:
        f = float(t)
    except ValueError:
        return text.strip()
    return f if math.isfinite(f) else text.strip()


def parse_resolution(text: Any) -> Any:
    """'1024x1024', '1024 × 1024', '64, 128, 128' -> [ints]; other text as typed."""
    if not isinstance(text, str):
        return text
    parts = [p for p in re.split(r"[x×*,\s]+", text.strip().lower()) if p]
    try:
        return [int(p.replace("_", "")) for p in parts]
    except ValueError:
        return text.strip()


def parse_list(text: Any) -> Any:
    """'q_proj, v_proj' -> ['q_proj', 'v_proj']."""
    if not isinstance(text, str):
        return text
    return [p for p in re.split(r"[,\s]+", text.strip()) if p]


def parse_size(text: Any) -> Any:
    """Sizes keep their unit ('4 GiB' is read by the scenario); '1024' is bytes."""
    if not isinstance(text, str):
        return text
    v = parse_int(text)
    return v if isinstance(v, int) else text.strip()


PARSERS = {"int": parse_int, "number": parse_number, "resolution": parse_resolution,
           "size": parse_size, "multi": parse_list}


def parse(kind: str, text: Any) -> Any:
    """The draft value of a text box of this field kind ('' and None: not given)."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    fn = PARSERS.get(kind)
    return fn(text) if fn else (text.strip() if isinstance(text, str) else text)


# ---------------------------------------------------------------- values -> text
def count(n: Any, digits: int = 3) -> str:
    """A count with thousands separators: 2048 -> '2,048', 0.125 -> '0.125'."""
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return str(n)
    if isinstance(n, float) and not math.isfinite(n):
        return "–"
    if float(n).is_integer():
        return f"{int(n):,}"
    if abs(n) >= 100:
        return f"{n:,.0f}"
    return f"{n:,.{digits}g}"


def format_params(n: float) -> str:
    """7e9 -> '7B', 3.5e8 -> '350M', 1.2e12 -> '1.2T'."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:g}"


_PREFIXES = ("", "k", "M", "G", "T", "P", "E", "Z", "Y")


def si(n: Any, unit: str, digits: int = 3) -> str:
    """A number with a decimal prefix, `digits` significant digits and thousands separators:
    (2.5e11, 'FLOP') -> '250 GFLOP', (1e30, 'B') -> '1,000,000 YB'."""
    if not isinstance(n, (int, float)) or isinstance(n, bool) or not math.isfinite(n):
        return "–"
    v, i = float(n), 0
    while abs(v) >= 1000 and i < len(_PREFIXES) - 1:
        v, i = v / 1000, i + 1
    if i == 0:
        return f"{count(round(v, digits))} {unit}"
    text = f"{v:,.0f}" if abs(v) >= 10 ** digits else f"{v:.{digits}g}"
    prefix = "K" if unit == "B" and i == 1 else _PREFIXES[i]
    return f"{text} {prefix}{unit}"


def human_bytes(n: Any, digits: int = 3) -> str:
    """Decimal units up to YB: 87.53e9 -> '87.5 GB', 6.2e21 -> '6.2 ZB'."""
    if isinstance(n, (int, float)) and not isinstance(n, bool) and abs(n) < 1000:
        return f"{int(n):,} B" if float(n).is_integer() else f"{n:.3g} B"
    return si(n, "B", digits)


def gib(n: Any) -> str:
    """Bytes as GiB with separators ('1,234.50 GiB'); '–' for None: `units.format_gib`, the
    one size formatter of the charts, the report and the CLI."""
    return format_gib(n)


def size(n: Any) -> str:
    """Bytes in the binary unit that reads best: '7.9 MiB', '1.25 GiB', '1,234.50 GiB'
    (`units.format_size`)."""
    return format_size(n)


def rate_gbs(gbs: Any) -> str:
    """Bandwidth in decimal GB/s ('3,350.0 GB/s'; `units.format_gbs`)."""
    return format_gbs(gbs)


def seconds(s: Any) -> str:
    """A time as the report and the CLI write it (`units.format_seconds`): '443.9 ms'."""
    return format_seconds(s)


def label_of(key: str) -> str:
    """A readable label for a key no table names: 'kv_pool_tokens' -> 'KV pool tokens'."""
    words = re.split(r"[_\-\s]+", str(key).strip())
    out = [ACRONYMS.get(w.lower(), w) for w in words if w]
    if out and out[0] == out[0].lower():
        out[0] = out[0][:1].upper() + out[0][1:]
    return " ".join(out)


def show(kind: str, value: Any) -> str:
    """A draft or scenario value as its text box shows it."""
    if value is None:
        return ""
    if kind == "resolution" and isinstance(value, (list, tuple)):
        return " × ".join(str(v) for v in value)
    if kind == "multi" and isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "size" and isinstance(value, int):
        for unit, n in (("GiB", 2**30), ("MiB", 2**20)):
            if value and value % n == 0:
                return f"{value // n:,} {unit}"
        return str(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and \
            kind != "number":
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def message_html(text: str | None, kind: str = "error") -> str:
    """An inline message ('' hides it). kind: error, info, warn."""
    return f"<div class='vp-msg vp-msg-{kind}'>{html.escape(text)}</div>" if text else ""


def shorten(text: str, limit: int = 160) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"
