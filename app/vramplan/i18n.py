"""The page's languages: English (the source text) and Simplified Chinese.

English text is the key: `gettext("Fits with {headroom} to spare", "zh")` returns the Chinese
entry, `.format(...)` fills it; for "en", or a text the catalogue lacks, the text comes back
unchanged. The catalogues are plain TOML tables, one file per area of the product, under
`locale/<lang>/*.toml` (`"English text" = "中文"`); every file of a language's folder is merged
(an English text two files translate differently is listed by `conflicts`; the first file
by name wins, and tests keep the list empty).

Numbers are formatted per locale by `format_number` (thousands separators: "1,234.5" in both
English and Chinese, which writes Arabic numerals with the same grouping) and the unit words
go through the catalogue like any text. Stage 0 ("ground"): nothing here imports the package.
"""
from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path

from .errors import VramplanError

LANGS = ("en", "zh")
DEFAULT_LANG = "en"
LANG_NAMES = {"en": "EN", "zh": "中文"}  # the page's switch

LOCALE_DIR = Path(__file__).resolve().parent / "locale"


class LanguageError(VramplanError, ValueError):
    """A `lang` value that is not one of LANGS."""

    def __init__(self, value: object):
        self.value = value
        text = str(value)
        if len(text) > 40:
            text = text[:40] + "..."
        super().__init__(f"lang '{text}' is not a language of the page; use one of: "
                         + ", ".join(LANGS))


def normalise_lang(value: object) -> str:
    """'zh', 'ZH', 'zh-CN', 'zh_Hans' -> 'zh'; None or '' -> 'en'; anything else is refused
    with a message naming `lang`."""
    if value is None:
        return DEFAULT_LANG
    if not isinstance(value, str):
        raise LanguageError(value)
    text = value.strip().lower().replace("_", "-")
    if not text:
        return DEFAULT_LANG
    base = text.split("-", 1)[0]
    if base in LANGS:
        return base
    raise LanguageError(value)


@functools.cache
def catalogue(lang: str) -> dict[str, str]:
    """Every entry of `locale/<lang>/*.toml`, merged ({} for English)."""
    if lang == DEFAULT_LANG:
        return {}
    if lang not in LANGS:
        raise LanguageError(lang)
    merged: dict[str, str] = {}
    for name, table in _files(lang).items():
        for key, text in table.items():
            merged.setdefault(key, text)      # the first file (by name) holding a text wins
    return merged


@functools.cache
def _files(lang: str) -> dict[str, dict[str, str]]:
    """Each catalogue file of `lang` by name: {English: translation}."""
    out = {}
    for path in sorted((LOCALE_DIR / lang).glob("*.toml")):
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise VramplanError(f"catalogue {path.name}: {exc}") from None
        for key, text in table.items():
            if not isinstance(text, str):
                raise VramplanError(f"catalogue {path.name}: entry '{key}' is not a string")
        out[path.name] = table
    return out


def conflicts(lang: str) -> list[str]:
    """English texts two files of `lang` translate differently (tests keep this empty)."""
    seen: dict[str, tuple[str, str]] = {}
    out = []
    for name, table in _files(lang).items():
        for key, text in table.items():
            if key in seen and seen[key][1] != text:
                out.append(f"'{key}': {seen[key][0]} and {name}")
            seen.setdefault(key, (name, text))
    return out


def gettext(text: str, lang: str = DEFAULT_LANG) -> str:
    """`text` (English) in `lang`; unchanged for English or a text the catalogue lacks."""
    if lang == DEFAULT_LANG or not text:
        return text
    return catalogue(lang).get(text, text)


