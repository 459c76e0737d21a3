"""The data flow is the package tree: each module imports only from its own or earlier stages
(function-level imports included), with no import circle anywhere, and the heavy third-party
libraries stay in the layers that need them. Read with `ast`, never by importing.

The stage order (also in docs/ARCHITECTURE.md):
"""
from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "app" / "vramplan"

# (stage, module patterns); the first stage whose pattern matches a module is its stage
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("ground", ("vramplan", "vramplan.vocab", "vramplan.units", "vramplan.errors",
                "vramplan.safejson", "vramplan.readers", "vramplan.i18n", "vramplan.vec",
                "vramplan.user_cache")),
    ("facts", ("vramplan.hardware", "vramplan.hardware.*", "vramplan.catalog",
               "vramplan.catalog.*", "vramplan.precision", "vramplan.optimizers")),
    ("layout", ("vramplan.parallel", "vramplan.runtime")),
    ("families", ("vramplan.workloads", "vramplan.workloads.family", "vramplan.workloads.registry",
                  "vramplan.workloads.*.family")),
    ("scenario", ("vramplan.scenario", "vramplan.scenario.*")),
    ("footprint", ("vramplan.workloads.*",)),
    ("overhead", ("vramplan.overhead",)),
    ("result", ("vramplan.result",)),
    ("estimate", ("vramplan.estimate", "vramplan.timing")),
    ("advice", ("vramplan.advisor", "vramplan.advisor.*", "vramplan.sweep", "vramplan.sweep.*")),
    ("measure", ("vramplan.measure", "vramplan.measure.*")),
    ("report", ("vramplan.report", "vramplan.report.*", "vramplan.charts", "vramplan.charts.*")),
    ("ui", ("vramplan.ui", "vramplan.ui.*")),
    ("server", ("vramplan.server", "vramplan.server.*")),
    ("commands", ("vramplan.commands", "vramplan.commands.*", "vramplan.cli",
                  "vramplan.__main__")),
]
ORDER = [name for name, _ in STAGES]
__doc__ += "\n" + " -> ".join(ORDER) + "\n"

# third-party libraries and the stages that may import them (anywhere in the module)
HEAVY = {
    "torch": ("measure",),
    "pynvml": ("measure",),
    "altair": ("report", "ui"),
    "vl_convert": ("report", "ui"),
    "ipywidgets": ("ui",),
    "anywidget": ("ui",),
    "traitlets": ("ui", "server", "commands"),
    "IPython": ("ui",),
    "voila": ("ui", "server", "commands"),
}
# of those, the ones nothing outside the torch-only modules may pull in at import time: the
# planner and the CLI start without them (the modules that ARE torch code, the tracer's, are
# imported by the measuring functions only, inside functions)
LAZY_ONLY = ("torch", "pynvml")
TORCH_ONLY = ("vramplan.measure.tracing.*",)


def modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (p, is_pkg)
    return out


MODULES = modules()


def stage_of(mod: str) -> str:
    for name, patterns in STAGES:
        if any(fnmatch.fnmatchcase(mod, pat) for pat in patterns):
            return name
    raise AssertionError(f"{mod} belongs to no stage: add it to STAGES (and ARCHITECTURE.md)")


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    if node.level > 1:
        base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(mod: str) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level) of every import in `mod`."""
    path, is_pkg = MODULES[mod]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    for n in tree.body:  # `if TYPE_CHECKING:` / try blocks at module level count as top level
        for sub in ast.walk(n):
            if isinstance(n, (ast.If, ast.Try)):
                top.add(id(sub))
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            base = _resolve(mod, is_pkg, n)
            for a in n.names:
                full = f"{base}.{a.name}"
                out.append((full if full in MODULES else base, n.lineno, id(n) in top))
        elif isinstance(n, ast.Import):
            out += [(a.name, n.lineno, id(n) in top) for a in n.names]
    return out


def edges() -> dict[str, set[str]]:
    g = {m: set() for m in MODULES}
    for m in MODULES:
        for target, _, _ in imports(m):
            if target.startswith("vramplan") and target in MODULES and target != m:
                g[m].add(target)
    return g


def test_every_module_has_a_stage():
    for m in MODULES:
        stage_of(m)


def test_imports_flow_one_way():
    bad = []
    for m in sorted(MODULES):
        here = ORDER.index(stage_of(m))
        for target, line, _ in imports(m):
            if not target.startswith("vramplan") or target not in MODULES:
                continue
            there = ORDER.index(stage_of(target))
            if there > here:
                bad.append(f"{m} ({stage_of(m)}) imports {target} ({stage_of(target)}) "
                           f"at line {line}")
    assert not bad, "imports against the flow:\n" + "\n".join(bad)


def test_no_import_circles():
    g = edges()
    seen: dict[str, int] = {}
    cycles = []

    def visit(m, stack):
        seen[m] = 1
        stack.append(m)
        for t in sorted(g[m]):
            if seen.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in seen:
                visit(t, stack)
        stack.pop()
        seen[m] = 2

    for m in sorted(g):
        if m not in seen:
            visit(m, [])
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_heavy_libraries_stay_in_their_layers():
    bad = []
    for m in sorted(MODULES):
        stage = stage_of(m)
        for target, line, _ in imports(m):
            root = target.split(".")[0]
            if root in HEAVY and stage not in HEAVY[root]:
                bad.append(f"{m} ({stage}) imports {target} at line {line}")
    assert not bad, "\n".join(bad)


def _torch_only(mod: str) -> bool:
    return any(fnmatch.fnmatchcase(mod, pat) for pat in TORCH_ONLY)


def test_torch_and_nvml_are_never_imported_at_import_time():
    """Follow import-time edges from every module that is not torch code itself: none reaches a
    module-level `import torch` / `import pynvml`."""
    bad = []
    for start in sorted(m for m in MODULES if not _torch_only(m)):
        todo, seen = [start], {start}
        while todo:
            m = todo.pop()
            for target, line, top in imports(m):
                if not top:
                    continue
                if target.split(".")[0] in LAZY_ONLY:
                    bad.append(f"{start}: {m} imports {target} at import time (line {line})")
                elif target in MODULES and target not in seen:
                    seen.add(target)
                    todo.append(target)
    assert not sorted(set(bad)), "\n".join(sorted(set(bad)))


def test_no_private_module_imported_from_another_folder():
    bad = []
    for m in sorted(MODULES):
        folder = m.rsplit(".", 1)[0] if not MODULES[m][1] else m
        for target, line, _ in imports(m):
            if target in MODULES and target.rsplit(".", 1)[-1].startswith("_") \
                    and not target.endswith("__init__"):
                tfolder = target.rsplit(".", 1)[0]
                if tfolder != folder:
                    bad.append(f"{m} imports private {target} (line {line})")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("mod, target", [("vramplan.estimate", "vramplan.advisor"),
                                         ("vramplan.scenario.model", "vramplan.overhead")])
def test_the_check_itself_catches_an_upward_import(mod, target):
    # the rule applied to a made-up edge: would it be caught?
    assert ORDER.index(stage_of(target)) > ORDER.index(stage_of(mod))
