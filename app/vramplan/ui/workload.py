"""Workload controls: the model, the task, the sizes, how it runs and how it is spread.

The controls edit a *draft*: the model (or a size), the task and the entries the user typed or
picked (`entries`, keyed by scenario key, dotted for nested keys: `lora.rank`,
`parallel.gpus`). `scenario_dict(gpu)` turns the draft into the dict `Scenario.from_dict`
validates; the controls decide nothing about memory. Everything they offer comes from the API,
so a new model family needs no change here: the tasks from `vramplan.scenario.valid_tasks`,
the size fields from the normalised scenario of the model and task (a field shows when the
scenario holds a value for it: `seq_len` for a transformer, the native `resolution` of a
vision model, a pipeline's `steps` / `frames` / `text_len` / `guidance`), the "how it runs"
fields and the precisions from whether `Scenario.from_dict` accepts them.

Fields the user did not touch show the normalised scenario's value (defaults change with the
model and the task), with the default as a hint once cleared; a field the user edited keeps
exactly what was typed, also when it is rejected, and the rejection is shown under it
(`show_error(key, message)`).
"""
from __future__ import annotations

import functools
import html
import json
import re
from typing import Any, Callable

import ipywidgets as W

from ..errors import VramplanError
from ..scenario import (KV_CACHE_DTYPES, OFFLOAD, OPTIMIZERS, PRECISIONS, Scenario,
                        valid_tasks)
from ..scenario.extra import ARRAY_DTYPES, render_targets as _render_targets
from .controls import message_html
from .panels import section

PARAMS = "params"           # the family choice "size only": architecture {"params": N}
NOMODEL = "no-model"        # the family choice "no model": the model-less tasks (valid_tasks(None))

TASK_LABELS = {
    "train": "train · full training / fine-tuning",
    "lora": "lora · LoRA adapters, frozen base",
    "qlora": "qlora · LoRA on a quantised base",
    "forward": "forward · one inference pass",
    "generate": "generate · prefill + decode",
    "serve": "serve · engine with a KV pool",
    "denoise": "denoise · diffusion pipeline",
    "load": "load · weights resident only",
    "render": "render · graphics frame",
    "volume": "volume · 3-D voxel arrays",
    "array": "array · scientific arrays",
}
FAMILY_LABELS = {"decoder": "Decoder LLMs", "encoder": "Encoders", "encoder-decoder":
                 "Encoder-decoders", "cnn": "CNNs", "vit": "Vision transformers",
                 "detection": "Detection", "segmentation": "Segmentation", "unet": "U-Nets",
                 "diffusion": "Diffusion pipelines"}

