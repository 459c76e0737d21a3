"""The planner's widgets (ipywidgets, anywidget), one per file; they edit `ui/state/` and render
from it, `app.py` lays them out. Modules here may import `ui/state/`; state never imports them.
"""
