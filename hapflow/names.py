"""Named parameters and states: the offsets kernels use, generated from declarations.

A kernel reads its packed parameters and its state by name through constants
the block class gets from its declarations, never from a table kept by hand::

    class Spring(Block):
        params = {"k": Live(100.0, unit="N/m"), "x0": Live(0.0, unit="m")}
        derived = {"k2": Derived(lambda b: 2.0 * b.k, unit="N/m")}
        cstate = ("pos", "vel")

    @njit
    def deriv(t, x, d, m, p, force, dx):
        dx[X.pos] = x[X.vel]
        dx[X.vel] = force[0] - p[P.k2] * x[X.pos]

    P, X = Spring.P, Spring.X       # module globals the kernels name

``P`` holds the offset of every parameter in the packed vector ``p`` (live
parameters in declaration order, then the ``derived`` ones, as the default
:meth:`hapflow.block.Block.pack` packs them); ``X``, ``D`` and ``M`` the
offsets of named continuous, discrete and integer states (``cstate``,
``dstate``, ``istate`` given as names instead of counts; a name with a
size takes ``{"name": size}``).  They are named tuples of ints: numba reads
them as compile-time constants, and the code generator folds them into the
offsets it writes (:mod:`hapflow.inline`), so a named access costs nothing.
An array parameter (kind ``floats``) has a length known only from its
value: parameters after it get no constant (declare arrays last).
"""
from __future__ import annotations

import functools
from collections import namedtuple
from dataclasses import dataclass
from typing import Any, Callable

SCALAR_KINDS = ("float", "int", "bool")
"""Parameter kinds that pack as one value."""


@dataclass(frozen=True)
class Derived:
    """A parameter computed from the declared ones, packed after them.

    Parameters
    ----------
    value : callable
        ``value(block) -> float or array`` from the block's parameter values
        (read as attributes, e.g. ``block.k_stiff``).
    unit : str
        SI unit.
    doc : str
        One line for the block reference.
    size : int, callable or None
        Number of packed values; ``size(block) -> int`` for a number that follows
        from structural parameters (a filter's matrices), known before the value
        (the sample time) is; None for one known from the value only (filter
        coefficients).  The class offsets ``P`` stop at the first that is not an
        int (declare those last; kernels find its start by name and its length
        from ``p.size``); :meth:`hapflow.block.Block.packed_offsets` names all.
    """

    value: Callable[[Any], Any]
    unit: str = ""
    doc: str = ""
    size: int | Callable[[Any], int] | None = 1

    def size_for(self, block: Any) -> int | None:
        """The number of values of ``block``'s derived value, if known without computing it."""
        return self.size(block) if callable(self.size) else self.size


def offsets(title: str, sizes: list[tuple[str, int | None]]) -> tuple:
    """A named tuple ``title`` with each name's offset, the sizes laid end to end; names
    after one of unknown size (None) are left out."""
    fields: dict[str, int] = {}
    at = 0
    for name, size in sizes:
        fields[name] = at
        if size is None:
            break
        at += size
    return _tuple_type(title, tuple(fields))(**fields)


@functools.lru_cache(maxsize=None)
def _tuple_type(title: str, names: tuple[str, ...]) -> type:
    """One named-tuple class per title and names: every filter of one structure asks for its
    offsets again (:meth:`hapflow.block.Block.packed_offsets`), and making the class is the
    cost."""
    return namedtuple(title, names)


def state_sizes(declared: Any) -> list[tuple[str, int]] | None:
    """``cstate``/``dstate``/``istate`` given as names: ``("pos", "vel")`` or
    ``{"q": 3, "mode": 1}`` as (name, size) pairs; None when given as a count."""
    if isinstance(declared, dict):
        return [(str(name), int(size)) for name, size in declared.items()]
    if isinstance(declared, (tuple, list)):
        return [(str(name), 1) for name in declared]
    return None


def spans(named: tuple, total: int) -> list[tuple[str, int, int]]:
    """``(name, offset, size)`` of each field of an offsets tuple whose sizes add to
    ``total``."""
    ends = [*named[1:], total]
    return [(name, at, end - at) for name, at, end in zip(named._fields, named, ends)]


def constant_field(value: Any, attr: str) -> int | None:
    """``value.attr`` when ``value`` is an offsets tuple (a named tuple of ints), else None."""
    if isinstance(value, tuple) and attr in getattr(value, "_fields", ()):
        field = getattr(value, attr)
        if isinstance(field, int) and not isinstance(field, bool):
            return field
    return None


def fields(block: Any, key: str) -> list[tuple[str, int, int, str]]:
    """``(name, offset, size, unit)`` of each named value in slot ``key`` (``p``, ``x``,
    ``d`` or ``m``) of ``block``, in order; empty when the slot is not named (a block
    that packs by hand, states given as counts or resized by ``configure``)."""
    if key == "p":
        names = block.packed_names()
        out, at = [], 0
        for name, size, unit in names or ():
            out.append((name, at, size, unit))
            at += size
        return out
    count = {"x": "cstate", "d": "dstate", "m": "istate"}[key]
    named = getattr(type(block), key.upper(), None)
    own = getattr(block, count)
    if not hasattr(named, "_fields") or own != getattr(type(block), count):
        return []
    return [(name, at, size, "") for name, at, size in spans(named, own)]
