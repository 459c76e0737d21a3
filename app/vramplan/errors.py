"""User-facing errors: each carries one clear message; the CLI prints it and exits 2."""
from __future__ import annotations

import difflib
from typing import Iterable


class VramplanError(Exception):
    """Base for every error a user can cause; its str() is the whole message."""


class ScenarioError(VramplanError, ValueError):
    """A scenario key has a wrong type, value or range; `key` names it (dotted for nested keys)."""

    def __init__(self, key: str, message: str):
        self.key = key
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
        msg = f"unknown {kind} '{wanted}'"
        if self.suggestions:
            msg += "; closest: " + ", ".join(self.suggestions)
        super().__init__(msg)

    def __str__(self) -> str:  # LookupError would repr() the message
        return self.args[0]


class UnavailableError(VramplanError, RuntimeError):
    """Something the command needs is not here (no NVIDIA driver, no torch, no GPU)."""


def closest(wanted: str, known: list[str], n: int = 5) -> list[str]:
    """Closest ids to `wanted`: substring matches first, then difflib similarity."""
    w = wanted.lower()
    subs = [k for k in known if w and (w in k.lower() or k.lower() in w)]
    fuzzy = difflib.get_close_matches(w, [k.lower() for k in known], n=n, cutoff=0.4)
    lower_map = {k.lower(): k for k in known}
    out: list[str] = []
    for k in subs[:n] + [lower_map[f] for f in fuzzy]:
        if k not in out:
            out.append(k)
    return out[:n]
