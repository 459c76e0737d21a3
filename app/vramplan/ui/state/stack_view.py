"""The assumptions panel's "Software" block: the stack and version the estimate assumed, the
change point that decided its mechanisms, and each mechanism with its source and whether
this plan applied it. It shows the estimate's `stack` section (docs/stacks.md: name, version,
change_point, resolution, mechanisms [{name, source, applied}]) and decides nothing; without
the section (the default `pytorch`) it shows nothing.
"""
from __future__ import annotations

import html
from typing import Any, Mapping

from .i18n import _

_e = html.escape


def _mechanism(m: Mapping[str, Any]) -> str:
    state = _("applied to this plan") if m.get("applied") else _("not used by this plan")
    source = str(m.get("source") or "")
    src = (f" <span class='vp-hint'>({_e(_('source'))}: <span lang='en'>{_e(source)}</span>)"
           "</span>") if source else ""
    return f"<li><code>{_e(str(m.get('name', '')))}</code>: {_e(state)}{src}</li>"


def stack_html(section: Mapping[str, Any] | None) -> str:
    """The block for an estimate's `stack` section ('' without one)."""
    if not section:
        return ""
    label = str(section.get("name", "")) + (f"@{section['version']}"
                                             if section.get("version") else "")
    point = section.get("change_point")
    if point:
        how = _("mechanisms as of its change point {point}").format(point=point)
    else:
        how = _("earlier than every change point: only the mechanisms it always has")
    mechs = list(section.get("mechanisms") or [])
    items = "".join(_mechanism(m) for m in mechs)
    body = f"<ul class='vp-list vp-stack-mechanisms'>{items}</ul>" if items else \
        f"<div class='vp-hint'>{_e(_('No framework memory mechanism at this version.'))}</div>"
    return (f"<div class='vp-stack'><div class='vp-sub-title'>{_e(_('Software'))}</div>"
            f"<div><code>{_e(label)}</code> · {_e(how)}</div>{body}</div>")
