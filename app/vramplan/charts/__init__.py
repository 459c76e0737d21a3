"""Altair chart builders: data in, chart out. No widgets here.

Every builder takes plain data (hardware-database devices as `Device` objects or their
`to_dict()` dicts, an estimate's components) and returns an altair chart; tests check
`chart.to_dict()`. altair is imported inside the builders so that `import vramplan.charts`
stays cheap (import altair takes seconds and the planner paints its controls before that).
One module per question: `gpus.py` (capacity vs bandwidth of every GPU), `breakdown.py`
(memory at the peak by component).

Vega-Lite note (see DESIGN.md): altair 6 writes Vega-Lite 6, which Voila/JupyterLab only
render through `alt.JupyterChart` with `enable_offline()`; `vramplan.ui` does that.
"""
from .breakdown import (COMPONENT_COLORS, COMPONENT_LABELS, OTHER_COMPONENT_COLOR,  # noqa: F401
                        breakdown_chart, breakdown_rows, chart_rows, component_label)
from .gpus import (OTHER_COLOR, SELECTED_COLOR, VENDOR_COLORS, capacity_bandwidth_chart,  # noqa: F401
                   device_rows, selected_ids, vendor_label)
