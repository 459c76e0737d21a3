"""Functions a person can read (issue 19.3; docs/ARCHITECTURE.md, "functions <= ~60 lines").

A function's length is its `def` line to its last line, both counted (ast: end_lineno - lineno
+ 1; decorators not counted, a nested function counted in its parent too).

- No function anywhere in app/vramplan over HARD_LIMIT (100) lines.
- In the core (app/vramplan without the presentation folders ui/, server/ and commands/) no
  function over CORE_LIMIT (60) lines, except those in CORE_OVER: a ratchet that may only
  shrink. A function that grows past 60 fails here; one on the list that has been split fails
  too, until its entry is removed, so the list stays the truth.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "app" / "vramplan"
HARD_LIMIT = 100
CORE_LIMIT = 60
NOT_CORE = ("ui", "server", "commands")

# path inside app/vramplan : qualified name. Only ever remove entries (split the function).
CORE_OVER = {
    "charts/gpu_compare.py:gpu_comparison_chart",
    "charts/waterfall.py:waterfall_rows",
    "scenario/build.py:fields_of",
}


def function_lengths(source: str) -> dict[str, int]:
    """{qualified name: lines} of every function and method in `source`."""
    out: dict[str, int] = {}

    def walk(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    out[name] = child.end_lineno - child.lineno + 1
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return out


def package_functions() -> dict[str, int]:
    """{"path:qualname": lines} over app/vramplan."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for name, n in function_lengths(path.read_text(encoding="utf-8")).items():
            found[f"{rel}:{name}"] = n
    return found


def is_core(key: str) -> bool:
    return key.split("/", 1)[0] not in NOT_CORE


def test_lengths_counted_def_line_to_last_line():
    src = ("import x\n\n"
           "@decorator\n"          # not counted
           "def f(a):\n"           # line 4: counted
           "    def g():\n"        # nested: 2 lines, also inside f's 4
           "        return 1\n"
           "    return g\n"
           "\n"
           "class C:\n"
           "    def m(self):\n"
           "        pass\n")
    assert function_lengths(src) == {"f": 4, "f.g": 2, "C.m": 2}


def test_no_function_over_hard_limit():
    over = {k: n for k, n in package_functions().items() if n > HARD_LIMIT}
    assert not over, f"functions over {HARD_LIMIT} lines (split them): {over}"


def test_core_functions_over_60_only_shrink():
    found = package_functions()
    over = {k: n for k, n in found.items() if is_core(k) and n > CORE_LIMIT}
    new = {k: n for k, n in over.items() if k not in CORE_OVER}
    assert not new, (f"core functions over {CORE_LIMIT} lines (split them by phase / component; "
                     f"do not add them to CORE_OVER): {new}")
    done = sorted(k for k in CORE_OVER if k not in over)
    assert not done, f"now within {CORE_LIMIT} lines or gone: remove from CORE_OVER: {done}"
