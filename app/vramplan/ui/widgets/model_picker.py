"""Choose the model: a family, then a catalog model (search by id, alias or family), a size
only ('70B'), your own Hugging Face config.json (pasted or uploaded, at most 1 MB, read with
`vramplan.safejson.loads`, never executed), or no model (graphics, volumes, arrays).
The widget edits `PlanState`; what the choices mean is the state's and the catalog's.
"""
from __future__ import annotations

import html

import ipywidgets as W

from ... import safejson
from ...catalog import list_models
from ...errors import VramplanError
from . import looks as L
from ..state import state as S
from ..state import text as T
from ..state.i18n import N_, _, msg, speaking_for

MAX_CONFIG_BYTES = 1_000_000
FAMILY_LABELS = {"decoder": N_("Decoder LLMs"), "encoder": N_("Encoders"),
                 "encoder-decoder": N_("Encoder-decoders"), "cnn": N_("CNNs"),
                 "vit": N_("Vision transformers"), "detection": N_("Detection"),
                 "segmentation": N_("Segmentation"), "unet": N_("U-Nets"),
                 "diffusion": N_("Diffusion pipelines")}
MODES = [(N_("Size only (parameter count)"), S.SIZE_ONLY), (N_("Your own config.json"), S.OWN),
         (N_("No model (graphics / volume / arrays)"), S.NO_MODEL)]


def family_options() -> list[tuple[str, str]]:
    models = list_models()
    fams = sorted({m.family for m in models}, key=lambda f: (
        list(FAMILY_LABELS).index(f) if f in FAMILY_LABELS else 99, f))
    counts = {f: sum(m.family == f for m in models) for f in fams}
    return ([(_("All families"), S.ALL)] +
            [(f"{_(FAMILY_LABELS.get(f, T.label_of(f)))} ({counts[f]})", f) for f in fams] +
            [(_(t), v) for t, v in MODES])


def read_config(data: bytes | str, name: str = "config.json") -> dict:
    """A config.json's bytes or text -> dict, or VramplanError saying why not."""
    size = len(data.encode() if isinstance(data, str) else data)
    if size > MAX_CONFIG_BYTES:
        raise VramplanError(f"{name} is {size:,} bytes; at most {MAX_CONFIG_BYTES:,} are read")
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = safejson.decode_text(bytes(data), name)
    value = safejson.loads(data, name)
    if not isinstance(value, dict):
        raise VramplanError(f"{name} must hold a JSON object (the keys of a Hugging Face "
                            f"config.json), got {type(value).__name__}")
    return value


def _field(key: str, label: str, widget: W.Widget) -> W.VBox:
    """A labelled cell; its own layout (the picker hides and shows it)."""
    box = W.VBox([L.html(f"<div class='vp-label'>{html.escape(label)}</div>"), widget])
    box.add_class("vp-field")
    box.add_class(f"vp-f-{key}")
    return box


