"""The planner's state, apart from any widget: the draft a person edits, the GPU, the scenario
the draft makes, its estimate, every problem by key, page notices, a history for undo, and the
listeners the widgets register. No ipywidgets here: tests drive it in plain Python.

    s = PlanState()
    s.set_model("gpt2"); s.set("batch_size", 8); s.set_gpu("nvidia-rtx-4090")
    s.estimate.fits, s.errors, s.fields          # what the panels render
    s.undo()

The draft is the given keys, the dict `scenario.resolve` takes (nested keys as objects:
`{"lora": {"rank": 32}}`, the shape of `Scenario.given_dict()` and of a scenario file),
holding only what the person gave; a field edits one key by its dotted name (`set("lora.rank",
32)`). Everything else is what the one pass derives. Which fields apply, their choices, labels,
units and defaults, and every problem of a draft come from one `vramplan.scenario.form.view`
of the draft per edit (the key table's rows and their derivations), never from trying values.
On a change of model family or task the draft starts again from the new defaults; a link
keeps every valid key and names the bad ones (`load_query`).
"""
from __future__ import annotations

from typing import Any, Callable

from ...catalog import get_model
from ...errors import UnknownIdError, VramplanError
from ...estimate import estimate as run_estimate
from ...hardware import default_db
from ...scenario import Scenario, ScenarioErrors, resolve
from ...scenario.collect import given_only
from ...scenario import form
from ...scenario.keys import BY_NAME
from ...scenario.resolution import entry_of, get_path, with_path
from .draft import (ALL, DEFAULT_GPUS, DEFAULT_WORKLOADS, MACHINE_NOTES, NO_MODEL,  # noqa: F401
                    OWN, POPULAR_GPUS, SEED, SIZE_ONLY, Notice, Snapshot, notice, default_draft,
                    default_gpu, describe_model, draft_from_query, draft_key, family_of,
                    is_for_people, model_family, readable_query, search_models)
from .i18n import N_, normalise_lang, speaking
from .text import looks_like_size, parse_params

HISTORY = 50

