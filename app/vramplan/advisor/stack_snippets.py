"""The advisor's how-to snippets in the plan's software stack's own configuration syntax first.

`data/how.toml` gives each lever's snippets by ecosystem (pytorch, hf, deepspeed, torchtune,
vllm, diffusers); `data/stack_snippets.toml` adds those of the stacks a scenario's `stack` names
(catalog/data/stacks.toml) in their own syntax (torchtitan's TOML, Megatron-LM's flags, Unsloth's
and litgpt's calls, SGLang's flags, timm / detectron2 options), each stack's source in its
`[sources]` table. `ordered(key, how, stack)` merges the two (a checked stack snippet wins for
its stack), the plan's stack first, then `pytorch`, then the rest in the files' order:

    ordered("checkpointing-full", how_toml_entry, "torchtitan@2025-06")
    # {"torchtitan": '[activation_checkpoint]\\nmode = "full"', "pytorch": ..., "hf": ...}
"""
from __future__ import annotations

import functools
import tomllib
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "stack_snippets.toml"
DEFAULT = "pytorch"


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    d = tomllib.loads(DATA.read_text(encoding="utf-8"))
    sources = d.pop("sources", {})
    for key, table in d.items():
        missing = set(table) - set(sources)
        if missing:
            raise ValueError(f"stack_snippets.toml [{key}]: no [sources] entry for "
                             f"{sorted(missing)}")
    return {"sources": sources, "snippets": d}


def sources() -> dict[str, str]:
    """Where each stack's snippets were checked (file at a commit, or a documentation page)."""
    return dict(_table()["sources"])


def snippets(key: str) -> dict[str, str]:
    """The stack snippets of a how.toml key ({} for a key without any)."""
    return dict(_table()["snippets"].get(key, {}))


def stack_name(stack: str | None) -> str:
    """'torchtitan@2025-06' -> 'torchtitan'; None (the default) -> 'pytorch'."""
    return (stack or DEFAULT).partition("@")[0]


def ordered(key: str, how: dict, stack: str | None) -> dict[str, str]:
    """The how-to snippets of a lever for a plan on `stack`: how.toml's and this file's, the
    stack's own first (where it has one), then pytorch's, then the others."""
    merged = {**dict(how), **snippets(key)}
    first = [stack_name(stack), DEFAULT]
    return {k: merged[k] for k in dict.fromkeys(first + list(merged)) if k in merged}