class ModelPicker(W.VBox):
    """The family and the model; the size box and the config.json box are made the first
    time their family choice shows them (most pages never do), then kept."""

    def __init__(self, state: S.PlanState):
        self.state = state
        self._syncing = False
        self.family = L.dropdown(options=family_options(), value=S.ALL)
        self.model = W.Combobox(placeholder=_("Search a model id or alias, e.g. Llama-3.1-8B"),
                                ensure_option=False, continuous_update=False,
                                layout=L.shared("layout"), style=L.shared("text"))
        self.hint = L.html()
        self.message = L.html()
        self.matches = W.Box(layout=L.shared("layout"))     # .vp-choices wraps its row
        self.matches.add_class("vp-choices")
        self._match_buttons: dict[str, W.Button] = {}
        self.boxes = {
            "family": _field("family", _("Family"), self.family),
            "model": _field("model", _("Model"), self.model),
        }
        self.boxes["model"].add_class("vp-wide")
        super().__init__([*self.boxes.values(), self.hint, self.message, self.matches],
                         layout=L.shared("layout"))
        self.add_class("vp-model-picker")
        self._on = lambda fn: speaking_for(state, fn)   # callbacks in the page's language
        self.family.observe(self._on(self._on_family), "value")
        self.model.observe(self._on(self._on_model), "value")

    # the boxes made on first show
    @property
    def size(self) -> W.Text:
        if "architecture" not in self.boxes:
            w = L.text(placeholder=_("e.g. 7B, 70B, 350M"), continuous_update=False)
            w.observe(self._on(self._on_size), "value")
            self._size = w
            self._add("architecture", _field("architecture", _("Parameters (size-only decoder)"),
                                             w))
        return self._size

    def _own(self) -> None:
        if "own" in self.boxes:
            return
        self._paste = W.Textarea(placeholder=_('Paste a config.json: {"model_type": "llama", ...}'),
                                 rows=4, layout=W.Layout(width="100%"))
        self._use = L.button(description=_("Use this config"))
        self._upload = W.FileUpload(accept=".json,application/json", multiple=False,
                                    description=_("Upload config.json"))
        self._use.on_click(self._on(self._on_paste))
        self._upload.observe(self._on(self._on_upload), "value")
        row = W.HBox([self._use, self._upload], layout=W.Layout(flex_flow="row wrap"))
        self._add("own", _field("own", _("Your own config.json (at most 1 MB, never run)"),
                                L.vbox([self._paste, row])))

    @property
    def paste(self) -> W.Textarea:
        self._own()
        return self._paste

    @property
    def use(self) -> W.Button:
        self._own()
        return self._use

    @property
    def upload(self) -> W.FileUpload:
        self._own()
        return self._upload

    def _add(self, name: str, box: W.VBox) -> None:
        """Put a box made on first show after the family and model boxes."""
        self.boxes[name] = box
        order = [b for k, b in self.boxes.items() if k in ("family", "model", "architecture",
                                                            "own")]
        self.children = [*order, self.hint, self.message, self.matches]

    # ------------------------------------------------------------ state -> widgets
    def render(self) -> None:
        st = self.state
        fam = st.family
        self._syncing = True
        try:
            cur = self.family.value
            if fam in (S.SIZE_ONLY, S.NO_MODEL, S.OWN):
                want = fam
            elif self._pending_own:
                want = S.OWN              # waiting for a config.json
            elif fam is None:             # a model id being typed
                want = cur if cur not in (S.SIZE_ONLY, S.NO_MODEL, S.OWN) else S.ALL
            else:
                want = cur if cur in (S.ALL, fam) else fam
            if cur != want:
                self.family.value = want
            mode = self.family.value
            filt = mode if mode not in (S.ALL, S.SIZE_ONLY, S.OWN, S.NO_MODEL) else None
            names = []
            for m in S.search_models(family=filt):
                names += [m.id, *m.aliases]
            if list(self.model.options) != names:
                self.model.options = names
            model = st.draft.get("model") or ""
            if self.model.value != model:
                self.model.value = str(model)
            arch = st.draft.get("architecture")
            if fam == S.SIZE_ONLY and isinstance(arch, dict) and arch.get("params"):
                txt = T.format_params(arch["params"])
                if T.parse_params(self.size.value) != arch["params"]:
                    self.size.value = txt
        finally:
            self._syncing = False
        self.boxes["model"].layout.display = "" if mode not in (S.SIZE_ONLY, S.OWN,
                                                                S.NO_MODEL) else "none"
        if mode == S.SIZE_ONLY:
            self.size                 # noqa: B018 (made on first show)
        if mode == S.OWN:
            self._own()
        if "architecture" in self.boxes:
            self.boxes["architecture"].layout.display = "" if mode == S.SIZE_ONLY else "none"
        if "own" in self.boxes:
            self.boxes["own"].layout.display = "" if mode == S.OWN else "none"
        hint = msg(S.describe_model(st.draft))
        if not hint and fam not in (None, S.NO_MODEL) and st.draft.get("model"):
            hint = self._catalog_hint(str(st.draft["model"]))
        self.hint.value = f"<div class='vp-hint'>{html.escape(hint)}</div>" if hint else ""
        err = msg(st.errors.get("model") or st.errors.get("architecture") or "")
        if err:
            err = ("model: " if "model" in st.errors else "architecture: ") + err
        if "model" in st.errors and T.looks_like_size(st.draft.get("model")):
            err += _(" (a size alone is read as a size-only decoder: type it as 70B)")
        self.message.value = T.message_html(self._local or err)
        for w in [self.model] + ([self.size] if "architecture" in self.boxes else []):
            (w.add_class if err else w.remove_class)("vp-input-error")
        typed = str(st.draft.get("model") or "") if "model" in st.errors else ""
        found = [m.id for m in S.search_models(typed.replace("-", " ").replace("/", " "))][:6] \
            if typed else []
        kids = [self._match(m) for m in found]
        if list(self.matches.children) != kids:
            self.matches.children = kids

    _local = ""
    _pending_own = False

    def _match(self, model: str) -> W.Button:
        """A button for a catalog model that matches what was typed (id, alias, family)."""
        if model not in self._match_buttons:
            b = L.button(description=model, tooltip=_("use {model}").format(model=model))
            b.add_class("vp-choice")
            b.on_click(lambda _, m=model: self.state.set_model(m))
            self._match_buttons[model] = b
        return self._match_buttons[model]

    @staticmethod
    def _catalog_hint(model: str) -> str:
        m = next((m for m in list_models() if m.id == model or model in m.aliases), None)
        if m is None:
            return ""
        fam = _(FAMILY_LABELS.get(m.family, m.family))
        alias = " · " + _("also {names}").format(names=", ".join(m.aliases[:2])) \
            if m.aliases else ""
        return f"{fam}{alias}"

    # ------------------------------------------------------------ widgets -> state
    def _say(self, text: str = "") -> None:
        text = msg(text) if text else text
        self._local = text
        self.message.value = T.message_html(text)

    def _on_family(self, change) -> None:
        if self._syncing:
            return
        self._say()
        self._pending_own = change["new"] == S.OWN
        if self._pending_own:
            self.render()             # the paste / upload box, until a config arrives
            return
        self.state.set_family(change["new"])
        self.render()

    def _on_model(self, change) -> None:
        if not self._syncing and change["new"].strip():
            self._say()
            self.state.set_model(change["new"])

    def _on_size(self, change) -> None:
        if not self._syncing and change["new"].strip():
            self._say()
            self.state.set_size(change["new"])

    def _take(self, data, name: str) -> None:
        try:
            config = read_config(data, name)
        except VramplanError as exc:
            self._say(str(exc))
            return
        self._say()
        self._pending_own = False
        self.state.set_architecture(config)

    def _on_paste(self, button=None) -> None:
        if self.paste.value.strip():
            self._take(self.paste.value, _("the pasted config"))

    def _on_upload(self, change) -> None:
        files = change["new"]
        if not files:
            return
        f = files[0]
        if f.get("size", 0) > MAX_CONFIG_BYTES:
            self._say(_("{name} is {size} bytes; at most {limit} are read").format(
                name=f.get("name", _("the file")), size=f"{f['size']:,}",
                limit=f"{MAX_CONFIG_BYTES:,}"))
            return
        self._take(bytes(f["content"]), f.get("name") or "config.json")
