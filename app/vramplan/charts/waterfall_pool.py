"""The savings waterfall of a serve plan: in KV-pool tokens, not device bytes.

A vLLM-style engine pre-allocates gpu_memory_utilization x memory whatever a change does; what
a change buys is room in its KV pool, and the engine starts when the pool holds one request of
max_model_len tokens (workloads/transformer/engine.py, vLLM's check_enough_kv_cache_memory).
So the bars here are the pool's tokens: today's pool, each change's gain (the advisor's
`pool_gain`: pool tokens after less before, plus what a shorter max_model_len no longer needs,
advisor/serving_levers.py), and the pool after them, against a line at max_model_len. Tokens
are the engine's (every tensor-parallel GPU holds a share of each), so more GPUs and fp8 KV
count by the tokens they add."""
from __future__ import annotations

from typing import Any, Mapping

from ..i18n import gettext as _t
from . import theme


def serving_of(advice: Mapping[str, Any], estimate: Any) -> dict | None:
    """The estimate's serving section where the plan is served by a KV-pool engine."""
    est = theme.as_dict(estimate) if estimate is not None else {}
    sv = est.get("serving") or {}
    return sv if "kv_pool_tokens" in sv and "max_model_len" in sv else None


def _tokens(n: int, lang: str) -> str:
    return _t("{n} tokens", lang).format(n=f"{int(n):,}")


def _gain(rec: Mapping[str, Any]) -> int | None:
    g = rec.get("pool_gain")
    return int(g["tokens"]) if isinstance(g, Mapping) and theme.finite(g.get("tokens")) else None


def _room_of(plan_est: Any, today_mml: int) -> int | None:
    """A plan's pool in today's terms: its pool tokens plus what its shorter max_model_len no
    longer needs (as `pool_gain` counts it)."""
    sv = serving_of({}, plan_est) if plan_est is not None else None
    if sv is None:
        return None
    tokens = int(sv["kv_pool_tokens"])
    return tokens + (today_mml - int(sv["max_model_len"]) if tokens > 0 else 0)


def pool_rows(advice: Mapping[str, Any], serving: Mapping[str, Any], steps: list,
              plan: Any = None, plan_est: Any = None, until_fits: bool = True,
              lang: str = "en", cost_label=None, title=None) -> list[dict]:
    """Rows as `waterfall.waterfall_rows` makes them, in tokens (`start`, `end`, `label_at`,
    `tokens`; `start_gib` / `end_gib` hold the same tokens for callers that read those), with
    `unit` 'tokens' and `need` the max_model_len line."""
    need = int(serving["max_model_len"])
    rows = [{"step": _t("Today's KV pool", lang), "kind": "today", "from": 0,
             "to": int(serving["kv_pool_tokens"]), "cost": "", "id": "today"}]
    at, unpriced = rows[0]["to"], []
    for rec in steps:
        gain = _gain(rec)
        if gain is None and plan is not None:      # a plan's own step (a scale-out layout)
            unpriced.append(rec)
        if gain is None or (gain == 0 and plan is None):
            continue
        if plan is None and until_fits and at >= need:
            break
        rows.append({"step": title(rec, lang), "kind": "saving" if gain >= 0 else "increase",
                     "from": at, "to": max(0, at + gain), "id": rec.get("id"),
                     "cost": cost_label(rec.get("cost"), lang)})
        at = rows[-1]["to"]
    room = _room_of(plan_est, need)
    if unpriced:                # named: the plan's own pool less the steps above
        to = room if room is not None else at
        costs = [cost_label(r.get("cost"), lang) for r in unpriced if r.get("cost")]
        if not costs and len(unpriced) == 1 and isinstance(plan, Mapping):
            costs = [cost_label(plan.get("cost"), lang)]
        rows.append({"step": " + ".join(title(r, lang) for r in unpriced),
                     "kind": "saving" if to >= at else "increase", "from": at, "to": to,
                     "cost": " · ".join(c for c in costs if c),
                     "id": "+".join(str(r.get("id")) for r in unpriced)})
        at = to
    if room is not None and room != at:
        rows.append({"step": _t("Combined effect", lang), "kind": "combined", "from": at,
                     "to": room, "cost": _t("the plan's own estimate", lang), "id": "combined"})
        at = room
    fits = at >= need
    rows.append({"step": _t("After these changes" if len(rows) > 1 else "No change listed",
                            lang), "kind": "fits" if fits else "does not fit", "from": 0,
                 "to": at, "cost": "", "id": "after"})
    out = []
    for i, r in enumerate(rows):
        lo, hi = min(r["from"], r["to"]), max(r["from"], r["to"])
        if r["kind"] in ("today", "fits", "does not fit"):
            text = _tokens(r["to"], lang)
            if r["kind"] != "today":
                text += " · " + (_t("holds one max_model_len request", lang) if fits else _t(
                    "{n} tokens short of one max_model_len request", lang).format(
                    n=f"{need - at:,}"))
        else:
            d = r["to"] - r["from"]
            text = f"{'+' if d >= 0 else '-'}{_tokens(abs(d), lang)}"
            text += f" · {r['cost']}" if r["cost"] else ""
        out.append({"order": i, "step": r["step"], "kind": r["kind"], "id": r["id"],
                    "start": lo, "end": hi, "label_at": hi, "tokens": r["to"] - r["from"],
                    "start_gib": lo, "end_gib": hi, "label_gib": hi, "bytes": None,
                    "cost": r["cost"], "text": text, "unit": "tokens", "need": need})
    return out


def axis_words(need: int, lang: str = "en") -> dict:
    """The pool chart's words: axis title, the line's text, title and subtitle."""
    return {"x": _t("KV pool (tokens the engine holds)", lang),
            "line": _t("one request of max_model_len: {n}", lang).format(
                n=_tokens(need, lang)),
            "title": _t("From today's KV pool to one full request (tokens)", lang),
            "sub": _t("serving changes by the KV-pool tokens each adds", lang)}
