"""The page's languages: English (the source text) and Simplified Chinese.

English text is the key: `gettext("Fits with {headroom} to spare", "zh")` returns the Chinese
entry, `.format(...)` fills it; for "en", or a text the catalogue lacks, the text comes back
unchanged. The catalogues are plain TOML tables, one file per area of the product, under
`locale/<lang>/*.toml` (`"English text" = "中文"`); every file of a language's folder is merged
(an entry defined twice, in two files or with two texts, is an error, so areas stay apart).

Numbers are formatted per locale by `format_number` (thousands separators: "1,234.5" in both
English and Chinese, which writes Arabic numerals with the same grouping) and the unit words
go through the catalogue like any text. Stage 0 ("ground"): nothing here imports the package.
"""
from __future__ import annotations

import functools
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
    where: dict[str, str] = {}
    folder = LOCALE_DIR / lang
    for path in sorted(folder.glob("*.toml")):
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise VramplanError(f"catalogue {path.name}: {exc}") from None
        for key, text in table.items():
            if not isinstance(text, str):
                raise VramplanError(f"catalogue {path.name}: entry '{key}' is not a string")
            if key in merged and merged[key] != text:
                raise VramplanError(f"catalogue {path.name}: entry '{key}' is also in "
                                    f"{where[key]} with another text")
            merged[key] = text
            where[key] = path.name
    return merged


def gettext(text: str, lang: str = DEFAULT_LANG) -> str:
    """`text` (English) in `lang`; unchanged for English or a text the catalogue lacks."""
    if lang == DEFAULT_LANG or not text:
        return text
    return catalogue(lang).get(text, text)


def has(text: str, lang: str) -> bool:
    """Whether `lang`'s catalogue translates `text` (always for English)."""
    return lang == DEFAULT_LANG or text in catalogue(lang)


def format_number(value: float | int, digits: int = 0, lang: str = DEFAULT_LANG) -> str:
    """`value` with thousands separators and `digits` decimals in `lang`'s convention.

    English and Simplified Chinese both group by thousands with ',' and use '.' for the
    decimal point (GB/T 15835 writes Arabic numerals this way in technical text)."""
    return f"{value:,.{digits}f}"
