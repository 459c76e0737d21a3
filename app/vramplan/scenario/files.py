"""Scenario files: one JSON object, a JSON array of objects, or JSON Lines (one object a line).
A rejected scenario is kept in its place as its ScenarioError, so a batch reports each one."""
from __future__ import annotations

from pathlib import Path

from .. import safejson
from ..errors import ScenarioError, VramplanError
from .model import Scenario

__all__ = ["load_scenarios", "MAX_SCENARIO_FILE_BYTES"]

MAX_SCENARIO_FILE_BYTES = 10_000_000  # 10 MB: thousands of plans; larger is not a scenario file


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
            out.append(Scenario.from_dict(doc, base_dir=path.parent))
        except ScenarioError as exc:
            out.append(exc)
    return out

