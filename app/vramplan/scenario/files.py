"""Scenario files: one JSON object, a JSON array of objects, or JSON Lines (one object a line).
A rejected scenario is kept in its place as its ScenarioError, so a batch reports each one.

Saved plans (`plan_document`, `save_plan`: what the planner's download and `vramplan` write)
carry a schema version: `{"format": "vramplan-plan", "version": 1, "scenario": {...}}`.
A bare scenario object is the older, unversioned form (version 0) and still opens: `migrate`
turns any known version into the current scenario dict, and a newer version than this
vramplan knows is refused with a message saying so.
"""
from __future__ import annotations

from pathlib import Path

from .. import safejson
from ..errors import ScenarioError, VramplanError
from .model import Scenario

__all__ = ["load_scenarios", "MAX_SCENARIO_FILE_BYTES", "PLAN_FORMAT", "PLAN_VERSION",
           "plan_document", "save_plan", "migrate"]

PLAN_FORMAT = "vramplan-plan"
PLAN_VERSION = 1

MAX_SCENARIO_FILE_BYTES = 10_000_000  # 10 MB: thousands of plans; larger is not a scenario file


def plan_document(scenario) -> dict:
    """The saved form of a plan: the normalised scenario under a format name and version."""
    return {"format": PLAN_FORMAT, "version": PLAN_VERSION, "scenario": scenario.to_dict()}


def migrate(doc: dict) -> dict:
    """A saved plan of any known version -> the scenario dict of today. Version 0 is a bare
    scenario object (what vramplan wrote before plans were versioned)."""
    if doc.get("format") != PLAN_FORMAT:
        return doc  # version 0: the scenario itself
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ScenarioError("version", f"a {PLAN_FORMAT} needs an integer version >= 1, got "
                                       f"{version!r}")
    if version > PLAN_VERSION:
        raise ScenarioError("version", f"this plan was saved by a newer vramplan (plan version "
                                       f"{version}; this one reads up to {PLAN_VERSION}): "
                                       f"upgrade vramplan")
    extra = set(doc) - {"format", "version", "scenario"}
    if extra:
        raise ScenarioError(sorted(extra)[0], f"unknown key of a {PLAN_FORMAT}; it takes "
                                              "format, version, scenario")
    if not isinstance(doc.get("scenario"), dict):
        raise ScenarioError("scenario", f"a {PLAN_FORMAT} holds its plan under 'scenario' (an "
                                        "object)")
    return doc["scenario"]


def save_plan(scenario, path: str | Path) -> Path:
    """Write the plan atomically (a temporary file in the same folder, fsync, rename), so a
    crash or a second writer never leaves half a file; a symlink at the path is replaced,
    not written through."""
    import json
    import os
    import tempfile
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(plan_document(scenario), f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _one_object(line: str) -> bool:
    """Is this line a whole JSON object by itself (the first line of a JSON Lines file)?"""
    try:
        return isinstance(safejson.loads(line, "line"), dict)
    except VramplanError:
        return False


def load_scenarios(path: str | Path) -> list:
    """Read one JSON object, a JSON array of objects, or JSON Lines (one object a line; blank
    lines skipped). Returns a list holding a Scenario or, for a rejected scenario, its
    ScenarioError (not raised). A file that cannot be read as scenarios (missing, a folder,
    binary, empty, truncated, not JSON, NaN / 1e999, nested too deep, over 10 MB) raises
    VramplanError naming the file and the line."""
    path = Path(path)
    what = f"scenario file '{path}'"
    try:
        if path.is_dir():
            raise VramplanError(f"{what} is a folder, not a file")
        data = path.read_bytes()
    except OSError as exc:
        raise VramplanError(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > MAX_SCENARIO_FILE_BYTES:
        raise VramplanError(f"{what} is {len(data):,} bytes, more than the "
                            f"{MAX_SCENARIO_FILE_BYTES:,} accepted")
    text = safejson.decode_text(data, what)
    if not text.strip():
        raise VramplanError(f"{what} is empty")
    lines = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(lines) > 1 and _one_object(lines[0][1]):  # JSON Lines
        docs = []
        for i, line in lines:  # a broken line is reported in its place, the others run
            try:
                docs.append((f"line {i}", safejson.loads(line, f"line {i}",
                                                         max_chars=MAX_SCENARIO_FILE_BYTES)))
            except safejson.BadNumberError as exc:     # named by its key
                docs.append((f"line {i}", ScenarioError(exc.key or "scenario",
                                                        f"line {i}: {exc.text} {exc.why}")))
            except VramplanError as exc:
                docs.append((f"line {i}", ScenarioError("scenario", str(exc))))
    else:
        try:
            whole = safejson.loads(text, str(path), max_chars=MAX_SCENARIO_FILE_BYTES)
        except VramplanError as exc:
            raise VramplanError(str(exc).replace(": not JSON:", ": not JSON (one object, an "
                                                 "array or JSON Lines):", 1)) from None
        if isinstance(whole, list):  # a JSON array of scenarios
            if not whole:
                raise VramplanError(f"{what} holds an empty list: no scenario to read")
            docs = [(f"item {n}", d) for n, d in enumerate(whole, 1)]
        else:
            docs = [("line 1", whole)]
    out: list = []
    for lineno, doc in docs:
        if isinstance(doc, ScenarioError):
            out.append(doc)
            continue
        try:
            if not isinstance(doc, dict):
                raise ScenarioError("scenario", f"{lineno}: expected a JSON object, got "
                                                f"{type(doc).__name__}")
            out.append(Scenario.from_dict(migrate(doc), base_dir=path.parent))
        except ScenarioError as exc:
            out.append(exc)
    return out

