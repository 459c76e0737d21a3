"""One palette: every chart colour is defined in charts/theme.py (Okabe-Ito), and each memory
component has the same colour in every chart that draws it (the breakdown bar, its static SVG,
the Phases chart, the page's legend)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("altair")

from vramplan import charts  # noqa: E402
from vramplan.charts import theme  # noqa: E402
from vramplan.charts.breakdown_svg import breakdown_svg  # noqa: E402
from vramplan.units import GiB  # noqa: E402

PKG = Path(charts.__file__).resolve().parents[1]
# a CSS/SVG colour: #rrggbb anywhere, #rgb after a quote, colon or '=' (not an issue number)
HEX = re.compile(r"#[0-9a-fA-F]{6}\b|[\"':=]\s*#[0-9a-fA-F]{3}\b")
# the page's own stylesheet (CSS of widgets and cards, no chart or component colour)
PAGE_CSS = {PKG / "ui" / "widgets" / "style.py"}


def test_no_colour_outside_the_theme():
    """Before: charts/breakdown.py held its own component colours (#2563eb weights, ...),
    charts/gpus.py, breakdown_svg.py and report/html.py their own greys and verdict colours."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path == Path(theme.__file__).resolve() or path in PAGE_CSS:
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HEX.search(line) and "http" not in line:
                found.append(f"{path.relative_to(PKG)}:{i}: {line.strip()}")
    assert not found, "colours defined outside charts/theme.py:\n" + "\n".join(found)


def _scale_colours(spec: dict, field: str = "component") -> dict:
    out = {}
    for lay in spec.get("layer", [spec]):
        enc = (lay.get("encoding") or {}).get("color") or {}
        if enc.get("field") == field and "scale" in enc:
            out.update(zip(enc["scale"]["domain"], enc["scale"]["range"]))
    return out


COMPONENTS = {"weights": 14 * GiB, "gradients": 14 * GiB, "optimizer_states": 28 * GiB,
              "activations": 6 * GiB, "temporary": GiB, "kv_cache": 2 * GiB,
              "allocator_slack": GiB, "cuda_context": GiB // 2, "nccl": GiB // 4}


def test_each_component_has_one_colour_in_every_chart():
    """Before: weights were #2563eb in the breakdown bar and #0072B2 in the Phases chart."""
    bar = _scale_colours(charts.breakdown_chart(COMPONENTS, 80 * GiB).to_dict())
    phases = {"forward": {k: v for k, v in COMPONENTS.items()
                          if k not in ("allocator_slack", "cuda_context")},
              "optimizer-step": {"weights": 14 * GiB, "optimizer_states": 28 * GiB}}
    ph = _scale_colours(charts.phases_chart(phases).to_dict())
    svg = breakdown_svg(COMPONENTS, 80 * GiB)
    assert set(bar) == set(COMPONENTS) and set(ph) == set(phases["forward"])
    for key in COMPONENTS:
        want = theme.component_color(key)
        assert bar[key] == want, key
        assert ph.get(key, want) == want, key
        assert f"fill='{want}'" in svg, key
    # the domain's components carry their Okabe-Ito hue; any other key the shared grey
    assert bar["weights"] == theme.OKABE_ITO["blue"] == "#0072B2"
    assert bar["optimizer_states"] == theme.OKABE_ITO["reddish_purple"]
    assert bar["nccl"] == theme.OTHER_COMPONENT


def test_report_css_uses_the_theme():
    from vramplan.report.html import CSS
    assert f"--fit:{theme.FIT_COLOR}" in CSS and f"--nofit:{theme.NO_FIT_COLOR}" in CSS
