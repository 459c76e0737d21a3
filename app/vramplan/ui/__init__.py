"""The planner's widgets (ipywidgets). State lives apart from them (`state.py`, plain Python:
the draft, the scenario, the estimate, history, listeners); the widgets edit it and render
from it, one per file; `app.py` lays them out. `notebooks/planner.ipynb` is
`from vramplan.ui import App; App()`.

Files: `state.py` (PlanState), `draft.py` (its plain helpers), `text.py` (parsing and number formats), `jobs.py` (long work off
the kernel's loop); widgets: `model_picker.py`, `fields.py` + `objects.py` (one form field),
`workload.py` (the form's sections), `gpu_picker.py`, `notices.py`, `verdict.py`,
`explore.py` (the charts), `chart.py` (one reused altair widget), `details.py`,
`device_card.py`, `export.py`, `section.py`; `looks.py` (layouts and styles shared between
leaf widgets: fewer models for the browser to fetch), `style.py` (the stylesheet), `url.py` (the
address bar), `templates/` (the Voila template without CDN requests).
"""
from .altair_offline import hide_slow_optional_imports

hide_slow_optional_imports()  # before anything imports altair (3.9 s saved per kernel)

__all__ = ["App"]


def __getattr__(name: str):
    """`from vramplan.ui import App` imports the widgets; `vramplan.ui.state` alone does not."""
    if name == "App":
        from .app import App
        return App
    raise AttributeError(f"module 'vramplan.ui' has no attribute {name!r}")
