"""The software stack a scenario names (`stack`: `NAME` or `NAME@VERSION`) and the memory
mechanisms it has at that version, from the change points of `catalog/data/stacks.toml` (each
with its source: commit, PR or release note).

`read_stack(text)` validates and normalises the key's value (ScenarioError naming `stack`);
`resolve(text)` gives a `Stack`: its name, the version asked for, the change point taken (the
nearest earlier one: a version between points, or none given, which takes the newest) and the
mechanisms on, each with its source. What a mechanism does to the bytes is the footprint
stage's (`vramplan.workloads.stack_mechanisms`).
"""
from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..errors import ScenarioError
from ..vocab import FAMILIES, TASKS

DATA = Path(__file__).resolve().parent / "data" / "stacks.toml"
DEFAULT = "pytorch"
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_RELEASE = re.compile(r"^v?(\d+(?:\.\d+)*)$")


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    d = tomllib.loads(DATA.read_text(encoding="utf-8"))
    stacks = {s["name"]: s for s in d["stack"]}
    for s in d["stack"]:
        odd = set(s.get("families", [])) - set(FAMILIES) | set(s.get("tasks", [])) - set(TASKS)
        if odd:
            raise ValueError(f"stacks.toml: stack {s['name']!r} names {sorted(odd)}")
    for c in d.get("change", []):
        if c["stack"] not in stacks:
            raise ValueError(f"stacks.toml: change point of unknown stack {c['stack']!r}")
        parse_version(c["stack"], c["since"], stacks[c["stack"]]["scheme"])
    return {"stacks": stacks, "changes": d.get("change", [])}


def names() -> tuple[str, ...]:
    """The stack names, in the data file's order (`pytorch` first)."""
    return tuple(_table()["stacks"])


def applicable(family: str | None, task: str | None) -> tuple[str, ...]:
    """The stacks that run this model family and task (the data file's `families` / `tasks`;
    empty there: every one), `pytorch` first: what the page offers. None: not known yet."""
    out = []
    for name, st in _table()["stacks"].items():
        fams, tasks = st.get("families") or (), st.get("tasks") or ()
        if (family is None or not fams or family in fams) and \
                (task is None or not tasks or task in tasks):
            out.append(name)
    return tuple(out)


def change_points(name: str) -> tuple[tuple[str, str, bool], ...]:
    """(since, mechanism, on) of a stack's change points, oldest first."""
    st = _table()["stacks"][name]
    rows = [(c["since"], c["mechanism"], bool(c["on"]))
            for c in _table()["changes"] if c["stack"] == name]
    return tuple(sorted(rows, key=lambda r: parse_version(name, r[0], st["scheme"])))


def versions(name: str) -> tuple[str, ...]:
    """The versions at which a stack's mechanisms change (its change points), newest first:
    the versions worth choosing (any other takes the nearest earlier one)."""
    return tuple(reversed(tuple(dict.fromkeys(p for p, _m, _on in change_points(name)))))


def choices(family: str | None, task: str | None) -> tuple[str, ...]:
    """The `stack` values worth offering for a family and task: each applicable name (taken at
    its newest change point) followed by NAME@VERSION for each of its change points, newest
    first ('pytorch', 'torchtitan', 'torchtitan@2025-12', ..., 'torchtitan@2024-04', ...)."""
    return tuple(v for n in applicable(family, task)
                 for v in (n, *(f"{n}@{p}" for p in versions(n))))


def scheme(name: str) -> str:
    """'month' (YYYY-MM) or 'release' (dotted numbers)."""
    return _table()["stacks"][name]["scheme"]


def parse_version(name: str, v: str, scheme: str) -> tuple[int, ...]:
    """'2025-06' -> (2025, 6) for a month scheme, '0.4.1' -> (0, 4, 1) for a release scheme;
    ScenarioError('stack', ...) for a version of the other scheme."""
    m = _MONTH.match(v) if scheme == "month" else _RELEASE.match(v)
    if m is None or (scheme == "month" and not 1 <= int(m.group(2)) <= 12):
        want = "a month YYYY-MM (e.g. 2025-06)" if scheme == "month" else \
            "a release such as 0.4 or 4.46.1"
        raise ScenarioError("stack", f"version {v!r} of '{name}' is not {want}")
    if scheme == "month":
        return int(m.group(1)), int(m.group(2))
    return tuple(int(x) for x in m.group(1).split("."))


