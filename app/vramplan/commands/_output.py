"""Shared CLI output: plain-text tables, JSON and CSV, so every command prints alike."""
from __future__ import annotations

import csv
import io
import json
import sys
from typing import Any, Iterable, Sequence


def add_format_arg(parser, choices: Sequence[str] = ("table", "json", "csv"), default: str = "table"):
    parser.add_argument("--format", choices=list(choices), default=default,
                        help=f"{', '.join(choices[:-1])} or {choices[-1]} (default: {default})")


def add_scenario_arg(parser) -> None:
    """`--scenario FILE` of the commands that take one plan (advise, sweep, report)."""
    parser.add_argument("--scenario", metavar="FILE", required=True,
                        help="a scenario file holding one scenario (JSON object)")


def add_gpu_arg(parser, flag: str = "--gpu", what: str = "the GPU") -> None:
    """The GPU flag of a one-plan command; its default is the scenario's `gpu`."""
    parser.add_argument(flag, metavar="ID", help=f"{what} (default: the scenario's `gpu`); "
                        "see `vramplan gpus`")


def add_max_gpus_arg(parser, default: int) -> None:
    """`--max-gpus N` of the commands that plan over several GPUs (advise, cluster)."""
    parser.add_argument("--max-gpus", type=int, default=default, metavar="N",
                        help=f"the most GPUs a plan may use (default {default})")


def add_margin_arg(parser, *flags: str, dest: str, default: str) -> None:
    """The memory kept free per GPU (`advise --headroom`, `cluster --safety-margin`): the
    scenario key safety_margin, one flag definition for both."""
    parser.add_argument(*flags, dest=dest, metavar="SHARE|SIZE", default=None,
                        help="memory kept free per GPU, as the scenario key safety_margin: a "
                             "share of usable memory ('5%%', 0.05) or a size ('2 GiB'); the one "
                             "limit the estimate's verdict and max batch use too; default "
                             + default)


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str], align: str | None = None) -> str:
    """A fixed-width text table; `align` is one char per column, 'l' or 'r'."""
    rows = [["" if v is None else str(v) for v in r] for r in rows]
    headers = [str(h) for h in headers]
    widths = [len(h) for h in headers]
    for r in rows:
        for i, v in enumerate(r):
            widths[i] = max(widths[i], len(v))
    align = align or "l" * len(headers)

    def fmt(r):
        cells = [v.rjust(w) if a == "r" else v.ljust(w) for v, w, a in zip(r, widths, align)]
        return "  ".join(cells).rstrip()
    lines = [fmt(headers), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def to_csv(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(headers)
    for r in rows:
        w.writerow(["" if v is None else v for v in r])
    return buf.getvalue()


def dump_json(obj: Any, indent: int | None = 2) -> str:
    return json.dumps(obj, indent=indent, sort_keys=False, default=_default)


def _default(o):
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if isinstance(o, (set, tuple)):
        return list(o)
    try:  # numpy scalars
        return o.item()
    except AttributeError:
        raise TypeError(f"not JSON serialisable: {type(o).__name__}") from None


def emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
