"""Altair chart builders: data in, chart out. No widgets here.

Every builder takes plain data (hardware-database devices as `Device` objects or their
`to_dict()` dicts, an estimate's components) and returns an altair chart; tests check
`chart.to_dict()`. altair is imported inside the builders so that `import vramplan.charts`
stays cheap (import altair takes seconds and the planner paints its controls before that).
One module per question: `gpus.py` (capacity vs bandwidth of every GPU), `breakdown.py`
(memory at the peak by component), `memory_curve.py` (memory vs batch size / sequence length /
resolution with capacity lines), `gpu_compare.py` (every GPU on one plan, click to choose),
`bandwidth.py` (bandwidth need vs achievable; roofline), `waterfall.py` (the advisor's savings),
`hierarchy.py` (the chosen GPU's memory hierarchy), `phases.py` (phases of a step; a traced
timeline). `theme.py` holds the shared look (Okabe-Ito palette, fonts, axis styles) the newer
builders finish with.

Vega-Lite note (see DESIGN.md): altair 6 writes Vega-Lite 6, which Voila/JupyterLab only
render through `alt.JupyterChart` with `enable_offline()`; `vramplan.ui` does that.
"""
from .breakdown import (COMPONENT_COLORS, COMPONENT_LABELS, OTHER_COMPONENT_COLOR,  # noqa: F401
                        breakdown_chart, breakdown_rows, chart_rows, component_label)
from .gpus import (OTHER_COLOR, SELECTED_COLOR, VENDOR_COLORS, capacity_bandwidth_chart,  # noqa: F401
                   device_rows, selected_ids, vendor_label)
from .bandwidth import (arithmetic_intensity, bandwidth_chart, bandwidth_rows,  # noqa: F401
                        compute_ceiling, needed_gbs, roofline_chart, roofline_rows)
from .gpu_compare import (SELECTION, comparison_rows, comparison_selected_ids,  # noqa: F401
                          gpu_comparison_chart, picked_ids)
from .hierarchy import hierarchy_chart, hierarchy_rows, pcie_gbs  # noqa: F401
from .memory_curve import capacity_rows, memory_curve_chart, memory_curve_rows  # noqa: F401
from .phases import phase_rows, phases_chart, timeline_chart, timeline_rows  # noqa: F401
from .theme import spec_rows  # noqa: F401
from .waterfall import (cost_label, savings_waterfall_chart, waterfall_rows,  # noqa: F401
                        waterfall_steps)
