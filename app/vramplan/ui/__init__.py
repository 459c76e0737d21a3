"""The planner's widgets (ipywidgets). They hold no logic: a control edits state, a panel
renders what the API returns. `App` is the whole page; `notebooks/planner.ipynb` is
`from vramplan.ui import App; App()`.

Layout: `controls.py` (inputs, left column), `panels.py` (results, right column),
`app.py` (the page and its wiring), `style.py` (the stylesheet), `url.py` (`?gpu=` state),
`templates/` (the Voila template without CDN requests; see `vramplan.commands.app`).
"""
from .app import App

__all__ = ["App"]
