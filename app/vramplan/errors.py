"""User-facing errors: each carries one clear message; the CLI prints it and exits 2."""
from __future__ import annotations

import difflib
import re
from typing import Iterable


class VramplanError(Exception):
    """Base for every error a user can cause; its str() is the whole message."""


class ScenarioError(VramplanError, ValueError):
    """A scenario key has a wrong type, value or range; `key` names it (dotted for nested keys)."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.message = message          # the text without the key (a form shows it by the key)
        super().__init__(f"scenario key '{key}': {message}")


class HwdbError(VramplanError, ValueError):
    """The hardware database is invalid; names the file, the device and the field."""

    def __init__(self, file: str, device: str | None, field: str | None, message: str):
        self.file, self.device, self.field = file, device, field
        where = file
        if device:
            where += f": device '{device}'"
        if field:
            where += f": field '{field}'"
        super().__init__(f"{where}: {message}")


class UnknownIdError(VramplanError, LookupError):
    """An id (GPU, model, ...) that is not known; the message lists the closest known ids."""

    def __init__(self, kind: str, wanted: str, known: Iterable[str], n: int = 5):
        known = list(known)
        self.kind, self.wanted = kind, wanted
        self.suggestions = closest(wanted, known, n)
        msg = f"unknown {kind} '{shorten(wanted)}'"
        if self.suggestions:
            msg += "; closest: " + ", ".join(self.suggestions)
        super().__init__(msg)

    def __str__(self) -> str:  # LookupError would repr() the message
        return self.args[0]


class UnavailableError(VramplanError, RuntimeError):
    """Something the command needs is not here (no NVIDIA driver, no torch, no GPU)."""


# no id of the catalog or the hardware database is this long; a longer "id" (from a link,
# say) gets no closest-id search, which costs ~0.5 ms per character
MAX_ID_CHARS = 200


def shorten(text: str, limit: int = 80) -> str:
    """`text` cut to `limit` characters for a message (an id pasted 8,000 characters long)."""
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def closest(wanted: str, known: list[str], n: int = 5) -> list[str]:
    """Closest ids to `wanted`: substring matches first, then by similarity to the id or to any
    run of its dash/slash-separated parts ('h1000' is close to the 'h100' of
    'nvidia-h100-sxm5-80gb', not only to ids spelled alike)."""
    w = wanted.lower().strip()
    if not w or len(w) > MAX_ID_CHARS:
        return []
    subs = [k for k in known if w in k.lower() or k.lower() in w]
    scored = []
    for k in known:
        parts = re.split(r"[-_/ .]+", k.lower())
        windows = {k.lower()} | {"-".join(parts[i:j]) for i in range(len(parts))
                                 for j in range(i + 1, min(len(parts), i + 3) + 1)}
        score = max(difflib.SequenceMatcher(None, w, x).ratio() for x in windows)
        if score >= 0.6:
            scored.append((-score, len(k), k))
    out: list[str] = []
    for k in subs[:n] + [k for _, _, k in sorted(scored)]:
        if k not in out:
            out.append(k)
    return out[:n]