# text fields: key -> (label, kind, placeholder); kinds: int, float, res
TEXT_FIELDS = {
    "batch_size": ("Batch size", "int", "per GPU"),
    "seq_len": ("Sequence length", "int", "tokens"),
    "new_tokens": ("New tokens", "int", "generated"),
    "target_len": ("Target length", "int", "decoder tokens"),
    "resolution": ("Resolution", "res", "h × w"),
    "frames": ("Frames", "int", "video frames"),
    "steps": ("Steps", "int", "denoising steps"),
    "text_len": ("Prompt tokens", "int", "tokens"),
    "gradient_accumulation": ("Grad. accumulation", "int", "micro-batches"),
    "lora.rank": ("LoRA rank", "int", "r"),
    "serving.gpu_memory_utilization": ("GPU memory util.", "float", "0-1"),
    "serving.max_num_seqs": ("Max sequences", "int", "concurrent requests"),
    "serving.max_model_len": ("Max model length", "int", "tokens"),
    "fps": ("Frame rate", "float", "frames/s"),
    "frames_in_flight": ("Frames in flight", "int", "1-8"),
    "texture_budget": ("Texture budget", "size", "e.g. 4 GiB"),
    "channels": ("Channels", "int", "per voxel"),
    "copies": ("Copies", "int", "resident at once"),
    "arrays.shape": ("Array shape", "res", "e.g. 4096 × 4096"),
    "parallel.gpus": ("GPUs", "int", "total"),
    "parallel.tensor": ("Tensor parallel", "int", "t"),
    "parallel.pipeline": ("Pipeline parallel", "int", "p"),
}
DROPDOWNS = {
    "precision": ("Precision", PRECISIONS),
    "optimizer": ("Optimizer", OPTIMIZERS),
    "checkpointing": ("Checkpointing", ("none", "selective", "full")),
    "attention": ("Attention", ("eager", "sdpa", "flash")),
    "parallel.zero": ("ZeRO / FSDP", (0, 1, 2, 3)),
    "guidance": ("Classifier-free guidance", (("on (CFG: 2x denoiser batch)", True),
                                              ("off", False))),
    "serving.kv_cache_dtype": ("KV cache dtype", KV_CACHE_DTYPES),
    "serving.cuda_graphs": ("CUDA graphs", (("on", True), ("off", False))),
    "msaa": ("MSAA", (("off (1 sample)", 1), ("2×", 2), ("4×", 4), ("8×", 8), ("16×", 16))),
    "render_targets": ("Targets (+ d32f depth)", ()),            # RENDER_PRESETS' names
    "dtype": ("Data type", tuple(ARRAY_DTYPES)),
    "arrays.dtype": ("Array dtype", tuple(ARRAY_DTYPES)),
}
# render_targets presets (docs/scenario-keys.md): name -> the list the scenario holds
RENDER_PRESETS = {
    "SDR · rgba8": [{"name": "color", "format": "rgba8"},
                                 {"name": "depth", "format": "d32f"}],
    "HDR · rgba16f": [{"name": "color", "format": "rgba16f"},
                                   {"name": "depth", "format": "d32f"}],
    "HDR · rgba32f": [{"name": "color", "format": "rgba32f"},
                                          {"name": "depth", "format": "d32f"}],
    "G-buffer · 4× rgba16f": [
        {"name": "gbuffer", "format": "rgba16f", "count": 4},
        {"name": "depth", "format": "d32f"}],
}
_PRESET_LISTS = {name: _render_targets(v) for name, v in RENDER_PRESETS.items()}
DROPDOWNS["render_targets"] = ("Targets (+ d32f depth)", tuple(RENDER_PRESETS))
OPTION_BOXES = {"compile": "torch.compile", "chunked-loss": "Chunked loss",
                "expandable-segments": "Expandable segments"}
OFFLOAD_BOXES = {"optimizer": "Optimizer", "params": "Params", "gradients": "Gradients",
                 "activations": "Activations", "model": "Model (per component)"}
assert set(OFFLOAD_BOXES) <= set(OFFLOAD)
# workload keys: a field shows when the task's normalised scenario holds the key
_EXTRA = ("msaa", "render_targets", "frames_in_flight", "fps", "texture_budget", "channels",
          "dtype", "copies", "arrays.shape", "arrays.dtype")
# the workload modules' own default sizes of the model-less tasks (the scenario leaves
# `resolution` unset there): shown as the hint
# tasks whose batch does not apply (workloads/graphics.py, array.py: one frame / array set)
_BATCHLESS = ("render", "array")

# sizes a model and task decide: a field shows when the normalised scenario holds a value
_SIZES = ("seq_len", "new_tokens", "target_len", "resolution", "frames", "steps", "text_len",
          "guidance")
# how it runs: a value each key accepts wherever it applies; the field shows when the scenario
# accepts it for the chosen model and task (the scenario's own rules, asked, not copied)
_PROBES = {"optimizer": "sgd", "checkpointing": "full", "gradient_accumulation": 2,
           "attention": "sdpa"}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbt]?)\s*$", re.I)
_SCALE = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


# ---------------------------------------------------------------- text -> JSON values
def parse_int(text: str) -> Any:
    """'2,048' -> 2048; anything else is handed on as typed, for the scenario to reject."""
    t = text.strip().replace(",", "").replace("_", "")
    try:
        return int(t)
    except ValueError:
        return text.strip()


def parse_float(text: str) -> Any:
    try:
        return float(text.strip())
    except ValueError:
        return text.strip()


def parse_resolution(text: str) -> Any:
    """'1024x1024', '1024, 1024', '64 128 128' -> list of ints; else the text as typed."""
    parts = [p for p in re.split(r"[x×*,\s]+", text.strip().lower()) if p]
    try:
        return [int(p) for p in parts]
    except ValueError:
        return text.strip()


