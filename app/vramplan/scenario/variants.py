"""A scenario at other values of one key (batch_size, seq_len), validated where it must be.

`Scenario.replace(**{key: v})` runs the whole pass again (~0.1 ms). The estimate's probes (its
max batch and longest context searches) and the sweep's grid ask for many values of one key.
Where changing the key is a plain range-checked change (nothing else is derived from it:
checked here, at both ends of the values asked for, that `replace` gives the same Scenario as
changing the field alone), the values in between are made by changing the field alone; every
other value (outside the verified ends, or all of them when the ends differ: a serve plan
whose serving.max_num_seqs / max_model_len follow the key, a seq_len beyond the model's
positions) goes through the pass and is refused or derived by it. Used by `vramplan.estimate`
and `vramplan.sweep` (one copy: the sweep imports it from here).

A key whose row says how the rules between keys read it (`Key.plain`: batch_size, none;
seq_len, a decoder's positions and image tokens) is checked without the pass
(`plain_probe`): a value its row reads unchanged, at which no derivation that applies to the
plan moves (serve's max_num_seqs follows the batch: not there) and which the row's rules
accept, is changing the field alone; one those rules refuse is refused with the pass's own
error. So the max-batch and longest-context searches run no pass where the rows know the
answer (issue 19.1: one page edit, one pass).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from ..errors import ScenarioError
from . import keys as K
from .rules import max_positions


class Variants:
    """The scenario `sc` at other values of `key`, by `get(v)`: the Scenario, or the
    ScenarioError that refuses it. `make(v)` (default `sc.replace(key=v)`) validates; where
    `make` at the smallest and the largest of `values` equals `with_field` (`fast`), the
    values between them (`lo` .. `hi`) are made by `with_field`. With `grow`, any other value
    whose `make` equals `with_field` widens the verified range to it (the same check, its ends
    found by the probes themselves: a search that probes upwards past the first ends). With
    `lazy`, the ends are checked at the first `get` that needs them (a search that stops at
    its first probe, the smallest value, validates that value only)."""

    def __init__(self, sc, key: str = "batch_size", values=(), make=None, *,
                 grow: bool = False, lazy: bool = False):
        self.sc, self.key, self.grow = sc, key, grow
        # the pass's own values: a plain key is checked by its row (no pass); another `make`
        # (the sweep's, on other changes) by the pass
        self.probe = plain_probe(sc, key) if make is None else None
        self.make = make or (lambda v: sc.replace(**{key: v}))
        self.cache: dict = {}
        self.fast = False
        self.lo = self.hi = None
        self._first = None     # grow: a verified value while fewer than two are
        vals = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        self._ends = [min(vals), max(vals)] if vals else None
        if vals and not lazy:
            self._check_ends()

    def _check_ends(self) -> None:
        ends, self._ends = self._ends, None
        fast = all([self._verified(v) for v in dict.fromkeys(ends)])
        if not (self.grow and self.fast):      # grow: what the ends verified stays
            self.fast, self.lo, self.hi = fast, *ends

    def _slow(self, v: int):
        if v not in self.cache:
            try:
                self.cache[v] = self.make(v)
            except ScenarioError as exc:
                self.cache[v] = exc
        got = self.cache[v]
        return None if isinstance(got, Exception) else got

    def _verified(self, v: int) -> bool:
        """`make(v)` accepted and equal to changing the field alone (for a plain key, its
        row and the derivations say so: no pass)."""
        said = self.probe(v) if self.probe is not None else None
        if said is True:
            self.cache.setdefault(v, with_field(self.sc, self.key, v))
            ok = True
        elif isinstance(said, ScenarioError):     # the pass refuses it, by the same check
            self.cache.setdefault(v, said)
            ok = False
        else:
            got = self._slow(v)
            ok = got is not None and got == with_field(self.sc, self.key, v)
        if ok and self.grow:
            self._widen(v)
        return ok

    def _widen(self, v: int) -> None:
        if self.fast:
            self.lo, self.hi = min(self.lo, v), max(self.hi, v)
        elif self._first is None or self._first == v:
            self._first = v
        else:
            self.fast, self.lo, self.hi = True, min(self._first, v), max(self._first, v)

    def within(self, v: int) -> bool:
        """v lies between two verified values (made by changing the field alone)."""
        return self.fast and self.lo <= v <= self.hi

    def get(self, v: int):
        """The Scenario at `v`, or the ScenarioError that refuses it."""
        if v not in self.cache:
            if self._ends is not None and v != self._ends[0]:
                self._check_ends()
            if self.within(v):
                self.cache[v] = with_field(self.sc, self.key, v)
            elif self.grow:
                self._verified(v)
            else:
                self._slow(v)
        return self.cache[v]

    def scenario(self, v: int):
        """The Scenario at `v`, or None where the pass refuses it."""
        got = self.get(v)
        return None if isinstance(got, Exception) else got


class BatchVariants(Variants):
    """`Variants` of batch_size (the sweep's grid and max batch)."""

    def __init__(self, sc, values=(), make=None, *, grow: bool = False):
        super().__init__(sc, "batch_size", values, make, grow=grow)


def _given(d: dict, name: str):
    top, _, sub = name.partition(".")
    v = d.get(top)
    return v if not sub else v.get(sub) if isinstance(v, dict) else None


def plain_probe(sc, key: str) -> Callable[[int], object] | None:
    """For a key whose row has `plain`: v -> what the pass at `v` (`sc.replace(key=v)`)
    gives, told without it: True, `sc` with the field alone changed (the row reads `v` as
    `v`, every derivation that applies to the plan's task and family and is not given,
    `keys.derive`, gives at `v` what it gives at the plan's value, and the row's `plain`
    says its rules between keys accept `v`); a ScenarioError, the pass's refusal (the row's
    read, or its rules'); None, the pass decides. None for other keys."""
    row = K.BY_NAME.get(key)
    if row is None or row.plain is None or not isinstance(getattr(sc, key, None), int):
        return None
    given, task, family = sc.given_dict(), sc.task, sc.family
    rows = [k for k in K.DERIVED if k.name != key and k.applies(task, family)
            and (k.parent is None or K.BY_NAME[k.parent].applies(task, family))
            and _given(given, k.name) is None]
    ctx = {"task": task, "_positions": max_positions(sc.spec),
           **{k.name: _given(given, k.name) for k in K.DERIVED
              if _given(given, k.name) is not None}}

    def derived(v) -> tuple:
        out = K.derive({**ctx, key: v})
        return tuple(out.get(k.name) for k in rows)
    at_plan = derived(getattr(sc, key))

    def probe(v):
        try:
            read = row.read(v)
        except ScenarioError as exc:          # the pass reads the row first: refused
            return exc
        if read != v or type(read) is not type(v) or derived(v) != at_plan:
            return None
        return row.plain(sc, v)
    return probe


def with_field(sc, key: str, v):
    """`dataclasses.replace(sc, **{key: v})` for a Scenario (a frozen dataclass without
    __post_init__: the same fields, one changed), in a microsecond instead of ~10; `v` may be
    an array (the sweep's vectorised batch)."""
    if hasattr(sc, "__post_init__") or key not in sc.__dict__:
        return dataclasses.replace(sc, **{key: v})
    new = object.__new__(type(sc))
    new.__dict__.update(sc.__dict__)
    object.__setattr__(new, key, v)
    return new


def with_batch(sc, b):
    """`with_field(sc, "batch_size", b)`."""
    return with_field(sc, "batch_size", b)
