"""Grid axes from text (`--vary KEY=VALUES`) and scenario variants along them.

    batch_size=1..256          every integer from 1 to 256
    batch_size=1..256:x2       1, 2, 4, ..., 256 (geometric);  seq_len=512..8192:+512 (step)
    precision=bf16-mixed,fp32  a list;  checkpointing=all  every choice of the key
    resolution=512x512,1024x1024 | resolution=256..1024:x2 (square, the base's dimensions)
    parallel.gpus=1,2,4,8      a nested key (dotted); serving.max_num_seqs=16..256:x2
    gpu=all | gpu=nvidia-h100*,nvidia-a100-sxm4-80gb   GPUs (ids or glob patterns)

Values are validated by the scenario itself (`Scenario.replace`); a combination it refuses is
reported as that point's error, never guessed at.
"""
from __future__ import annotations

import fnmatch
import re

from ..errors import ScenarioError, VramplanError
from ..scenario.variants import BatchVariants, with_batch  # noqa: F401  (the sweep's names)

MAX_POINTS = 5_000_000
MAX_VALUES = 1 << 20
_RANGE = re.compile(r"^\s*(\d+)\s*\.\.\s*(\d+)\s*(?::\s*([x*+])\s*(\d+)\s*)?$")


def _scalar(text: str):
    t = text.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    return t


def _range(m, key: str) -> list[int]:
    a, b, op, k = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
    if b < a:
        raise VramplanError(f"--vary {key}: range {a}..{b} is empty (the end is below the "
                            "start)")
    step = int(k) if k else 1
    if op in ("x", "*"):
        if step < 2 or a < 1:
            raise VramplanError(f"--vary {key}: a geometric range needs a start >= 1 and a "
                                "factor >= 2 (e.g. 1..256:x2)")
        out, v = [], a
        while v <= b:
            out.append(v)
            v *= step
        return out
    if step < 1:
        raise VramplanError(f"--vary {key}: the step must be >= 1")
    if (b - a) // step + 1 > MAX_VALUES:
        raise VramplanError(f"--vary {key}: more than {MAX_VALUES} values")
    return list(range(a, b + 1, step))


def choices_of(key: str) -> tuple | None:
    """The choices of an enumerated scenario key (for `KEY=all`), None for other keys."""
    from ..scenario.keys import BY_NAME
    k = BY_NAME.get(key)
    return tuple(k.choices) if k is not None and k.choices else None


def parse_values(key: str, text: str, base=None) -> list:
    """The values of one axis (see the module doc)."""
    text = (text or "").strip()
    if not text:
        raise VramplanError(f"--vary {key}: no values given")
    if key == "gpu":
        return gpu_ids(text)
    if text.lower() == "all":
        ch = choices_of(key)
        if ch is None:
            raise VramplanError(f"--vary {key}=all: '{key}' has no list of choices; give "
                                "values or a range A..B")
        return list(ch)
    if key == "resolution":
        dims = len(base.resolution) if base is not None and base.resolution else 2
        m = _RANGE.match(text)
        if m:
            return [[v] * dims for v in _range(m, key)]
        out = []
        for item in text.split(","):
            try:
                out.append([int(x) for x in item.lower().split("x")])
            except ValueError:
                raise VramplanError(f"--vary resolution: '{item}' is not HxW or DxHxW") \
                    from None
        return out
    m = _RANGE.match(text)
    if m:
        return _range(m, key)
    return [_scalar(v) for v in text.split(",") if v.strip()]


def gpu_ids(text: str) -> list[str]:
    """GPU ids for `gpu=...`: `all`, ids or aliases, or glob patterns over the ids."""
    from ..hardware import default_db, get_gpu
    ids = [d.id for d in default_db().devices]
    if text.strip().lower() == "all":
        return ids
    out: list[str] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if any(c in item for c in "*?["):
            hit = [i for i in ids if fnmatch.fnmatchcase(i, item.lower())]
            if not hit:
                raise VramplanError(f"--vary gpu: no GPU id matches '{item}' "
                                    "(see `vramplan gpus`)")
            out += [h for h in hit if h not in out]
        else:
            gid = get_gpu(item).id
            if gid not in out:
                out.append(gid)
    return out


def check_key(key: str) -> None:
    """A scenario key (dotted for nested ones, `precision.<component>`) or `gpu`; anything
    else is refused up front, naming the closest keys."""
    from ..errors import closest
    from ..scenario.keys import BY_NAME
    if key == "gpu" or key in BY_NAME or (key.startswith("precision.") and len(key) > 10):
        return
    hint = closest(key, list(BY_NAME), 3)
    raise VramplanError(f"--vary {key}: not a scenario key" +
                        (f"; did you mean {', '.join(hint)}?" if hint else ""))


