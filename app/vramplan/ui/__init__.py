"""The planner's widgets (ipywidgets). They hold no logic: a control edits state, a panel
renders what the API returns. `App` is the whole page; `notebooks/planner.ipynb` is
`from vramplan.ui import App; App()`.

Layout: `controls.py` (inputs, left column), `panels.py` (results, right column),
`app.py` (the page and its wiring), `style.py` (the stylesheet), `url.py` (`?gpu=` state),
`templates/` (the Voila template without CDN requests; see `vramplan.commands.app`).
"""
from .altair_offline import hide_slow_optional_imports

hide_slow_optional_imports()  # before anything imports altair (3.9 s saved per kernel)

from .app import App  # noqa: E402

__all__ = ["App"]
