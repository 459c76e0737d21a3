"""Two small browser-side widgets for the export panel (anywidget: inline ES modules, nothing
fetched from the network).

`ShareLink`: the link to this plan as a full URL. Only the browser knows where the page is
served (scheme, host, path; the kernel sees the query string alone), so the module builds the
URL from `window.location` and the plan's query (`Scenario.to_query()`, what the state holds).
In Voila (`body[data-voila]`) that is the planner's own address; in a JupyterLab tab the
location is the notebook editor's, so there the link stays the query (`?model=...`), which a
Voila page of the planner opens. The browser sends the address back (`base`), so a report the
page makes gives the same full link.

`Download`: hands a file the kernel made to the browser's own download (a Blob URL on a hidden
`<a download>` clicked by the script), so one click on a button saves the file. Each `save()`
sends the file once (its `n` counts the saves, so the same file can be saved twice).
"""
from __future__ import annotations

import base64

import anywidget
import traitlets as T

_SHARE_ESM = r"""
function render({ model, el }) {
  const box = document.createElement("div");
  box.className = "vp-share";
  const key = document.createElement("span");
  key.className = "vp-k";
  const link = document.createElement("a");
  link.className = "vp-share-link";
  box.append(key, " ", link);
  el.append(box);
  const draw = () => {
    const q = model.get("query");
    box.style.display = q ? "" : "none";
    key.textContent = model.get("label");
    const inVoila = !!(document.body && document.body.dataset.voila);
    const base = inVoila ? window.location.origin + window.location.pathname : "";
    if (model.get("base") !== base) {   // the kernel's reports give the same full URL
      model.set("base", base);
      model.save_changes();
    }
    const url = inVoila ? base + (q ? "?" + q : "") : "?" + q;
    link.href = url;
    link.textContent = url;
  };
  model.on("change:query", draw);
  model.on("change:label", draw);
  draw();
}
export default { render };
"""

_DOWNLOAD_ESM = r"""
function render({ model, el }) {
  el.style.display = "none";
  model.on("change:file", () => {
    const f = model.get("file");
    if (!f || !f.name) return;
    const raw = atob(f.b64);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    const url = URL.createObjectURL(new Blob([bytes], { type: f.mime }));
    const a = document.createElement("a");
    a.href = url;
    a.download = f.name;
    a.style.display = "none";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  });
}
export default { render };
"""


class ShareLink(anywidget.AnyWidget):
    """The plan's link: `label`, then the page's URL with `query` (hidden while empty)."""

    _esm = T.Unicode(_SHARE_ESM).tag(sync=True)
    query = T.Unicode("").tag(sync=True)
    label = T.Unicode("").tag(sync=True)
    base = T.Unicode("").tag(sync=True)   # the planner's address, from the browser ("" unknown)


class Download(anywidget.AnyWidget):
    """Invisible: each `save(name, mime, text)` makes the browser download that file."""

    _esm = T.Unicode(_DOWNLOAD_ESM).tag(sync=True)
    file = T.Dict({}).tag(sync=True)

    def save(self, name: str, mime: str, text: str) -> None:
        n = int(self.file.get("n", 0)) + 1
        self.file = {"name": name, "mime": f"{mime};charset=utf-8", "n": n,
                     "b64": base64.b64encode(text.encode("utf-8")).decode("ascii")}
