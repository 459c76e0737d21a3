"""Keep the chosen GPU in the page address (`?gpu=...`), so a plan can be shared as a link.

Reading: Voila gives the kernel the request's query string as $QUERY_STRING. Writing: a tiny
anywidget (inline ES module, no network) calls `history.replaceState` when the value changes,
and only inside Voila (`body[data-voila]`), never in a JupyterLab tab.
"""
from __future__ import annotations

import os
from urllib.parse import parse_qs

import anywidget
import traitlets as T

_ESM = r"""
function render({ model, el }) {
  el.style.display = "none";
  const write = () => {
    if (!document.body || !document.body.dataset.voila) return;
    const params = new URLSearchParams(window.location.search);
    const gpu = model.get("gpu");
    if (gpu) { params.set("gpu", gpu); } else { params.delete("gpu"); }
    const q = params.toString();
    const url = window.location.pathname + (q ? "?" + q : "") + window.location.hash;
    if (url !== window.location.pathname + window.location.search + window.location.hash) {
      window.history.replaceState(window.history.state, "", url);
    }
  };
  model.on("change:gpu", write);
  write();
}
export default { render };
"""


class UrlState(anywidget.AnyWidget):
    """Invisible widget mirroring `gpu` into the address bar."""

    _esm = T.Unicode(_ESM).tag(sync=True)
    gpu = T.Unicode("").tag(sync=True)


def query_params(environ=None) -> dict[str, str]:
    """The page's query parameters as Voila passed them to the kernel (empty elsewhere)."""
    q = (environ if environ is not None else os.environ).get("QUERY_STRING", "")
    return {k: v[-1] for k, v in parse_qs(q).items() if v}
