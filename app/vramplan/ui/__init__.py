"""The planner (ipywidgets). Two folders: `state/` (plain Python, no widget library: the
draft, the scenario, the estimate, history, listeners; tested without a kernel) and `widgets/`
(the widgets that edit the state and render from it, one per file; `widgets/app.py` lays them
out). State never imports widgets (tests/test_ui_folders.py, `state/ruff.toml`).
`notebooks/planner.ipynb` is `from vramplan.ui import App; App()`.

state/: `state.py` (PlanState), `draft.py` (its plain helpers), `text.py` (parsing and number
formats), `i18n.py` (the page's language), `measure_state.py`, `gpu_table.py`, `stack_view.py`.
widgets/: `jobs.py` (long work off the kernel's loop), `model_picker.py`, `fields.py` +
`objects.py` (one form field), `workload.py` (the form's sections), `gpu_picker.py`,
`notices.py`, `verdict.py`, `explore.py` (the charts), `chart.py` (one reused altair widget),
`details.py`, `device_card.py`, `export.py`, `section.py`; `looks.py` (layouts and styles
shared between leaf widgets: fewer models for the browser to fetch), `style.py` (the
stylesheet), `url.py` (the address bar); `templates/` (the Voila template without CDN requests).
"""
from .widgets.altair_offline import hide_slow_optional_imports

hide_slow_optional_imports()  # before anything imports altair (3.9 s saved per kernel)

__all__ = ["App"]


def __getattr__(name: str):
    """`from vramplan.ui import App` imports the widgets; `vramplan.ui.state` alone does not."""
    if name == "App":
        from .widgets.app import App
        return App
    raise AttributeError(f"module 'vramplan.ui' has no attribute {name!r}")