@functools.cache
def _patterns(lang: str) -> list[tuple[re.Pattern, str]]:
    """The catalogue's entries with placeholders as patterns ('unknown {kind} {wanted}' ->
    a regex with one group per placeholder), longest first."""
    out = []
    for key, text in catalogue(lang).items():
        if "{" not in key:
            continue
        parts = re.split(r"\{(\w+)\}", key)
        if len(parts) < 3 or len(re.findall(r"[A-Za-z]", "".join(parts[::2]))) < 6:
            continue                  # too little fixed text to tell a message by it
        rx, seen = "", set()
        for i, part in enumerate(parts):
            if i % 2 == 0:
                rx += re.escape(part)
            elif part in seen:
                rx += f"(?P={part})"
            else:
                seen.add(part)
                rx += f"(?P<{part}>.+?)"
        out.append((re.compile(rx, re.S), text))
    out.sort(key=lambda p: -len(p[0].pattern))
    return out


def translate_message(text: str, lang: str = DEFAULT_LANG) -> str:
    """A message made elsewhere with its values filled in (an error, an estimate note), in
    `lang`: an exact entry, else the first entry whose placeholders match it (the values kept
    as they are), else the text unchanged."""
    if lang == DEFAULT_LANG or not text:
        return text
    exact = catalogue(lang).get(text)
    if exact is not None:
        return exact
    for rx, target in _patterns(lang):
        m = rx.fullmatch(text)
        if m:
            try:
                return target.format(**{k: _value(k, v, lang)
                                        for k, v in m.groupdict().items()})
            except (KeyError, IndexError, ValueError):
                return text
    plural = _SINGULAR.sub(lambda m: "1 " + COUNTED_NOUNS[m.group(1)], text)   # '1 sequences'
    if plural != text:
        done = translate_message(plural, lang)
        if done != plural:
            return done
    key = _KEYED.fullmatch(text)          # "batch_size: must be ..." (a key, then a message)
    if key:
        rest = translate_message(key.group(2), lang)
        if rest != key.group(2):
            return f"{key.group(1)}: {rest}"
    return text


# nouns units.counted prints in the singular for one, with their plurals: Chinese has no
# plural, so a note's catalogue entry is keyed by the plural text and '1 token' (a count of one
# right before the noun) is looked up as '1 tokens'
COUNTED_NOUNS = {n: n + "s" for n in ("token", "new token", "sequence", "request", "layer",
                                      "expert", "image", "swapchain image", "target kind",
                                      "array")}
COUNTED_NOUNS["copy"] = "copies"
_SINGULAR = re.compile(r"(?<![\d.,])1 (" + "|".join(COUNTED_NOUNS) + r")(?![\w-])")
NESTED = ("message", "error", "why", "label")   # placeholders that hold a message of their own
# placeholders that hold a list of words joined by ', ' (the weight format's kept groups:
# 'attention, router, embeddings'), by the catalogue prefix each word is looked up under
# ('weight group attention' = '注意力'; a word without an entry stays), joined the language's way
LISTED = {"groups": "weight group "}
LIST_SEPARATOR = {"zh": "、"}


def _value(name: str, value: str, lang: str) -> str:
    """A matched placeholder's value in `lang`: a message translated, a list word by word,
    anything else (a number, a name) as it is."""
    if name in NESTED:
        return translate_message(value, lang)
    if name in LISTED:
        words = [catalogue(lang).get(LISTED[name] + w, w) for w in value.split(", ")]
        return LIST_SEPARATOR.get(lang, ", ").join(words)
    return value


_KEYED = re.compile(r"((?:scenario key )?'?[\w.\[\]-]+'?): (.+)", re.S)


def has(text: str, lang: str) -> bool:
    """Whether `lang`'s catalogue translates `text` (always for English)."""
    return lang == DEFAULT_LANG or text in catalogue(lang)


def format_number(value: float | int, digits: int = 0, lang: str = DEFAULT_LANG) -> str:
    """`value` with thousands separators and `digits` decimals in `lang`'s convention.

    English and Simplified Chinese both group by thousands with ',' and use '.' for the
    decimal point (GB/T 15835 writes Arabic numerals this way in technical text)."""
    return f"{value:,.{digits}f}"