def parse_size(text: str) -> Any:
    """'4 GiB' stays text (the scenario parses sizes); '1024' -> 1024 bytes."""
    v = parse_int(text)
    return v


def parse_params(text: str) -> Any:
    """'7B' -> 7e9, '350M' -> 3.5e8, '1.5e9' -> 1.5e9; else the text as typed."""
    m = _NUMBER.match(text or "")
    if not m:
        return (text or "").strip()
    return float(m.group(1)) * _SCALE[m.group(2).lower()]


def format_params(n: float) -> str:
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if n >= scale:
            v = n / scale
            return f"{v:.3g}{suffix}"
    return f"{n:g}"


_PARSE = {"int": parse_int, "float": parse_float, "res": parse_resolution, "size": parse_size}


def _widget_value(key: str, v: Any) -> Any:
    """A scenario value as its dropdown shows it (render_targets -> the preset's name)."""
    if key == "render_targets" and isinstance(v, list):
        return next((n for n, lst in _PRESET_LISTS.items() if lst == v), None)
    return v


def _show(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return " × ".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _values(w: W.Widget) -> list:
    """The values a dropdown offers (options are values or (label, value) pairs)."""
    return [o[1] if isinstance(o, tuple) else o for o in w.options]


def _get(d: dict, key: str) -> Any:
    for part in key.split("."):
        if isinstance(d, list) and len(d) == 1:     # `arrays.shape`: the one array's
            d = d[0]
        if not isinstance(d, dict):
            return None
        d = d.get(part)
    return d


def _put(d: dict, key: str, value: Any) -> None:
    if key.startswith("arrays."):                  # the one-array editor
        arr = d.setdefault("arrays", [{"name": "a"}])[0]
        arr[key.split(".", 1)[1]] = value
        return
    if key == "render_targets":
        value = RENDER_PRESETS.get(value, value)
    *path, last = key.split(".")
    for part in path:
        d = d.setdefault(part, {})
    d[last] = value


# ---------------------------------------------------------------- asking the API (cached)
@functools.lru_cache(maxsize=512)
def _accepts(seed_json: str, extra_json: str) -> bool:
    try:
        Scenario.from_dict({**json.loads(seed_json), **json.loads(extra_json)})
        return True
    except VramplanError:
        return False


def accepts(seed: dict, **extra) -> bool:
    """Does `Scenario.from_dict` accept the seed (model/architecture + task) plus `extra`?"""
    return _accepts(json.dumps(seed, sort_keys=True), json.dumps(extra, sort_keys=True))


def tasks_for(model: dict) -> tuple[str, ...]:
    """The tasks the model supports (`{"model": id}` or `{"architecture": ...}`; `{}`: the
    model-less tasks): the API's `valid_tasks`; () for a model the API does not know."""
    try:
        if not model:
            return valid_tasks(None)
        return valid_tasks(model["model"] if "model" in model else model["architecture"])
    except (VramplanError, KeyError):
        return ()


@functools.lru_cache(maxsize=256)
def _defaults(seed_json: str) -> dict:
    return Scenario.from_dict(json.loads(seed_json)).to_dict()


def defaults_for(seed: dict) -> dict:
    """The normalised scenario of a model + task with every default."""
    return _defaults(json.dumps(seed, sort_keys=True))


# ---------------------------------------------------------------- one labelled field
class Field(W.VBox):
    """A small label above an input and an inline message below it."""

    def __init__(self, key: str, label: str, widget: W.Widget):
        self.key, self.widget = key, widget
        self.message = W.HTML(layout=W.Layout(display="none"))
        kids = [W.HTML(f"<div class='vp-label'>{html.escape(label)}</div>"), widget,
                self.message]
        super().__init__(kids, layout=W.Layout(min_width="0"))
        self.add_class("vp-field")
        self.add_class("vp-f-" + key.replace(".", "-"))

    def set_error(self, text: str | None) -> None:
        self.message.value = message_html(text)
        self.message.layout.display = "" if text else "none"
        (self.widget.add_class if text else self.widget.remove_class)("vp-input-error")

    @property
    def error(self) -> str:
        return self.message.value

    def show(self, visible: bool) -> None:
        self.layout.display = "" if visible else "none"

    @property
    def visible(self) -> bool:
        return self.layout.display != "none"


def _grid(*fields: W.Widget) -> W.GridBox:
    g = W.GridBox(list(fields), layout=W.Layout(
        grid_template_columns="repeat(2, minmax(0, 1fr))", grid_gap="2px 10px", width="100%"))
    g.add_class("vp-grid")
    return g


class WorkloadControls(W.VBox):
    """The left column's workload sections. `on_change(kind)` is called after every edit;
    kind is 'model' (family, model, size or task: entries the new choice rejects may be
    dropped) or 'value'."""

    def __init__(self, models, on_change: Callable[[str], None] | None = None,
                 gpu: Callable[[], str | None] = lambda: None):
        self.models = list(models)
        self.on_change = on_change or (lambda kind: None)
        self.gpu = gpu
        self.entries: dict[str, Any] = {}
        self.passthrough: dict[str, Any] = {}    # a link's workload keys no control edits
        self._syncing = False
        self._task_shown: str | None = None
        fams = sorted({m.family for m in self.models}, key=lambda f: (
            list(FAMILY_LABELS).index(f) if f in FAMILY_LABELS else 99, f))
        counts = {f: sum(m.family == f for m in self.models) for f in fams}
        self.family = W.Dropdown(options=[("All families", "")] + [
            (f"{FAMILY_LABELS.get(f, f)} ({counts[f]})", f) for f in fams] + [
            ("Size only (parameter count)", PARAMS),
            ("No model (graphics / volume / arrays)", NOMODEL)], value="")
        self.model = W.Combobox(placeholder="Search a model id, e.g. Llama-3.1-8B",
                                ensure_option=False, continuous_update=True)
        self.params = W.Text(placeholder="e.g. 7B, 70B, 350M", continuous_update=False)
        self.task = W.Dropdown(options=[])
        self.fields: dict[str, Field] = {
            "family": Field("family", "Family", self.family),
            "model": Field("model", "Model", self.model),
            "architecture": Field("architecture", "Parameters (generic decoder)", self.params),
            "task": Field("task", "Task", self.task),
        }
        for key, (label, kind, ph) in TEXT_FIELDS.items():
            self.fields[key] = Field(key, label, W.Text(placeholder=ph, continuous_update=False))
        for key, (label, opts) in DROPDOWNS.items():
            self.fields[key] = Field(key, label, W.Dropdown(options=list(opts)))
        self.options = {k: W.Checkbox(description=lab, indent=False, value=False)
                        for k, lab in OPTION_BOXES.items()}
        self.fields["options"] = Field("options", "Options", W.HBox(
            list(self.options.values()), layout=W.Layout(flex_flow="row wrap")))
        self.offload = {k: W.Checkbox(description=lab, indent=False, value=False)
                        for k, lab in OFFLOAD_BOXES.items()}
        self.fields["offload"] = Field("offload", "Offload to CPU", W.HBox(
            list(self.offload.values()), layout=W.Layout(flex_flow="row wrap")))
        self.message = W.HTML()          # errors no field owns
        self.fields["architecture"].show(False)
        self._update_models()

        f = self.fields
        self.workload_box = section(
            "Workload", f["family"], f["model"], f["architecture"], f["task"],
            _grid(f["batch_size"], f["seq_len"], f["new_tokens"], f["target_len"],
                  f["resolution"], f["steps"], f["frames"], f["text_len"], f["guidance"],
                  f["render_targets"], f["msaa"], f["frames_in_flight"], f["fps"],
                  f["texture_budget"], f["channels"], f["dtype"], f["arrays.shape"],
                  f["arrays.dtype"], f["copies"]),
            self.message)
        self.run_box = section(
            "How it runs",
            _grid(f["precision"], f["attention"], f["optimizer"], f["checkpointing"],
                  f["gradient_accumulation"], f["lora.rank"],
                  f["serving.gpu_memory_utilization"], f["serving.max_num_seqs"],
                  f["serving.max_model_len"], f["serving.kv_cache_dtype"],
                  f["serving.cuda_graphs"]), f["options"], f["offload"])
        self.parallel_box = section(
            "Parallelism (per-GPU figures)",
            _grid(f["parallel.gpus"], f["parallel.zero"], f["parallel.tensor"],
                  f["parallel.pipeline"]))
        # the fields of the two sections a model-less plan hides as a whole
        self._model_only = {k for k in (*TEXT_FIELDS, *DROPDOWNS)
                            if k.split(".")[0] in ("serving", "parallel", "lora")
                            or k in ("precision", "attention", *_PROBES)}
        super().__init__([self.workload_box, self.run_box, self.parallel_box],
                         layout=W.Layout(width="100%"))
        self.add_class("vp-workload")

        self.family.observe(self._on_family, "value")
        self.model.observe(self._on_model, "value")
        self.params.observe(self._on_model, "value")
        self.task.observe(self._on_task, "value")
        for key in (*TEXT_FIELDS, *DROPDOWNS):
            self.fields[key].widget.observe(functools.partial(self._on_value, key), "value")
        for box in (*self.options.values(), *self.offload.values()):
            box.observe(self._on_option, "value")

    # ------------------------------------------------------------ the draft
    def model_seed(self) -> dict:
        """{"model": id} or {"architecture": {"params": N}} as the user gave it."""
        if self.family.value == PARAMS:
            return {"architecture": {"params": parse_params(self.params.value)}}
        if self.family.value == NOMODEL:
            return {}
        name = self.model.value.strip()
        return {"model": name} if name else {}

    def seed(self) -> dict:
        return {**self.model_seed(), "task": self.task.value} if self.task.value else \
            self.model_seed()

    def scenario_dict(self, gpu: str | None = None) -> dict:
        """The dict for `Scenario.from_dict`: model, task, every shown entry, options, gpu."""
        d = self.seed()
        for key, value in self.entries.items():
            if key in self.fields and self.shown(key):
                kind = TEXT_FIELDS.get(key, (None, None))[1]
                _put(d, key, _PARSE[kind](value) if kind else value)
        opts = sorted(k for k, box in self.options.items()
                      if box.value and self.fields["options"].visible)
        if opts:
            d["options"] = opts
        off = sorted(k for k, box in self.offload.items()
                     if box.value and box.layout.display != "none"
                     and self.fields["offload"].visible)
        if off:
            d["offload"] = off
        if isinstance(d.get("arrays"), list) and "shape" not in d["arrays"][0]:
            del d["arrays"]                       # a dtype but no shape yet: no array
        for k, v in self.passthrough.items():     # link keys no control edits
            d.setdefault(k, v)
        if gpu:
            d["gpu"] = gpu
        return d

    def shown(self, key: str) -> bool:
        """Is the field on screen (its own display and its section's)?"""
        return self.fields[key].visible and not (
            self.family.value == NOMODEL and key in self._model_only)

    # ------------------------------------------------------------ scenario -> controls
    def load(self, sc: Scenario) -> None:
        """Show a scenario (from a link): its values that differ from the defaults of its
        model and task become the entries."""
        d = sc.to_dict()
        params = "architecture" in d and set(d["architecture"]) == {"params"}
        nomodel = "model" not in d and "architecture" not in d
        self.fields["model"].show(not params and not nomodel)
        self.fields["architecture"].show(params)
        self._syncing = True
        try:
            if params:
                self.family.value = PARAMS
                self.params.value = format_params(d["architecture"]["params"])
            elif nomodel:
                self.family.value = NOMODEL
            else:
                self.family.value = ""
                self._update_models()
                self.model.value = d.get("model", "")
        finally:
            self._syncing = False
        seed = {k: d[k] for k in ("model", "architecture", "task") if k in d}
        base = defaults_for(seed)
        self.entries = {}
        for key in (*TEXT_FIELDS, *DROPDOWNS):
            v = _get(d, key)
            if v is not None and v != _get(base, key):
                self.entries[key] = _show(v) if key in TEXT_FIELDS else _widget_value(key, v)
        # workload keys the controls cannot show (several arrays, a custom target list,
        # video, ...) travel on unchanged while the task stays
        self.passthrough = {k: v for k, v in d.items() if k in sc.extra and v != base.get(k)
                            and not (k == "render_targets" and _widget_value(k, v))
                            and not (k == "arrays" and len(v) == 1
                                     and v[0].get("count", 1) == 1)}
        for key in list(self.entries):
            if self.entries[key] is None or key.split(".")[0] in self.passthrough:
                del self.entries[key]
        self._task_shown = d["task"]
        self._syncing = True
        try:
            for k, box in self.options.items():
                box.value = k in d.get("options", ())
            for k, box in self.offload.items():
                box.value = k in d.get("offload", ())
            for key, v in self.entries.items():
                w = self.fields[key].widget
                if key in TEXT_FIELDS or v in _values(w):
                    w.value = v
        finally:
            self._syncing = False
        self.refresh_choices(task=d["task"])

    def refresh_choices(self, task: str | None = None) -> None:
        """Offer the tasks, fields and precisions the API accepts for the model."""
        seed = self.model_seed()
        nomodel = self.family.value == NOMODEL
        if not nomodel and (not seed or not accepts(seed)):
            return                     # unknown model while typing: keep the layout
        tasks = tasks_for(seed)
        if not tasks:
            return
        want = task or self.task.value
        if want not in tasks:
            want = defaults_for(seed).get("task") if seed else None
            want = want if want in tasks else tasks[0]
        self._syncing = True
        try:
            self.task.options = [(TASK_LABELS.get(t, t), t) for t in tasks]
            self.task.value = want
        finally:
            self._syncing = False
        if want != self._task_shown:
            self.passthrough = {} if self._task_shown is not None else self.passthrough
            self._task_shown = want
        full = {**seed, "task": want}
        base = defaults_for(full)
        for key in _SIZES:
            self.fields[key].show(key in base)
        for key in _EXTRA:
            self.fields[key].show(_get(base, key) is not None or key == "arrays.shape"
                                  and "arrays" in base)
        self.fields["arrays.dtype"].show(self.fields["arrays.shape"].visible)
        if self.fields["arrays.shape"].visible and "arrays" in self.passthrough:
            self.fields["arrays.shape"].show(False)
            self.fields["arrays.dtype"].show(False)
        self.fields["batch_size"].show(want not in _BATCHLESS)
        self.run_box.layout.display = "none" if nomodel else ""
        self.parallel_box.layout.display = "none" if nomodel else ""
        for key, probe in _PROBES.items():
            self.fields[key].show(accepts(full, **{key: probe}))
        for key in ("serving.gpu_memory_utilization", "serving.max_num_seqs",
                    "serving.max_model_len", "serving.kv_cache_dtype", "serving.cuda_graphs"):
            self.fields[key].show("serving" in base)
        trains = self.fields["optimizer"].visible
        for k, box in self.offload.items():
            # the model-state offloads apply to training; whole-component offload to the
            # inference of a pipeline (a family with the `denoise` task)
            shown = trains if k != "model" else (not trains and "denoise" in tasks)
            box.layout.display = "" if shown and not nomodel else "none"
        self.fields["offload"].show(any(b.layout.display != "none"
                                        for b in self.offload.values()))
        self.fields["lora.rank"].show("lora" in base)
        self.fields["options"].show(not nomodel)
        self.options["chunked-loss"].layout.display = \
            "" if self.fields["seq_len"].visible else "none"
        precisions = [p for p in PRECISIONS if accepts(full, precision=p)] or list(PRECISIONS)
        self._syncing = True
        try:
            w = self.fields["precision"].widget
            keep = w.value
            w.options = precisions
            w.value = keep if keep in precisions else base.get("precision", precisions[0]) \
                if isinstance(base.get("precision"), str) else precisions[0]
        finally:
            self._syncing = False
        self._show_defaults(base)

    def _show_defaults(self, base: dict) -> None:
        """The normalised defaults of the model and task: the value of every field the user
        did not touch, and the hint (placeholder) of every text field."""
        self._syncing = True
        try:
            for key in (*TEXT_FIELDS, *DROPDOWNS):
                v = _widget_value(key, _get(base, key))
                w = self.fields[key].widget
                if key in TEXT_FIELDS:
                    w.placeholder = (f"default {_show(v)}" if v is not None
                                     else TEXT_FIELDS[key][2])
                if key in self.entries or v is None:
                    continue
                if key in TEXT_FIELDS:
                    w.value = _show(v)
                elif v in _values(w):
                    w.value = v
        finally:
            self._syncing = False

    def sync(self, sc: Scenario) -> None:
        """After a good estimate: fields the user did not touch show the normalised values."""
        d = sc.to_dict()
        self._syncing = True
        try:
            for key in (*TEXT_FIELDS, *DROPDOWNS):
                if key in self.entries:
                    continue
                w = self.fields[key].widget
                v = _widget_value(key, _get(d, key))
                if key in TEXT_FIELDS:
                    w.value = _show(v)
                elif v is not None and v in _values(w):
                    w.value = v
        finally:
            self._syncing = False

    # ------------------------------------------------------------ errors
    def field_for(self, key: str | None) -> Field | None:
        """The field a ScenarioError key names ('lora.alpha' -> the LoRA field, ...)."""
        if not key:
            return None
        if key in self.fields and self.shown(key):
            return self.fields[key]
        top = key.split(".")[0].split("[")[0]
        if top == "arrays":
            top = "arrays.dtype" if key.endswith("dtype") else "arrays.shape"
        aliases = {"lora": "lora.rank", "serving": "serving.gpu_memory_utilization",
                   "parallel": "parallel.gpus", "scenario": None}
        name = aliases.get(top, top)
        f = self.fields.get(name) if name else None
        return f if f is not None and self.shown(f.key) else None

    def show_error(self, key: str | None, text: str) -> None:
        self.clear_errors()
        f = self.field_for(key)
        if f is not None:
            f.set_error(text)
        else:
            self.message.value = message_html(text)

    def clear_errors(self) -> None:
        for f in self.fields.values():
            if f.error:
                f.set_error(None)
        self.message.value = ""

    @property
    def errors(self) -> dict[str, str]:
        """Shown messages by field key ('' for the section-level one)."""
        out = {k: f.error for k, f in self.fields.items() if f.error}
        if self.message.value:
            out[""] = self.message.value
        return out

    def drop_entry(self, key: str | None) -> bool:
        """Forget the entry a rejection names (after a model or task change). True if one
        was dropped."""
        f = self.field_for(key)
        if f is None or f.key not in self.entries:
            return False
        del self.entries[f.key]
        return True

    # ------------------------------------------------------------ widgets -> draft
    def _update_models(self) -> None:
        fam = self.family.value
        ids = [m.id for m in self.models if not fam or m.family == fam]
        self.model.options = ids

    def _on_family(self, change) -> None:
        if self._syncing:
            return
        params = change["new"] == PARAMS
        self.fields["model"].show(change["new"] not in (PARAMS, NOMODEL))
        self.fields["architecture"].show(params)
        if params:
            if not self.params.value:
                self._syncing = True
                self.params.value = "7B"
                self._syncing = False
        else:
            self._update_models()         # the chosen model stays chosen while the list narrows
        self.refresh_choices()
        self.on_change("model")

    def _on_model(self, change) -> None:
        if self._syncing:
            return
        self.refresh_choices()
        self.on_change("model")

    def _on_task(self, change) -> None:
        if self._syncing or change["new"] is None:
            return
        if self.family.value == NOMODEL:         # pixels, voxels: each task's size is its own
            self.entries.pop("resolution", None)
        self.refresh_choices(task=change["new"])
        self.on_change("model")

    def _on_value(self, key: str, change) -> None:
        if self._syncing:
            return
        value = change["new"]
        if key in TEXT_FIELDS and not str(value).strip():
            self.entries.pop(key, None)       # cleared: back to the default
        else:
            self.entries[key] = value
        self.on_change("value")

    def _on_option(self, change) -> None:
        if not self._syncing:
            self.on_change("value")

    # ------------------------------------------------------------ convenience for tests
    def set(self, key: str, value: Any) -> None:
        """Set a control as a user would ('batch_size', 'model', 'task', 'lora.rank', ...)."""
        if key == "model":
            self.model.value = value
        elif key == "params":
            self.family.value = PARAMS
            self.params.value = value
        elif key == "task":
            self.task.value = value
        elif key == "family":
            self.family.value = value
        elif key in self.options:
            self.options[key].value = bool(value)
        elif key.startswith("offload."):
            self.offload[key.split(".", 1)[1]].value = bool(value)
        else:
            self.fields[key].widget.value = value