def parse_vary(items) -> dict[str, list]:
    """`KEY=VALUES` strings -> {key: values} (in the order given; a key at most once)."""
    axes: dict[str, str] = {}
    for it in items or ():
        if "=" not in it:
            raise VramplanError(f"--vary '{it}': expected KEY=VALUES, e.g. batch_size=1..64")
        k, v = it.split("=", 1)
        k = k.strip()
        if not k:
            raise VramplanError(f"--vary '{it}': no key before '='")
        if k in axes:
            raise VramplanError(f"--vary {k}: given twice")
        check_key(k)
        axes[k] = v
    return axes


def changes_for(given: dict, base, point: dict) -> dict:
    """The changes of one grid point to the scenario dict `given` (normalised as `base`):
    dotted keys merged into the object as given (`parallel.gpus=4` derives the data ranks
    again unless they are given too)."""
    changes: dict = {}
    nested: dict[str, dict] = {}
    for k, v in point.items():
        if "." in k:
            head, sub = k.split(".", 1)
            nested.setdefault(head, {})[sub] = v
        else:
            changes[k] = v
    for head, subs in nested.items():
        if head == "precision":
            cur = base.precision if isinstance(base.precision, dict) else \
                {"default": base.precision}
            changes["precision"] = {**cur, **subs}
            continue
        if head not in ("parallel", "lora", "serving"):
            raise ScenarioError(f"{head}.{next(iter(subs))}", "only parallel.*, lora.*, "
                                "serving.* and precision.* are nested keys")
        cur = dict(given.get(head) or {})
        if head == "parallel":
            if "gpus" in subs and "data" not in subs:
                cur.pop("data", None)
            elif set(subs) & {"data", "tensor", "pipeline", "context"} and "gpus" not in subs:
                cur.pop("gpus", None)
        if head == "serving" and "max_num_seqs" in subs and "batch_size" not in point:
            changes.setdefault("batch_size", subs["max_num_seqs"])
        if head == "serving" and "max_model_len" in subs and "seq_len" not in point:
            changes.setdefault("seq_len", subs["max_model_len"])
        changes[head] = {**cur, **subs}
    return changes


_CLASSES: dict = {}


def gpu_classes(scenario, eng, mask) -> list[tuple]:
    """The GPUs of `mask` grouped by the scenario a dict becomes with each of them named as
    its "gpu" (defaults that follow the GPU, e.g. fp16 where it has no bf16: what `estimate`
    of that dict on that GPU reads): [(a GPU id of the group or None, engine-wide mask)];
    one group, with None, when every GPU gives the same scenario (or for a Scenario)."""
    if not isinstance(scenario, dict):
        return [(None, mask)]
    import json

    import numpy as np

    from ..scenario import Scenario
    cols = np.flatnonzero(mask)
    ck = (json.dumps(scenario, sort_keys=True, default=str), cols.tobytes(), id(eng))
    if ck in _CLASSES:
        return _CLASSES[ck]
    # the scenario reads what a GPU can run (scenario.rules: its capabilities, generation);
    # GPUs alike in those share a scenario: one is built per kind, then kinds that give the
    # same scenario are one group
    kinds: dict = {}
    for i in cols:
        dev = eng.devices[int(i)]
        sig = (freeze_caps(dev), getattr(dev, "compute_capability", None),
               getattr(dev, "architecture", None), getattr(dev, "vendor", None))
        kinds.setdefault(sig, []).append(int(i))
    groups: dict = {}
    for idx in kinds.values():
        try:
            d = Scenario.from_dict({**scenario, "gpu": eng.devices[idx[0]].id}).to_dict()
            d.pop("gpu", None)
            key = json.dumps(d, sort_keys=True, default=str)
        except ScenarioError as exc:
            key = "error: " + str(exc)
        groups.setdefault(key, []).extend(idx)
    if len(groups) == 1:
        out = [(None, mask)]
    else:
        out = []
        for idx in groups.values():
            m = np.zeros(eng.n, dtype=bool)
            m[idx] = True
            out.append((eng.devices[idx[0]].id, m))
    if len(_CLASSES) > 256:
        _CLASSES.clear()
    _CLASSES[ck] = out
    return out


def freeze_caps(dev) -> tuple:
    caps = dict(getattr(dev, "capabilities", None) or {})
    return tuple(sorted((str(k), str(v)) for k, v in caps.items()))
