"""Make altair's chart widget ready in a fresh kernel in a fraction of a second, offline.

Measured in a new kernel on the 2-core dev machine (`python -X importtime`, cProfile): of
the ~7 s a first `App()` took, 3.9 s went to `jsonschema` building 39 lark grammars of the
optional `rfc3987_syntax` package (IRI format checks, which altair never asks for) and 1.8 s
to `vl_convert.javascript_bundle`, which bundles the same JavaScript for every kernel.

- `rfc3987_syntax` is hidden from this process before altair is imported (jsonschema then
  skips the two IRI format checkers; schema validation is unchanged);
- the offline bundle is computed once per (altair, vl-convert) version and kept in a cache
  folder owned by this user (`VRAMPLAN_CACHE_DIR`, else `$XDG_CACHE_HOME/vramplan`, else
  `~/.cache/vramplan`, else a private temporary folder); later kernels read the file.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from ...user_cache import private_dir as _private_dir


def hide_slow_optional_imports() -> None:
    """Keep jsonschema from importing rfc3987_syntax (3.9 s of grammar building)."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)


def cache_dir() -> Path | None:
    env = os.environ.get("VRAMPLAN_CACHE_DIR")
    candidates = [Path(env)] if env else []
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        candidates.append(Path(xdg) / "vramplan")
    candidates.append(Path.home() / ".cache" / "vramplan")
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    candidates.append(Path(tempfile.gettempdir()) / f"vramplan-cache-{uid}")
    for c in candidates:
        d = _private_dir(c)
        if d is not None:
            return d
    return None


def enable_offline() -> None:
    """`alt.JupyterChart.enable_offline()`, with its bundle read from the cache when there."""
    hide_slow_optional_imports()
    import altair as alt
    chart_cls = alt.JupyterChart
    if chart_cls._is_offline:
        return
    try:
        import vl_convert
        key = f"altair-{alt.__version__}-vlc-{vl_convert.__version__}.mjs"
    except (ImportError, AttributeError):
        chart_cls.enable_offline()
        return
    folder = cache_dir()
    cached = folder / key if folder is not None else None
    if cached is not None and cached.is_file():
        try:
            chart_cls._esm = cached.read_text(encoding="utf-8")
            chart_cls._is_offline = True
            return
        except (OSError, UnicodeDecodeError):
            pass
    chart_cls.enable_offline()
    if cached is not None:
        try:
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".bundle-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(chart_cls._esm)
            os.replace(tmp, cached)
        except OSError:
            pass
