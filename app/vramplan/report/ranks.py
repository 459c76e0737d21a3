"""Per-rank figures: the estimate's `ranks` section (each distinct pipeline stage; per_gpu is the
worst of them) as rows the CLI text, the Markdown / HTML report and the page's ranks view
(ui/widgets/ranks_view.py) print, and the rank that decides the verdict when the ranks differ.

A stage's role is what it holds beside its blocks (workloads/transformer/training.py,
parallel.py): stage 0 the embedding and, under 1F1B, min(pp, micro-batches) micro-batches in
flight (parallel.pipeline_inflight); the last stage the head, the logits and the loss with one
micro-batch in flight; the stages between only blocks.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from ..parallel import layout_of, pipeline_inflight
from ..vocab import phase_label
from .text import size, tr

ROLES = {"first": "embedding + blocks", "middle": "blocks",
         "last": "blocks + head, logits and loss"}


def _stage(name: str) -> int | None:
    """The stage index a rank's name starts with ('stage 1 (stages 1-6)' -> 1)."""
    m = re.match(r"stage (\d+)", str(name))
    return int(m.group(1)) if m else None


def limit_of(est: Mapping[str, Any]) -> int | None:
    """The memory limit the ranks are held to (`memory_limit`, else the usable memory)."""
    lim = (est.get("memory_limit") or {}).get("limit_bytes")
    if isinstance(lim, int):
        return lim
    g = est.get("gpu") or {}
    return g.get("usable_memory_bytes") or g.get("memory_bytes")


def rank_rows(est: Mapping[str, Any]) -> list[dict]:
    """One row per rank of the estimate (none without a `ranks` section): rank, stage, role,
    in_flight (micro-batches), peak_phase, allocated, reserved, device_used (bytes), fits."""
    ranks = est.get("ranks") or []
    sc = est.get("scenario") or {}
    lay = layout_of(sc.get("parallel"))
    ga = int(sc.get("gradient_accumulation") or 1)
    limit = limit_of(est)
    rows = []
    for r in ranks:
        i = _stage(r.get("rank"))
        role = ("first" if i == 0 else "last" if i == lay.pipeline - 1 else "middle")
        used = int(r.get("device_used_bytes") or 0)
        fits = r.get("fits")
        if fits is None:
            fits = limit is not None and used <= limit
        rows.append({"rank": r.get("rank"), "stage": i, "role": role,
                     "in_flight": pipeline_inflight(lay.pipeline, ga, i or 0),
                     "peak_phase": r.get("peak_phase"),
                     "allocated": int(r.get("peak_allocated_bytes") or 0),
                     "reserved": int(r.get("peak_reserved_bytes") or 0),
                     "device_used": used, "fits": bool(fits)})
    return rows


def deciding_rank(est: Mapping[str, Any]) -> str | None:
    """The rank whose memory decides the verdict (the most device memory used), or None when
    the estimate has one rank or every rank uses the same."""
    rows = rank_rows(est)
    if len(rows) < 2 or len({r["device_used"] for r in rows}) == 1:
        return None
    return max(rows, key=lambda r: r["device_used"])["rank"]


def rank_table(est: Mapping[str, Any], lang: str = "en") -> tuple[list[str], list[list[str]]]:
    """(header, rows) in words for a report or the CLI: rank, role, micro-batches in flight,
    peak phase, allocated, reserved, device used, fits."""
    head = [tr(h, lang) for h in ("Rank", "Holds", "In flight", "Peak phase",
                                  "Allocated", "Reserved", "Device used", "Fits")]
    rows = [[r["rank"], tr(ROLES[r["role"]], lang), str(r["in_flight"]),
             tr(phase_label(str(r["peak_phase"] or "-")), lang), size(r["allocated"], lang),
             size(r["reserved"], lang), size(r["device_used"], lang),
             tr("yes", lang) if r["fits"] else tr("no", lang)]
            for r in rank_rows(est)]
    return head, rows


def decided_by(est: Mapping[str, Any], lang: str = "en") -> str | None:
    """'decided by stage 0 (the rank with the most memory)', or None (ranks alike / none)."""
    rank = deciding_rank(est)
    if rank is None:
        return None
    return tr("decided by {rank}, the rank with the most memory", lang, rank=rank)


def text_lines(est: Mapping[str, Any]) -> list[str]:
    """The per-rank table as fixed-width text lines (the CLI's `estimate` output); [] without
    ranks."""
    head, rows = rank_table(est)
    if not rows:
        return []
    cols = list(zip(head, *rows))
    width = [max(len(str(c)) for c in col) for col in cols]
    fmt = "  ".join(f"{{:{'<' if j < 2 else '>'}{w}}}" for j, w in enumerate(width))
    out = ["", "per rank (pipeline stages; per_gpu above is the worst):",
           "  " + fmt.format(*head)]
    out += ["  " + fmt.format(*r) for r in rows]
    by = decided_by(est)
    if by:
        out.append(f"verdict ({'fits' if est.get('fits') else 'does not fit'}) {by}")
    return out
