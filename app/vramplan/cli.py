"""`vramplan` command line: a thin dispatcher over `vramplan.commands.*` modules.

Each command module exposes `register(subparsers)`, which adds its parser(s) and sets
`func`. A VramplanError becomes one line on stderr and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from .errors import VramplanError

# command modules, in the order `vramplan --help` lists them; a missing one is skipped
COMMAND_MODULES = ["gpus", "estimate", "sweep", "trace", "live", "app"]


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    parser = argparse.ArgumentParser(
        prog="vramplan",
        description="GPU memory capacity planner: will it fit, how large can the batch be, "
                    "what bandwidth does it need.")
    parser.add_argument("--version", action="version", version=f"vramplan {__version__}")
    parser.add_argument("--hwdb", metavar="PATH", default=None,
                        help="extra hardware database (file or directory) validated like the "
                             "built-in one; also $VRAMPLAN_HWDB")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"vramplan.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"vramplan.commands.{name}":
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if args.hwdb:
            from . import hardware
            hardware.set_extra_path(args.hwdb)
        rc = args.func(args)
    except VramplanError as exc:
        print(f"vramplan: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("vramplan: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
