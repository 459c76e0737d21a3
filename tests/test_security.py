"""Security promises that can be checked by reading the code (SECURITY.md lists each promise
and its test): nothing a visitor sends is evaluated, unpickled or YAML-loaded; JSON from
outside goes through safejson; the page's query parsing never opens a file."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "app" / "vramplan"
BANNED_CALLS = {"eval", "exec", "compile", "__import__"}
BANNED_MODULES = {"pickle", "cPickle", "dill", "marshal", "shelve", "yaml", "jsonpickle"}


def _py():
    return sorted(PKG.rglob("*.py"))


def test_no_eval_exec_pickle_or_yaml_anywhere():
    bad = []
    for p in _py():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                    n.func.id in BANNED_CALLS:
                bad.append(f"{p.relative_to(PKG)}:{n.lineno} calls {n.func.id}()")
            if isinstance(n, ast.Import):
                bad += [f"{p.relative_to(PKG)}:{n.lineno} imports {a.name}" for a in n.names
                        if a.name.split(".")[0] in BANNED_MODULES]
            if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] in BANNED_MODULES:
                bad.append(f"{p.relative_to(PKG)}:{n.lineno} imports {n.module}")
    assert not bad, "\n".join(bad)


def test_outside_json_goes_through_safejson():
    """json.loads on text from outside is only in safejson (and in places that re-read JSON
    the package itself wrote: listed here, each with why)."""
    own = {"safejson.py",
           # reads the package's own data files (catalog, advisor costs) or JSON it dumped
           "catalog/__init__.py", "scenario/model.py", "scenario/resolve.py",
           "scenario/build.py", "scenario/query.py", "calibration_store.py",
           "measure/calibration_store.py", "ui/state/state.py", "ui/widgets/workload.py",
           # the calibration database's own rows (JSON columns vramplan wrote)
           "measure/calibration/__init__.py", "measure/calibration/store.py",
           # a cache key: json.loads of the json.dumps of the model's own config
           "workloads/vision/footprint.py"}
    bad = []
    for p in _py():
        rel = str(p.relative_to(PKG))
        if rel in own or rel.startswith(("measure/tracing", "tracing/", "live/", "measure/live")):
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    n.func.attr in ("loads", "load") and isinstance(n.func.value, ast.Name) \
                    and n.func.value.id == "json":
                bad.append(f"{rel}:{n.lineno}")
    assert not bad, "json.load(s) outside safejson: " + ", ".join(bad)


def test_the_query_parser_and_the_ui_never_open_files():
    bad = []
    # ui/widgets/altair_offline.py reads back the chart bundle it cached in the kernel user's own
    # private folder (0700, owner checked): never a path a visitor chose
    exempt = {PKG / "ui" / "widgets" / "altair_offline.py"}
    for p in [PKG / "scenario" / "query.py", *sorted((PKG / "ui").rglob("*.py"))]:
        if p in exempt:
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for n in ast.walk(tree):
            if isinstance(n, ast.Call):
                f = n.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
                if name in ("open", "read_text", "read_bytes", "expanduser"):
                    bad.append(f"{p.relative_to(PKG)}:{n.lineno} {name}()")
    assert not bad, "\n".join(bad)