class PlanState:
    """Draft -> scenario -> estimate, with listeners `fn(state, what)` (what: a set of
    'draft', 'gpu', 'estimate', 'notices')."""

    def __init__(self, db=None, draft: dict | None = None, gpu: str | None = None,
                 lang: str = "en"):
        self.db = db if db is not None else default_db()
        self.draft: dict = {}
        self.gpu: str | None = None
        self.bad: dict[str, str] = {}          # values a link gave that did not convert
        self.errors: dict[str, str] = {}
        self.fields: list = []
        self.scenario: Scenario | None = None  # the last good scenario and its estimate
        self.estimate = None
        self.result: dict | None = None        # estimate.to_dict()
        self.stale = False                     # errors: what is shown is an earlier plan
        self.partial = False                   # a link's plan shown without its bad values
        self.notices: list[Notice] = []
        self.history: list[Snapshot] = []
        self.query = ""                        # what the address bar should hold
        self.advice = None                     # the advisor's Advice for `result`, when asked
        self.allow_job_changes = False         # the advisor's plans may change the job
        self.gpu_filters: dict = {}            # the GPU picker's vendor / min_memory / min_bandwidth
        self.lang = normalise_lang(lang)       # the page's language (a setting, not a key)
        self._listeners: list[Callable] = []
        self.gpu = self._resolve_gpu(gpu)
        self.draft = dict(draft) if draft is not None else default_draft()
        self.recompute()

    # ------------------------------------------------------------ listeners
    def on_change(self, fn: Callable[["PlanState", set], None]) -> None:
        self._listeners.append(fn)

    def _emit(self, what: set) -> None:
        with speaking(self.lang):               # the widgets render in the page's language
            for fn in list(self._listeners):
                fn(self, what)

    # ------------------------------------------------------------ reading
    @property
    def device(self):
        return self.db.get(self.gpu) if self.gpu else None

    @property
    def family(self) -> str | None:
        return family_of(self.draft)

    @property
    def task(self) -> str | None:
        f = self.field("task")
        return self.draft.get("task") or (f.default if f else None)

    def field(self, key: str):
        return next((f for f in self.fields if f.key == key), None)

    def shown(self, key: str) -> bool:
        return self.field(key) is not None

    def value(self, key: str) -> Any:
        """What a field shows: the draft's value, else the plan's (when current), else the
        form's default, else (while the draft does not resolve far enough to have one: an
        unknown model id typed) the value of the plan still on screen, so a field does not
        fall to its first choice (precision fp32 for a plan in bf16) until the model is
        mended."""
        if self.given(key):
            return get_path(self.draft, key)
        f = self.field(key)
        if self.scenario is not None and (not self.stale or f is None or f.default is None):
            v = get_path(self.scenario.to_dict(), key)
            if v is not None:
                return v.get("default") if key == "precision" and isinstance(v, dict) else v
        return f.default if f is not None else None

    def given(self, key: str) -> bool:
        """Does the draft give this key (a dotted name: `lora.rank`)?"""
        return get_path(self.draft, key) is not None

    def error(self, key: str) -> str:
        return self.errors.get(key, "")

    def notes(self) -> list[str]:
        """The estimate's notes meant for people."""
        return [n for n in (self.result or {}).get("notes", []) if is_for_people(n)]

    @property
    def can_undo(self) -> bool:
        return bool(self.history)

    # ------------------------------------------------------------ editing
    def set(self, key: str, value: Any) -> None:
        """One field, as a person edits it (None / '' clears it: back to the default)."""
        if key == "task":
            return self.set_task(value)
        if key == "model":
            return self.set_model(value)
        self._commit(with_path(self.draft, key, value))

    def set_many(self, changes: dict) -> None:
        d = self.draft
        for k, v in changes.items():
            d = with_path(d, k, v)
        self._commit(d)

    def set_task(self, task: str | None) -> None:
        """A new task starts from its defaults (the model stays)."""
        if not task or task == self.draft.get("task"):
            return
        d = {k: self.draft[k] for k in ("model", "architecture") if k in self.draft}
        self._commit({**d, "task": task})

    def set_model(self, text: str | None) -> None:
        """A catalog id or alias; a size ('70B') means a size-only decoder. Another family
        starts from its defaults (the task kept where the family has it); within a family the
        entries that still apply stay, the model's own sizes reset."""
        text = (text or "").strip()
        if not text:
            return
        try:
            get_model(text)
            known = True
        except VramplanError:
            known = False
        if not known and looks_like_size(text):
            return self.set_size(text)
        new = {"model": text}
        self._switch(new)

    def set_size(self, text: str) -> None:
        params = parse_params(text)
        if params is None:
            d = {k: v for k, v in self.draft.items() if k != "model"}
            d["architecture"] = {"params": None}
            self.bad = {"architecture": f"'{text}' is not a parameter count (write e.g. 7B, "
                                        "350M or 1.5e9)"}
            self._commit(d, keep_bad=True)
            return
        self._switch({"architecture": {"params": int(params) if params.is_integer()
                                        else params}})

    def set_architecture(self, config: dict) -> None:
        """A config.json (already parsed): the model becomes that architecture."""
        self._switch({"architecture": dict(config)})

    def set_family(self, family: str) -> None:
        """A family choice: its first model when the current one is of another family."""
        if family in (ALL, OWN) or family == self.family:
            return
        if family == NO_MODEL:
            task = self.draft.get("task")
            choices = next(f.choices for f in form.fields({}) if f.key == "task") or ()
            if choices:
                self._commit({"task": task if task in choices else choices[0]})
            return
        if family == SIZE_ONLY:
            self._switch({"architecture": {"params": 7_000_000_000}})
            return
        models = search_models(family=family)
        if models:
            self._switch({"model": models[0].id})

    def _switch(self, seed: dict) -> None:
        """A new model: another family starts from its defaults (task included); within the
        family the entries that still apply stay and the model's own sizes reset."""
        old_family, new_family = model_family(self.draft), model_family(seed)
        if old_family is None and self.scenario is not None:    # after a mistyped id
            old_family = model_family(self.scenario.to_dict())
        if new_family is None:                 # unknown id: keep the rest, name the model
            d = {k: v for k, v in self.draft.items() if k not in ("model", "architecture")}
            self._commit({**seed, **d})
            return
        if new_family != old_family:
            self._commit(dict(seed))
            return
        keep = {k: v for k, v in self.draft.items() if k not in ("model", "architecture")
                and not (k in BY_NAME and BY_NAME[k].model_given)}
        # what the new model does not take or refuses goes (Scenario.replace's rule): one
        # pass when nothing goes, and that pass is the new draft's (no second one to commit)
        view = form.view({**seed, **keep}, self.gpu).kept()
        self._commit(view.given, view=view)

    def set_gpu(self, gpu: str) -> None:
        dev = self.db.get(gpu)
        if dev.id == self.gpu:
            return
        self._push()
        self.gpu = dev.id
        self.notices = [n for n in self.notices if not n.choices]
        self.recompute()
        self._emit({"gpu", "estimate", "notices"})

    def set_gpu_filters(self, filters: dict) -> None:
        """The GPU picker's filters (`HardwareDB.filter` keywords; empty ones dropped): the
        GPU comparison lists the GPUs that pass them. Not a scenario key, not in the link."""
        kept = {k: v for k, v in filters.items() if v}
        if kept != self.gpu_filters:
            self.gpu_filters = kept
            self._emit({"gpu_filters"})

    def apply(self, plan: dict | Scenario, label: str | None = None,
              params: tuple = ()) -> None:
        """Replace the plan (an advisor's plan, an uploaded scenario); undo brings back the
        previous one. `label` (English, `{name}` placeholders filled from `params`) is the
        notice shown."""
        d = plan.given_dict() if isinstance(plan, Scenario) else dict(plan)
        gpu = d.pop("gpu", None)
        self._push()
        if gpu:
            try:
                self.gpu = self.db.get(gpu).id
            except UnknownIdError as exc:
                self.notices = [self._gpu_notice(gpu, exc)]
        self.draft, self.bad = self._minimal(d), {}
        if label:
            self.notices = [notice(label, **dict(params))]
        self.recompute()
        self._emit({"draft", "gpu", "estimate", "notices"})

    def undo(self) -> bool:
        if not self.history:
            return False
        snap = self.history.pop()
        self.draft, self.gpu, self.bad = dict(snap.draft), snap.gpu, dict(snap.bad)
        self.notices = []
        self.recompute()
        self._emit({"draft", "gpu", "estimate", "notices"})
        return True

    # ------------------------------------------------------------ the advisor
    def snapshot(self) -> dict:
        """What a computation off the loop needs (plain values; the state may move on)."""
        return {"scenario": self.scenario, "result": self.result, "device": self.device,
                "db": self.db, "batched": self.shown("batch_size"),
                "allow_job_changes": self.allow_job_changes,
                "gpu_filters": dict(self.gpu_filters)}

    @staticmethod
    def advise(snap: dict):
        """The advisor's changes and plans for a snapshot's plan (safe in a thread)."""
        from ...advisor import advise
        return advise(snap["scenario"], snap["device"],
                      allow_job_changes=bool(snap.get("allow_job_changes")))

    def set_advice(self, result: dict, advice) -> None:
        """Keep `advice` if it is for the plan on screen (`result`)."""
        if result is self.result:
            self.advice = advice
            self._emit({"advice"})

    def apply_change(self, change, label: str | None = None) -> None:
        """Apply an advisor recommendation or plan (anything with a `.scenario`)."""
        title = getattr(change, "title", None) or " + ".join(
            c.get("title", c.get("id", "")) for c in getattr(change, "changes", []) or [])
        self.apply(change.scenario, label=label or N_("Applied: {title}. Undo brings back the "
                                                      "plan before."), params=(("title", title),))

    # ------------------------------------------------------------ links
    def load_query(self, qs: str) -> None:
        """Open a link: every valid key kept, each bad one named (and kept as typed), the
        plan shown without the bad ones; the address is left as it was."""
        draft, bad = draft_from_query(qs)
        gpu = draft.pop("gpu", None)
        notices = []
        if gpu is not None:
            try:
                self.gpu = self.db.get(str(gpu)).id
            except UnknownIdError as exc:
                notices.append(self._gpu_notice(str(gpu), exc))
            bad.pop("gpu", None)
        if not any(k in draft for k in SEED):
            draft = {**default_draft(), **draft} if draft else default_draft()
        self.draft, self.bad = draft, bad
        self.scenario = self.estimate = self.result = None     # a link opens a fresh page
        self.recompute()
        if not self.errors:
            self.draft = self._view.minimal()
            self.recompute()
        names = ", ".join(sorted(self.errors))
        if self.errors:
            notices.append(notice(N_("The link's value of {names} is not valid (see the field); "
                                     "the plan shown leaves it out."), "error", names=names))
        self.notices = notices
        self.query = qs.lstrip("?")
        self._emit({"draft", "gpu", "estimate", "notices"})

    def _gpu_notice(self, wanted: str, exc: UnknownIdError) -> Notice:
        offered = tuple(s for s in exc.suggestions if s in {d.id for d in self.db.devices})
        if not offered:
            offered = tuple(d for d in POPULAR_GPUS if d in {x.id for x in self.db.devices})
        return notice(N_("{error}. Showing {gpu} instead; pick one:"), "error", offered,
                      error=str(exc), gpu=self.device.name if self.device else "none")

    def _resolve_gpu(self, wanted: str | None) -> str | None:
        if wanted:
            try:
                return self.db.get(wanted).id
            except UnknownIdError as exc:
                self.gpu = default_gpu(self.db)
                self.notices = [self._gpu_notice(wanted, exc)]
                return self.gpu
        return default_gpu(self.db)

    def _minimal(self, d: dict) -> dict:
        """The plan's given keys less those the pass derives anyway (later edits move them)."""
        return form.view(d, self.gpu).minimal()

    # ------------------------------------------------------------ the plan
    def _push(self) -> None:
        self.history.append(Snapshot(dict(self.draft), self.gpu, dict(self.bad)))
        del self.history[:-HISTORY]

    def _commit(self, d: dict, keep_bad: bool = False, view=None) -> None:
        """The draft becomes `d` (`view`: its pass, when already made)."""
        self._push()
        if not keep_bad:        # a link's bad value counts while it is left as it was
            self.bad = {k: v for k, v in self.bad.items()
                        if (dk := entry_of(k, self.draft)) is not None
                        and get_path(d, dk) == get_path(self.draft, dk)}
        self.draft = d
        self.notices = [n for n in self.notices if n.choices]
        self.recompute(view)
        self._emit({"draft", "estimate", "notices"})

    def _estimate(self, d: dict):
        sc = resolve(d, self.gpu)
        return sc, run_estimate(sc, self.device)

    def recompute(self, view=None) -> bool:
        """The form, the problems and (when there are none) the estimate of the draft (`view`:
        its pass, when already made). With problems the last good plan stays (stale); with
        none yet, the plan without the bad entries. True when a new estimate was made."""
        if view is None or view.given != given_only(self.draft) or view.gpu != self.gpu:
            view = form.view(self.draft, self.gpu)              # the one pass of this edit
        self._view = view
        self.fields = form.view_fields(view)
        errors = {k: v for k, v in self.bad.items() if entry_of(k, self.draft) is not None}
        errors.update({k: v for k, v in view.by_key().items() if k not in errors and k != "gpu"})
        sc = est = None
        if not errors and self.device is not None:
            try:
                sc = view.scenario if view.scenario is not None else resolve(self.draft,
                                                                             self.gpu)
                est = run_estimate(sc, self.device)
            except VramplanError as exc:    # each problem by its key, the key not repeated
                errors.update(exc.by_key() if isinstance(exc, ScenarioErrors) else
                              {getattr(exc, "key", "") or "": getattr(exc, "message", None)
                               or str(exc)})
            except Exception as exc:  # an estimator bug must not take the page down
                errors[""] = f"The estimate failed: {type(exc).__name__}: {exc}"
        elif self.device is None:
            errors.setdefault("gpu", "the hardware database is empty")
        self.errors = errors
        if est is None and self.estimate is None and self.device is not None:
            sc, est = self._fallback()
            if est is None:
                return False
            self.scenario, self.estimate, self.result = sc, est, est.to_dict()
            self.stale, self.partial = False, bool(errors)
            self.advice = None
            return True
        if est is None:
            self.stale = self.estimate is not None
            return False
        self.scenario, self.estimate, self.result = sc, est, est.to_dict()
        self.stale = self.partial = False
        self.advice = None
        self.query = readable_query(sc.to_query())
        return True

    def _fallback(self):
        """The plan of the draft without its bad entries (a link with one bad value: the
        pass's `usable` scenario), else the default plan."""
        sc = self._view.usable
        if sc is not None:
            try:
                return sc, run_estimate(sc, self.device)
            except VramplanError:
                pass
        try:
            return self._estimate(default_draft())
        except VramplanError:
            return None, None
