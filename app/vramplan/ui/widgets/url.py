"""Keep the plan in the page address, so a link reopens it: the whole scenario as
`Scenario.to_query()` (`?model=...&task=...&gpu=...`); a link with only `?gpu=` still works.

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
    const query = model.get("query");
    let q;
    if (query) { q = query; } else {
      const params = new URLSearchParams(window.location.search);
      const gpu = model.get("gpu");
      if (gpu) { params.set("gpu", gpu); } else { params.delete("gpu"); }
      q = params.toString();
    }
    const url = window.location.pathname + (q ? "?" + q : "") + window.location.hash;
    if (url !== window.location.pathname + window.location.search + window.location.hash) {
      window.history.replaceState(window.history.state, "", url);
    }
  };
  model.on("change:gpu", write);
  model.on("change:query", write);
  write();
}
export default { render };
"""


class UrlState(anywidget.AnyWidget):
    """Invisible widget mirroring the plan into the address bar: `query` (the scenario's
    query string) when set, else just `gpu`."""

    _esm = T.Unicode(_ESM).tag(sync=True)
    gpu = T.Unicode("").tag(sync=True)
    query = T.Unicode("").tag(sync=True)


def wait_for_visitor(environ=None) -> None:
    """In a preheated Voila kernel (started before anyone asked for it), block until a visitor
    takes it, so that their request's query string is in the environment. Elsewhere: nothing."""
    env = environ if environ is not None else os.environ
    if env.get("VOILA_PREHEAT", "False") != "False":
        from voila.utils import wait_for_request
        wait_for_request()
        # once only: Voila sends the request to the first wait, a second one would never end
        env["VOILA_PREHEAT"] = "False"


def query_string(environ=None) -> str:
    """The page's raw query string as Voila passed it to the kernel ('' elsewhere)."""
    wait_for_visitor(environ)
    return (environ if environ is not None else os.environ).get("QUERY_STRING", "")


def query_params(environ=None) -> dict[str, str]:
    """The page's query parameters as Voila passed them to the kernel (empty elsewhere)."""
    q = query_string(environ)
    return {k: v[-1] for k, v in parse_qs(q).items() if v}
