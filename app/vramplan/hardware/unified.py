"""The GPU's share of a unified-memory machine: rules that turn installed RAM into the bytes
the GPU may use by default (hwdb `usable_memory_rule`, hwdb/README.md "Unified memory").

On a unified-memory SoC the GPU has no memory of its own; the OS decides how much of the
shared RAM the GPU may hold. A device whose share follows a published rule names it, and the
rule is applied to the device's `memory` when the database is loaded, so every consumer of
`Device.usable_bytes` (fit, advisor, sweep, charts) plans with the GPU's share, not all of RAM.
"""
from __future__ import annotations

from typing import Callable

from ..units import GiB

MACOS_SMALL_RAM_MAX = 36 * GiB
"""Largest RAM that gets the 2/3 share; above it macOS allows 3/4. Measured: 2/3 on 16 and
32 GB machines, 3/4 on 64, 96, 128 and 192 GB (hwdb sources llamacpp-python-687, ollama-434,
llamacpp-1870, llamacpp-3213, rapidmlx-183); no measurement between 32 and 64 GB is recorded,
36 GB (the M3 / M4 Max base configuration) is the commonly cited boundary."""


def macos_wired_default(memory_bytes: int) -> int:
    """macOS's default GPU wired-memory limit (Metal `recommendedMaxWorkingSetSize` with
    `sysctl iogpu.wired_limit_mb` at its default 0) under macOS 13-15: 2/3 of RAM up to
    36 GiB, 3/4 above. 32 GiB -> 21845.3 MiB (ollama #434), 96 GiB -> 73728 MiB (llama.cpp
    #3213). Raised with `sudo sysctl iogpu.wired_limit_mb=<MiB>` (until reboot)."""
    num, den = (2, 3) if memory_bytes <= MACOS_SMALL_RAM_MAX else (3, 4)
    return memory_bytes * num // den


USABLE_RULES: dict[str, Callable[[int], int]] = {
    "macos-wired-default": macos_wired_default,
}
"""rule name (hwdb `usable_memory_rule`) -> memory bytes -> usable bytes"""


def usable_by_rule(rule: str, memory_bytes: int) -> int:
    """The usable bytes `rule` gives a machine with `memory_bytes` of RAM (KeyError if unknown)."""
    return USABLE_RULES[rule](memory_bytes)