def read_stack(v) -> str | None:
    """The key's value normalised: 'NAME' or 'NAME@VERSION' (name lower-case); None for the
    default `pytorch` without a version (today's behaviour, omitted from the scenario)."""
    if not isinstance(v, str) or not v.strip():
        raise ScenarioError("stack", f"must be NAME or NAME@VERSION, got {v!r}")
    name, _, ver = v.strip().partition("@")
    name = name.strip().lower()
    stacks = _table()["stacks"]
    if name not in stacks:
        raise ScenarioError("stack", f"unknown stack {name!r}; one of {', '.join(stacks)}")
    ver = ver.strip()
    if "@" in v and not ver:
        raise ScenarioError("stack", f"{v!r}: a version after '@' (or the name alone)")
    if ver:
        parse_version(name, ver, stacks[name]["scheme"])
        return f"{name}@{ver}"
    return None if name == DEFAULT else name


@dataclass(frozen=True)
class Stack:
    """One resolved stack: `mechanisms` maps each mechanism on to its source."""
    name: str
    version: str | None
    point: str | None
    mechanisms: dict
    what: str

    def has(self, mechanism: str) -> bool:
        return mechanism in self.mechanisms

    @property
    def label(self) -> str:
        return self.name + (f"@{self.version}" if self.version else "")

    def resolution_note(self) -> str:
        """How the version was matched to a change point, in words."""
        if self.version is None:
            at = f"its newest change point ({self.point})" if self.point else "every version"
            return f"stack {self.name} ({self.what}) without a version: taken at {at}"
        if self.point == self.version:
            return f"stack {self.label} ({self.what}): a change point of the data file"
        if self.point is None:
            return (f"stack {self.label} ({self.what}): earlier than every change point; only "
                    "the mechanisms it always has apply")
        return (f"stack {self.label} ({self.what}): not a change point; the nearest earlier "
                f"one, {self.point}, decides its mechanisms")


@functools.lru_cache(maxsize=64)
def resolve(text: str | None) -> Stack:
    """The Stack of a normalised `stack` value (None: the default `pytorch`)."""
    name, _, ver = (text or DEFAULT).partition("@")
    t = _table()
    st = t["stacks"][name]
    scheme = st["scheme"]
    own = st.get("always_sources", {})     # a source of its own for some `always` mechanisms
    mechs = {m: own.get(m, st.get("always_source", "")) for m in st.get("always", [])}
    points = sorted({c["since"] for c in t["changes"] if c["stack"] == name},
                    key=lambda s: parse_version(name, s, scheme))
    if ver:
        key = parse_version(name, ver, scheme)
        earlier = [p for p in points if parse_version(name, p, scheme) <= key]
        point = earlier[-1] if earlier else None
    else:
        point = points[-1] if points else None
    if point is not None:
        limit = parse_version(name, point, scheme)
        changes = sorted((c for c in t["changes"] if c["stack"] == name and
                          parse_version(name, c["since"], scheme) <= limit),
                         key=lambda c: parse_version(name, c["since"], scheme))
        for c in changes:
            if c["on"]:
                mechs[c["mechanism"]] = c["source"]
            else:
                mechs.pop(c["mechanism"], None)
    return Stack(name=name, version=ver or None, point=point, mechanisms=mechs, what=st["what"])


def of(scenario) -> Stack:
    """The Stack a scenario runs on (its `stack` key; the default `pytorch` when absent)."""
    return resolve(getattr(scenario, "stack", None))


# the optimizer a stack's trainer uses when the scenario names none (mechanism -> optimizer);
# what the mechanism's bytes are: vramplan.workloads.stack_mechanisms
_OPTIMIZER_DEFAULTS = {"adamw-8bit-default": "adamw-8bit"}


def default_optimizer(text: str | None) -> str | None:
    """The optimizer a normalised `stack` value defaults to for training (None: the task's
    usual default). Unsloth >= 2025-02 patches every TRL trainer config to optim='adamw_8bit'
    (stacks.toml, mechanism adamw-8bit-default)."""
    st = resolve(text)
    for mech, optim in _OPTIMIZER_DEFAULTS.items():
        if st.has(mech):
            return optim
    return None
