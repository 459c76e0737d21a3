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
COMMAND_MODULES = ["gpus", "estimate", "advise", "cluster", "sweep", "report", "trace", "live", "app"]


class Parser(argparse.ArgumentParser):
    """argparse with the CLI's error line: a bad flag or choice is `vramplan: error: ...`,
    exit 2, like every other user error (subcommand parsers inherit it)."""

    def error(self, message: str):
        self.exit(2, f"vramplan: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    parser = Parser(
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
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:   # --help, --version, a bad flag: the status, not an exception
        return exc.code if isinstance(exc.code, int) else 2
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
    except RecursionError:   # a safety net: safejson / the hwdb loader refuse deep input first
        print("vramplan: error: input nested too deep", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("vramplan: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
