"""SI unit strings and their dimensions, for checking wires at build time.

A unit string is a product of SI symbols with optional integer exponents,
``*``/space for multiplication and ``/`` for division: ``"N s/m"``,
``"m/s^2"``, ``"kg*m^2"``.  ``""`` or ``"1"`` is dimensionless.  ``rad`` and
``count`` are kept as dimensions of their own, so that an angle is not wired to
a length by mistake.  Units cost nothing at run time.
"""
from __future__ import annotations

import re
from functools import lru_cache

_BASE = ("m", "kg", "s", "A", "K", "mol", "cd", "rad", "count")

# symbol -> exponents over _BASE (derived SI units expanded)
_SYMBOLS: dict[str, tuple[int, ...]] = {
    "m": (1, 0, 0, 0, 0, 0, 0, 0, 0),
    "kg": (0, 1, 0, 0, 0, 0, 0, 0, 0),
    "s": (0, 0, 1, 0, 0, 0, 0, 0, 0),
    "A": (0, 0, 0, 1, 0, 0, 0, 0, 0),
    "K": (0, 0, 0, 0, 1, 0, 0, 0, 0),
    "mol": (0, 0, 0, 0, 0, 1, 0, 0, 0),
    "cd": (0, 0, 0, 0, 0, 0, 1, 0, 0),
    "rad": (0, 0, 0, 0, 0, 0, 0, 1, 0),
    "count": (0, 0, 0, 0, 0, 0, 0, 0, 1),
    "Hz": (0, 0, -1, 0, 0, 0, 0, 0, 0),
    "N": (1, 1, -2, 0, 0, 0, 0, 0, 0),
    "J": (2, 1, -2, 0, 0, 0, 0, 0, 0),
    "W": (2, 1, -3, 0, 0, 0, 0, 0, 0),
    "Pa": (-1, 1, -2, 0, 0, 0, 0, 0, 0),
    "V": (2, 1, -3, -1, 0, 0, 0, 0, 0),
    "C": (0, 0, 1, 1, 0, 0, 0, 0, 0),
    "ohm": (2, 1, -3, -2, 0, 0, 0, 0, 0),
    "H": (2, 1, -2, -2, 0, 0, 0, 0, 0),
}

_TOKEN = re.compile(r"([A-Za-z]+)(?:\^?(-?\d+))?$")


class UnitError(ValueError):
    """A unit string that cannot be parsed."""


@lru_cache(maxsize=None)
def dimension(unit: str) -> tuple[int, ...]:
    """Exponents of ``unit`` over the base dimensions.

    Parameters
    ----------
    unit : str
        Unit string such as ``"N s/m"``.

    Returns
    -------
    tuple of int
        Exponents over (m, kg, s, A, K, mol, cd, rad, count).

    Raises
    ------
    UnitError
        If a symbol is not known.
    """
    text = unit.replace("**", "^").replace("·", "*").strip()
    dims = [0] * len(_BASE)
    if text in ("", "1", "-"):
        return tuple(dims)
    numerator, *denominators = text.split("/")
    if denominators and not all(part.strip() for part in (numerator, *denominators)):
        raise UnitError(f"unit {unit!r} has nothing on one side of a '/'; write e.g. 'N/m' "
                        "or '1/s'")
    for sign, part in [(1, numerator)] + [(-1, d) for d in denominators]:
        for token in part.replace("*", " ").split():
            if token == "1":
                continue
            match = _TOKEN.match(token)
            if not match or match.group(1) not in _SYMBOLS:
                raise UnitError(
                    f"unknown unit {token!r} in {unit!r}; use SI symbols "
                    f"({', '.join(_SYMBOLS)}) with ^n exponents, '*' or spaces and '/'")
            power = int(match.group(2) or 1) * sign
            for k, e in enumerate(_SYMBOLS[match.group(1)]):
                dims[k] += e * power
    return tuple(dims)


def same_dimension(a: str, b: str) -> bool:
    """True if unit strings ``a`` and ``b`` have the same dimension."""
    return dimension(a) == dimension(b)
