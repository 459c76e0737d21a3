"""What to change: the advisor's plans (combinations that fit, cheapest first) as cards and
its single changes (most memory saved per cost first), each applied with one click; undo (the
header's button) brings back the plan before. For a plan that fits, how far it can grow.
Computed off the kernel's loop (`vramplan.advisor.advise` can take a second); every figure is
the advisor's, which are `estimate`'s.
"""
from __future__ import annotations

import html

import ipywidgets as W

from . import looks as L
from ...report.words import cost_words, engine_why, saving
from ..state.i18n import _, current_lang, msg
from .jobs import Jobs
from .section import section
from ..state.text import gib, message_html, size

PLANS = 3
SHOWN = 8        # single changes shown before "Show all" (the JSON and the CLI keep every one)
JOBS_SHOWN = 4   # changes to the job shown before it
_e = html.escape


def growth_text(growth: dict, scenario=None) -> str:
    """'Room to grow on this GPU: sequence length up to 2,984.' (values past today's): the
    report's sentence (`report.words.growth_sentence`), in the page's language."""
    from ...report.words import growth_sentence
    now = scenario.to_dict() if scenario is not None else {}
    return growth_sentence(growth, now, current_lang())


def title_html(title: str) -> str:
    """An advisor change's title: the catalogue's where it has one, else the advisor's English
    (marked lang='en': made from values, docs/i18n.md)."""
    t = msg(title)
    return _e(t) if t != title or current_lang() == "en" else f"<span lang='en'>{_e(title)}</span>"


def change_html(rec, fits: bool = False) -> str:
    """A single change's row: its title, what it buys and its cost in the CLI's and the
    report's words (`report.words.saving`: device bytes, or on a serve plan the KV pool;
    `cost_words`: each transfer's bytes per step, link and time, then compute, risk, GPUs).
    Every change the advisor lists is shown: a serving proposal frees no device bytes (vLLM
    pre-allocates), yet it is what starts the engine."""
    lang = current_lang()
    fit = " · " + _("fits") if fits else ""
    return (f"<div class='vp-change'><b>{title_html(rec.title)}</b><div class='vp-hint'>"
            f"{_e(saving(rec.to_dict(full=False), lang))}{fit} · "
            f"{_e(cost_words(rec.cost, lang))}</div></div>")


