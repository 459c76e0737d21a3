"""The planner's state in plain Python: no widget library (ipywidgets, anywidget, IPython,
traitlets, altair, vl-convert, voila) and nothing from `ui/widgets/`, directly or inside a
function (tests/test_ui_folders.py reads every module here with `ast`; `ruff.toml` bans the
same libraries for `make lint`). Testable without a kernel or a browser.

`state.py` (PlanState: the draft, the scenario, the estimate, history, listeners), `draft.py`
(its plain helpers), `text.py` (parsing and number formats), `i18n.py` (the page's `_()` /
`N_()` / `msg()`, the language), `measure_state.py` (the measuring jobs' state),
`gpu_table.py` and `stack_view.py` (HTML text from plain data).
"""
