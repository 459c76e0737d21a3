"""The page's language: `_(text)` translates English source text into the language of the
page being built or re-rendered, `set_lang(state, lang)` switches a page.

The language is the page's own (`PlanState.lang`), not a process global: two `App()`s in one
JupyterLab kernel may speak two languages. While a page builds or renders (`App.__init__`,
`PlanState._emit`, a widget callback wrapped by `speaking_for(state, fn)`) the page's
language is the current one of a context variable, so every widget reads it through `_()`
without holding the state. Outside any page `_()` returns English.

    from ..state.i18n import _          # in ui/widgets/
    W.HTML(_("Fits with {headroom} to spare").format(headroom=...))

Every literal passed to `_()` has an entry in `locale/zh/*.toml` (tests/test_i18n.py scans
the package for them).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Callable, Iterator

from ...i18n import (DEFAULT_LANG, LANG_NAMES, LANGS, format_number, gettext, normalise_lang,
                    translate_message)

__all__ = ["_", "N_", "msg", "msg_joined", "current_lang", "speaking", "speaking_for", "set_lang", "num",
           "LANGS", "LANG_NAMES"]

_LANG: contextvars.ContextVar[str] = contextvars.ContextVar("vramplan_page_lang",
                                                            default=DEFAULT_LANG)


def _(text: str) -> str:
    """`text` (English) in the current page's language."""
    return gettext(text, _LANG.get())


def msg(text: str) -> str:
    """A message made elsewhere with its values in (an error from the scenario, an estimate
    note) in the current page's language, where the catalogue has its pattern; else as is."""
    return translate_message(str(text), _LANG.get())


def msg_joined(text: str, sep: str = " + ") -> str:
    """`msg` of a text, else of its runs between `sep`, longest first: a plan's title is its
    changes' titles joined ('LoRA adapters on a frozen 16-bit base + torch.compile (...)'),
    and a title may hold `sep` itself ('... 512 planes + 1 halo plane per side ...')."""
    text = str(text)
    whole = msg(text)
    if whole != text or sep not in text:
        return whole
    parts, out, i = text.split(sep), [], 0
    while i < len(parts):
        for j in range(len(parts), i, -1):
            run = sep.join(parts[i:j])
            said = msg(run)
            if said != run or j == i + 1:
                out.append(said)
                i = j
                break
    return sep.join(out)


def N_(text: str) -> str:
    """Marks English text translated later, where it is shown (a notice kept in the state):
    returns it unchanged; tests/test_i18n.py checks it has a catalogue entry like `_()`."""
    return text


def current_lang() -> str:
    return _LANG.get()


def num(value: float | int, digits: int = 0) -> str:
    """A number with thousands separators in the current page's language."""
    return format_number(value, digits, _LANG.get())


@contextlib.contextmanager
def speaking(lang: str) -> Iterator[None]:
    """Make `lang` the current language while the block runs (then back to the one before)."""
    token = _LANG.set(normalise_lang(lang))
    try:
        yield
    finally:
        _LANG.reset(token)


def speaking_for(state, fn: Callable) -> Callable:
    """`fn` (a widget callback) run in the language of `state`'s page."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with speaking(getattr(state, "lang", DEFAULT_LANG)):
            return fn(*args, **kwargs)
    return wrapper


def set_lang(state, lang: str) -> None:
    """Switch `state`'s page to `lang` ('en' / 'zh'; VramplanError naming `lang` otherwise);
    every widget re-renders in it."""
    lang = normalise_lang(lang)
    if getattr(state, "lang", DEFAULT_LANG) == lang:
        return
    state.lang = lang
    state._emit({"lang", "draft", "gpu", "estimate", "notices", "advice"})