class AdvisorPanel(W.VBox):
    def __init__(self, state, background: bool | None = None):
        self.state = state
        self.jobs = Jobs("vramplan-advisor", background)
        self.status = L.html()
        self.plans = W.GridBox()
        self.plans.add_class("vp-plans")
        self.changes = W.VBox()
        self.changes.add_class("vp-changes")
        self._cards: list[W.VBox] = []
        self._rows: list[W.HBox] = []
        self._subtitle = L.html("<div class='vp-sub-title'>" + _(
            "Single changes, most memory saved per cost first") + "</div>")
        self._job_title = L.html("<div class='vp-sub-title'>" + _(
            "If you can change the job (accuracy risk given)") + "</div>")
        self.allow = L.checkbox(value=False, indent=False, description=_(
            "Plans may change the job (LoRA, 8-bit optimizers, a shorter context)"))
        self.allow.add_class("vp-allow")            # its whole label, wrapped (not cut off)
        self.allow.observe(self._allow, "value")
        self.more = L.button()                      # "Show all N changes" / "Show fewer"
        self.more.add_class("vp-more")
        self.more.on_click(self._toggle_all)
        self._all = False
        self.card = section(_("What to change"), self.status, self.allow, self.plans,
                            self.changes, cls="vp-advisor")
        super().__init__([self.card])
        self.enabled = False
        self._asked = None
        self._shown = None
        self.buttons: list[W.Button] = []     # apply buttons, plans first (tests click them)

    def render(self) -> None:
        st = self.state
        (self.add_class if st.stale else self.remove_class)("vp-stale")
        if not self.enabled or st.result is None:
            return
        if st.advice is None:
            if self._asked is not st.result:
                self._asked = st.result
                self.status.value = f"<div class='vp-hint'>{_('Finding changes…')}</div>"
                self.plans.children, self.changes.children = [], []   # not the last plan's
                self._shown = None
                snap, result = st.snapshot(), st.result
                self.jobs.run(lambda: st.advise(snap), lambda adv: self._done(result, adv))
            return
        if self._shown is st.advice:
            return
        self._shown, self._all = st.advice, False
        self._show(st.advice)

    def _toggle_all(self, _button=None) -> None:
        """Every single change and change to the job, or the first SHOWN / JOBS_SHOWN."""
        self._all = not self._all
        if self._shown is not None:
            self._show(self._shown)

    def _allow(self, change) -> None:
        """The toggle: ask the advisor again, with or without changes to the job."""
        st = self.state
        st.allow_job_changes = bool(change["new"])
        st.advice, self._asked = None, None
        self.render()

    def _done(self, result, advice) -> None:
        if isinstance(advice, Exception):
            if result is self.state.result:
                self.status.value = message_html(_("The advisor failed: {error}").format(
                    error=f"{type(advice).__name__}: {advice}"))
            return
        self.state.set_advice(result, advice)

    # The cards and rows are made once and reused (a new advice only sets their text and
    # what their button applies): making ~50 widgets per advice cost ~0.5 s on the kernel's
    # loop, which the next control change had to wait for.
    def _button(self) -> W.Button:
        b = L.button()
        b.add_class("vp-apply")
        b.on_click(lambda btn: self.state.apply_change(btn.vp_change))
        return b

    def _apply_button(self, b: W.Button, change, text: str | None = None) -> W.Button:
        b.vp_change = change
        b.description = text or _("Apply")
        self.buttons.append(b)
        return b

    def _reused(self, made: list, i: int, box, css: str):
        """The i-th of `made` (text and an apply button in a `box`, class `css`), made once."""
        while len(made) <= i:
            w = box([L.html(), self._button()])
            w.add_class(css)
            made.append(w)
        return made[i]

    def _card(self, i: int) -> W.VBox:
        return self._reused(self._cards, i, W.VBox, "vp-plan")

    def _row(self, i: int) -> W.HBox:
        return self._reused(self._rows, i, W.HBox, "vp-change-row")

    def _show(self, adv) -> None:
        self.buttons = []
        usable = adv.estimate.gpu.usable_bytes
        over = adv.estimate.device_used_bytes - adv.limit_bytes
        why = engine_why(adv.estimate.to_dict(), current_lang())
        if adv.fits:
            kept = usable - adv.limit_bytes
            head = _("Fits, leaving {free} free ({kept} kept as headroom).").format(
                free=size(usable - adv.estimate.device_used_bytes), kept=size(kept)) if kept \
                else _("Fits, leaving {free} free.").format(
                    free=size(usable - adv.estimate.device_used_bytes))
            grow = growth_text(adv.growth, adv.scenario)
            self.status.value = f"<div class='vp-hint'>{_e(head)} {_e(grow)}</div>"
        elif adv.plans and why:   # within the limit, but the serving engine would not start
            self.status.value = ("<div class='vp-hint'>" + _(   # zh ends it with '。'
                "{why}. Plans that fit, cheapest first:").format(
                why=_e(why[:1].upper() + why[1:])) + "</div>")
        elif adv.plans:
            self.status.value = ("<div class='vp-hint'>" + _(
                "Short by {size} with the headroom kept. Plans that fit, cheapest first:").format(
                size=gib(over)) + "</div>")
        else:
            self.status.value = message_html(_("No combination of changes found that fits; "
                                               "see the single changes below."), "info")
        cards = []
        for i, p in enumerate(adv.plans[:PLANS]):
            items = "".join(f"<li>{title_html(c.get('title', c.get('id', '')))}</li>"
                            for c in p.changes)
            used = p.estimate.device_used_bytes
            where = f"{p.gpus} × {_e(p.estimate.gpu.name)}" if p.gpus > 1 else \
                _e(p.estimate.gpu.name)
            card = self._card(i)
            card.children[0].value = (
                f"<div class='vp-plan-title'>{_('Plan {n}').format(n=i + 1)} · {where}</div>"
                f"<ul class='vp-list'>{items}</ul>"
                "<div class='vp-plan-figs'>" + _("{used} of {usable} per GPU").format(
                    used=gib(used), usable=gib(p.estimate.gpu.usable_bytes)) +
                f"</div><div class='vp-hint'>{_e(cost_words(p.cost, current_lang(), total=True))}</div>")
            self._apply_button(card.children[1], p, _("Apply this plan"))
            cards.append(card)
        if tuple(cards) != self.plans.children:
            self.plans.children = cards
        self.plans.layout.display = "" if cards else "none"
        rows = []
        recs = list(adv.recommendations)      # what `vramplan advise` lists, best first
        jobs = list(getattr(adv, "job_changes", ()))
        hidden = max(0, len(recs) - SHOWN) + max(0, len(jobs) - JOBS_SHOWN)
        if not self._all:
            recs, jobs = recs[:SHOWN], jobs[:JOBS_SHOWN]
        if recs:
            rows.append(self._subtitle)
        for i, r in enumerate(recs):
            row = self._row(i)
            row.children[0].value = change_html(r, r.estimate.fits)
            self._apply_button(row.children[1], r)
            rows.append(row)
        rows += self._job_rows(jobs, len(recs))
        if hidden:
            every = len(adv.recommendations) + len(getattr(adv, "job_changes", ()))
            self.more.description = _("Show fewer changes") if self._all else _(
                "Show all {n} changes ({m} more)").format(n=every, m=hidden)
            rows.append(self.more)
        if tuple(rows) != self.changes.children:
            self.changes.children = rows

    def _job_rows(self, jobs: list, start: int) -> list:
        """The changes that change the job, apart, each with its accuracy risk."""
        out = [self._job_title] if jobs else []
        for i, r in enumerate(jobs, start):
            row = self._row(i)
            row.children[0].value = change_html(r)
            self._apply_button(row.children[1], r)
            out.append(row)
        return out

    @property
    def value(self) -> str:
        out = [self.status.value]
        for card in self.plans.children:
            out.append(card.children[0].value)
        for row in self.changes.children:
            out.append(row.value if isinstance(row, W.HTML) else row.description
                       if isinstance(row, W.Button) else row.children[0].value)
        return "".join(out)
