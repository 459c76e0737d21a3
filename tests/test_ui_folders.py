"""ui/ is two folders (issue 19, Build 3): `ui/state/` (plain Python: the plan, the draft, texts
and numbers; tested without a kernel) and `ui/widgets/` (the widgets). State never imports a
widget library or anything from ui/widgets/, at the top of a module or inside a function; read
with `ast`, never by importing. `ui/state/ruff.toml` bans the same names for `make lint`."""
from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "app" / "vramplan"
UI = PKG / "ui"
WIDGET_LIBS = {"ipywidgets", "anywidget", "IPython", "traitlets", "altair", "vl_convert", "voila"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module a source names in an import (relative ones resolved; `from x import y`
    gives both x and x.y, since y may be a module)."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                head = ".".join(base[:len(base) - (n.level - 1)] + ([n.module] if n.module else []))
            else:
                head = n.module or ""
            out.add(head)
            out |= {f"{head}.{a.name}" for a in n.names}
    return out


def widget_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    names = imported(ast.parse(source), module, is_package)
    return sorted(m for m in names if m.split(".")[0] in WIDGET_LIBS
                  or m == "vramplan.ui.widgets" or m.startswith("vramplan.ui.widgets."))


def test_state_never_imports_widgets():
    found = []
    for p in sorted((UI / "state").rglob("*.py")):
        bad = widget_imports(p.read_text(encoding="utf-8"), module_name(p), p.name == "__init__.py")
        found += [f"{p.relative_to(PKG)} imports {m}" for m in bad]
    assert not found, "\n".join(found)


def test_the_rule_sees_every_way_of_importing_a_widget():
    """The checker itself: each line below, alone in a module of ui/state/, is a violation."""
    mod = "vramplan.ui.state.example"
    for line in ("import ipywidgets as W", "from traitlets import Unicode",
                 "def f():\n    from IPython import get_ipython", "import altair.vegalite",
                 "from ..widgets import looks", "from ..widgets.jobs import kernel",
                 "from .. import widgets", "from vramplan.ui.widgets.app import App",
                 "import vl_convert", "from voila.utils import wait_for_request",
                 "import anywidget"):
        assert widget_imports(line, mod), line
    for line in ("from .text import size", "from ...scenario import form", "import html",
                 "from ...charts.gpu_compare import comparison_rows"):
        assert not widget_imports(line, mod), line


def test_every_ui_module_is_in_one_of_the_two_folders():
    loose = sorted(p.name for p in UI.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"ui/ modules outside state/ and widgets/: {loose}"
    assert (UI / "state" / "__init__.py").exists() and (UI / "widgets" / "__init__.py").exists()


def test_the_state_folders_ruff_bans_the_same_names():
    cfg = tomllib.loads((UI / "state" / "ruff.toml").read_text(encoding="utf-8"))
    banned = set(cfg["lint"]["flake8-tidy-imports"]["banned-api"])
    assert WIDGET_LIBS | {"vramplan.ui.widgets", "torch", "pynvml"} == banned


def test_importing_the_state_pulls_in_no_widget_library():
    import subprocess
    code = ("import sys; import vramplan.ui.state.state, vramplan.ui.state.draft, "
            "vramplan.ui.state.measure_state, vramplan.ui.state.gpu_table, "
            "vramplan.ui.state.stack_view; "
            f"bad = {sorted(WIDGET_LIBS)!r}; "
            "assert not [m for m in sys.modules if m.split('.')[0] in bad], 'widget library'")
    subprocess.run([sys.executable, "-c", code], check=True)
