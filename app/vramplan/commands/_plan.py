"""The plan of a command, one definition for all: `--scenario FILE`, or the scenario's own
flags (one per scalar key of the key table, `vramplan.scenario.keys.cli_flags`, plus
`--architecture`, `--lora-targets`, `--option`, `--offload`). `estimate`, `advise`, `sweep`,
`report` and `trace` take the same flags, so a plan written for one command runs in another.

A scenario file holds the whole plan: with `--scenario`, only `--gpu` may be added (the GPU
it runs on); any other key flag would be ignored, so it is refused.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from .. import safejson
from ..catalog.size_only import looks_like_size, parse_params
from ..errors import VramplanError
from ..scenario import MODELLESS_TASKS, OFFLOAD, OPTIONS
from ..scenario.keys import cli_flags, scenario_from_flags

__all__ = ["add_scenario_flags", "scenario_from_args", "flags_given", "plan_of", "load_one",
           "architecture_arg", "METAVARS"]

METAVARS = {"model": "ID", "gpu": "ID", "resolution": "HxW", "texture_budget": "SIZE",
            "geometry_budget": "SIZE", "safety_margin": "SHARE|SIZE"}
FILE_HELP = ("a scenario file holding one scenario (JSON object); only --gpu may be added "
             "to it")
_LISTS = ("lora_targets", "architecture", "option", "offload")


def _one_of(values) -> str:
    return ", ".join(values)


def add_scenario_flags(p, *, file_help: str = FILE_HELP, skip: tuple = ()) -> None:
    """--scenario FILE, --architecture and a flag for every scalar key (its type, choices and
    help from the key table, so a new key gets its flag without an edit here), and the list
    keys. `skip`: key flags (dests) a command defines itself with another meaning."""
    p.add_argument("--scenario", metavar="FILE", help=file_help)
    p.set_defaults(skipped_key_flags=tuple(skip))
    p.add_argument("--architecture", metavar="JSON|FILE",
                   help="inline architecture instead of --model: a Hugging Face config.json "
                        "(path or JSON text) or '{\"params\": 7e9}'")
    keys = p.add_argument_group("scenario keys (docs/scenario-keys.md)")
    for f in cli_flags():
        if f.dest in skip:
            continue
        kw: dict = {"dest": f.dest, "help": f.help, "default": None}
        if f.type is bool:
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["type"] = f.type
            if f.choices:
                kw["choices"] = f.choices
                kw["metavar"] = f.dest.upper().split("_")[-1]
                kw["help"] += f" (one of: {_one_of(str(c) for c in f.choices)})"
            else:
                kw["metavar"] = METAVARS.get(f.dest, "N" if f.type in (int, float) else "VALUE")
        keys.add_argument(f.flag, **kw)
    lists = p.add_argument_group("list keys")
    lists.add_argument("--lora-targets", metavar="NAMES",
                       help="lora.targets, comma-separated module names, e.g. q_proj,v_proj "
                            "(default) or all-linear; an unknown name is refused, listing the "
                            "model's")
    lists.add_argument("--option", action="append", default=[], choices=tuple(OPTIONS),
                       metavar="OPTION", help=f"repeatable framework switch: "
                                              f"{_one_of(OPTIONS)} (docs/scenario-keys.md)")
    lists.add_argument("--offload", action="append", default=[], choices=tuple(OFFLOAD),
                       metavar="WHAT", help=f"repeatable: move to CPU memory: {_one_of(OFFLOAD)}")


def scenario_from_args(a) -> dict:
    """The scenario dict the key flags spell (flags not given are left out)."""
    skip = getattr(a, "skipped_key_flags", ())
    d = scenario_from_flags({f.dest: getattr(a, f.dest, None) for f in cli_flags()
                             if f.dest not in skip})
    if getattr(a, "lora_targets", None):
        d.setdefault("lora", {})["targets"] = [t.strip() for t in a.lora_targets.split(",")
                                               if t.strip()]
    if getattr(a, "architecture", None):
        d["architecture"] = architecture_arg(a.architecture)
    elif looks_like_size(d.get("model")):      # '--model 70B': the page's size-only decoder
        d["architecture"] = {"params": parse_params(d.pop("model"))}
    if getattr(a, "option", None):
        d["options"] = list(a.option)
    if getattr(a, "offload", None):
        d["offload"] = list(a.offload)
    return d


def flags_given(a, *, but=("gpu",)) -> list[str]:
    """The key and list flags given on the command line (except `but`), as typed."""
    skip = tuple(but) + tuple(getattr(a, "skipped_key_flags", ()))
    out = [f.flag for f in cli_flags() if f.dest not in skip and getattr(a, f.dest, None)
           is not None]
    return out + [f"--{k.replace('_', '-')}" for k in _LISTS
                  if getattr(a, k, None) not in (None, [])]


def load_one(path: str, command: str = "this command"):
    """The one Scenario of a scenario file (a file of several is refused)."""
    from ..scenario import load_scenarios
    items = load_scenarios(path)
    if not items:
        raise VramplanError(f"scenario file '{path}' holds no scenario")
    if len(items) > 1:
        raise VramplanError(f"scenario file '{path}' holds {len(items)} scenarios; {command} "
                            "takes one")
    if isinstance(items[0], Exception):
        raise items[0]
    return items[0]


def plan_of(a, command: str):
    """The command's one Scenario: the file of --scenario (with --gpu, when given, as its
    GPU) or the key flags; a ScenarioError names the key as `estimate` does."""
    from ..scenario import Scenario
    if getattr(a, "scenario", None):
        given = flags_given(a)
        if given:
            raise VramplanError(f"--scenario FILE holds the whole plan: {', '.join(given)} "
                                "would be ignored (put them in the file; only --gpu may be "
                                "added)")
        sc = load_one(a.scenario, command)
        gpu = getattr(a, "gpu", None)
        return sc.replace(gpu=gpu) if gpu else sc
    d = scenario_from_args(a)
    if "model" not in d and "architecture" not in d and d.get("task") not in MODELLESS_TASKS:
        raise VramplanError(f"{command}: give --scenario FILE, or the plan as flags: --model "
                            f"or --architecture (tasks {', '.join(MODELLESS_TASKS)} need "
                            "neither) and the other keys (see `vramplan estimate --help`)")
    return Scenario.from_dict(d)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def architecture_arg(text: str) -> dict:
    """--architecture: a path to a config.json, or the JSON itself (safejson: no NaN, no
    1e999, no nesting deeper than safejson.MAX_DEPTH)."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        path = Path(text)
        try:
            is_file = path.is_file()
        except (OSError, ValueError):   # a name too long for the file system, a NUL byte
            is_file = False
        if not is_file:
            raise VramplanError(f"--architecture: '{_short(text)}' is neither a file nor JSON "
                                "text (an object such as '{\"params\": 7e9}')")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise VramplanError(f"--architecture: cannot read '{_short(text)}': "
                                f"{exc.strerror or exc}") from None
        obj = safejson.loads(data, f"--architecture file '{_short(text)}'")
    else:
        obj = safejson.loads(text, "--architecture")
    if not isinstance(obj, dict):
        raise VramplanError(f"--architecture: expected a JSON object, got "
                            f"{'a list' if isinstance(obj, list) else type(obj).__name__}")
    return obj
