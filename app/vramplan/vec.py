"""Arithmetic that works on Python numbers and on numpy arrays alike, so one memory model
serves the scalar estimate and the sweep's batch axis.

A footprint called with a scenario whose `batch_size` is a 1-D int64 array (the sweep does
this) evaluates every batch value in one call; the same code called with an int returns
exactly the Python ints it always did: with no array among their arguments these helpers are
the builtins (`max`, `min`, `int`, `a if c else b`), so the scalar path does not change by a
byte and never imports numpy.

    vmax(a, b, ...), vmin(...)    max / min, element by element where one is an array
    to_int(x)                     int(x); an array: int64, truncated toward zero like int()
    where(c, a, b)                a if c else b; an array c: element by element
    truth(x)                      bool(x); an array: its one truth value, or Divergent
    peak(phases)                  the phase with the most bytes (the first of ties) and its
                                  components; arrays: per element (missing components are 0)
    isin(x, options)              x in options, per element for an array of names
    shown(x)                      x for an f-string; an array as a short text (notes)
    scalar(x, what)               x; an array refused (NotArrayWise) where code is not array-wise
    pick(table, key, default)     table.get(key, default), per element for an array of keys

A branch that an array cannot take for all its elements at once (`truth` of an array whose
elements disagree) raises `Divergent`; the caller then evaluates the elements one by one.
Python's own `if`, `max`, `int` and `or` on an array of two or more elements raise too
(numpy refuses their truth value), so a footprint that is not array-transparent fails loudly
instead of answering wrong.
"""
from __future__ import annotations


class Divergent(ValueError):
    """A branch whose condition differs between the elements of an array call."""


class NotArrayWise(TypeError):
    """Code written for numbers only was given an array (the caller then goes one by one)."""


def scalar(x, what: str):
    """x, refusing an array loudly where `what` is not written array-wise (e.g. code that
    catches exceptions and would otherwise swallow numpy's)."""
    if getattr(x, "ndim", 0) > 0:
        raise NotArrayWise(f"{what} takes one batch value at a time")
    return x


def is_array(x) -> bool:
    """True for a numpy array of one or more dimensions (not for numbers or numpy scalars)."""
    return getattr(x, "ndim", 0) > 0


def _arrays(xs) -> bool:
    for x in xs:
        if getattr(x, "ndim", 0) > 0:
            return True
    return False


def vmax(*xs):
    """max(*xs); element by element (numpy.maximum, left to right) where one is an array."""
    return _fold(xs, max, "maximum")


def vmin(*xs):
    """min(*xs); element by element (numpy.minimum, left to right) where one is an array."""
    return _fold(xs, min, "minimum")


def _fold(xs, builtin, ufunc: str):
    """builtin(xs) with no array among xs; else numpy.<ufunc> folded left to right
    (xs[0] with xs[1], that with xs[2], ...)."""
    if not _arrays(xs):
        return builtin(xs)
    import numpy as np
    step = getattr(np, ufunc)
    out = xs[0]
    for x in xs[1:]:
        out = step(out, x)
    return out


def to_int(x):
    """int(x); an array becomes int64, truncated toward zero as int() truncates a float."""
    if getattr(x, "ndim", 0) > 0:
        import numpy as np
        return x.astype(np.int64)
    return int(x)


def int_or(x, default: int):
    """int(x or default) for a number or None; an array as int64 (its elements are >= 1)."""
    if getattr(x, "ndim", 0) > 0:
        return to_int(x)
    return int(x or default)


def shown(x):
    """x itself for a number (an f-string prints it as before); for an array a short text of
    its range or its distinct names (printing every element costs more than the arithmetic)."""
    if getattr(x, "ndim", 0) > 0:
        if not x.size:
            return "[]"
        if x.dtype.kind == "O":
            return " / ".join(dict.fromkeys(str(v) for v in x.tolist()))
        return f"{x.min()}..{x.max()} ({x.size} values)"
    return x


def pick(table: dict, key, default=0):
    """table.get(key, default); for an array of keys, element i is element i of the value
    (a number, or an array over the same axis) of key i."""
    if getattr(key, "ndim", 0) > 0:
        import numpy as np
        keys = key.tolist()
        vals = [table.get(k, default) for k in dict.fromkeys(keys)]
        out = np.zeros(key.shape, dtype=np.float64 if _floats(vals) else np.int64)
        for k, v in zip(dict.fromkeys(keys), vals):
            m = key == k
            out[m] = np.broadcast_to(v, key.shape)[m]
        return out
    return table.get(key, default)


def where(cond, a, b):
    """a if cond else b; element by element where cond is an array (a and b both evaluated)."""
    if getattr(cond, "ndim", 0) > 0:
        import numpy as np
        return np.where(cond, a, b)
    return a if cond else b


def truth(x) -> bool:
    """bool(x); for an array, the truth value all its elements share (Divergent if they do
    not: the branch has to be taken one element at a time)."""
    if getattr(x, "ndim", 0) > 0:
        import numpy as np
        b = np.asarray(x).astype(bool)
        if b.all():
            return True
        if not b.any():
            return False
        raise Divergent("a branch differs between the elements of an array call")
    return bool(x)


def isin(x, options) -> object:
    """x in options; element by element for an array of names."""
    if getattr(x, "ndim", 0) > 0:
        import numpy as np
        opts = set(options)
        return np.fromiter((v in opts for v in x.tolist()), dtype=bool, count=x.size)
    return x in options


def peak(phases: dict):
    """(the phase whose components sum highest, the first of ties as builtin max gives it,
    and a copy of its components). With arrays: an array of phase names and one array per
    component, each element that of its own peak phase (0 where that phase lacks it)."""
    totals = [sum(ph.values()) for ph in phases.values()]
    if not _arrays(totals):
        top = max(phases, key=lambda p: sum(phases[p].values()))
        return top, dict(phases[top])
    import numpy as np
    shape = np.broadcast_shapes(*(np.shape(t) for t in totals))
    best = np.argmax(_rows(totals, shape), axis=0)   # the first of ties, as max gives
    cols = np.arange(best.size).reshape(shape)
    keys: list = []
    for ph in phases.values():
        keys += [k for k in ph if k not in keys]
    comps = {k: _rows([ph.get(k, 0) for ph in phases.values()], shape)[best, cols]
             for k in keys}
    return np.asarray(list(phases), dtype=object)[best], comps


def _rows(values: list, shape):
    """The values (numbers or arrays) as the rows of one array, float64 if one is a float."""
    import numpy as np
    m = np.empty((len(values),) + tuple(shape), dtype=np.float64 if _floats(values) else np.int64)
    for i, v in enumerate(values):
        m[i] = v
    return m


def _floats(values) -> bool:
    return any(isinstance(v, float) or getattr(getattr(v, "dtype", None), "kind", "") == "f"
               for v in values)
