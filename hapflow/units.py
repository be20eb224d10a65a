"""Units, through pint, at build time only: port and parameter units, data-file headers, scales.

A unit string is anything pint parses (``"N s/m"``, ``"m/s^2"``, ``"kg*m^2"``,
``"N/sqrt(Hz)"``, ``"mm"``, ``"gf"``, ``"lbf"``, ``"H"``, ``"N m"``); ``""``,
``"1"`` and ``"-"`` are dimensionless.  Ports and parameters carry *coherent
SI* units (a factor of exactly 1 to the SI base units, so ``mm`` or ``kHz``
are refused there: a value in them would be read 1000x wrong);
:func:`to_si` converts any unit (a CSV header in ``mm`` or ``gf``, a HIL
scale in ``lbf``) to SI.

``rad`` and ``count`` are checked dimensions of their own, so an angle is
not wired to a length or to a plain number, and encoder counts are not a
plain number either.  pint defines ``radian = []`` (dimensionless, as SI
does) and ``count = []``; hapflow loads pint's own definition file with
those two lines replaced by base dimensions, ``radian = [angle]`` and
``count = [count]``; every other definition (``degree``, ``turn``, ``rpm``,
``sr``) follows from them.  ``N m`` (torque) and ``J`` share a dimension, as
in SI; ``N m/rad`` (a rotary stiffness) does not.

pint takes about a second to import and build its registry, so results are
kept on disk (:func:`hapflow.designs.cached`, keyed by the unit string and
pint's version): a warm start does not import pint.
"""
from __future__ import annotations

import math
import re
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

BASE = ("m", "kg", "s", "A", "K", "mol", "cd", "rad", "count")
"""The base units, in the order of :func:`dimension`'s exponents."""
_PINT_DIMENSIONS = ("[length]", "[mass]", "[time]", "[current]", "[temperature]",
                    "[substance]", "[luminosity]", "[angle]", "[count]")
_CHECKED = {"radian = [] = rad\n": "radian = [angle] = rad\n",
            "count = []\n": "count = [count]\n"}
_SQRT = re.compile(r"sqrt\(([^()]*)\)")
_BARE_EXPONENT = re.compile(r"(?<=[A-Za-z])(\d+)")
"""``s2`` for ``s^2`` (pint reads it as a name)."""


class UnitError(ValueError):
    """A unit string that cannot be parsed, or that is not SI where SI is required."""


def dimension(unit: str) -> tuple[float, ...]:
    """Exponents of the coherent SI unit ``unit`` over the base units.

    Parameters
    ----------
    unit : str
        Unit string such as ``"N s/m"``.

    Returns
    -------
    tuple of int or float
        Exponents over (m, kg, s, A, K, mol, cd, rad, count) (ints unless a
        square root makes them halves).

    Raises
    ------
    UnitError
        If a symbol is not known, or the unit is not coherent SI (``mm``).
    """
    factor, dims = to_si(unit)
    if not math.isclose(factor, 1.0, rel_tol=1e-12):    # scalar: runs for every wired port
        raise UnitError(f"unit {unit!r} is {factor:g} {si_text(dims) or '(dimensionless)'}: "
                        "ports and parameters take SI units without prefixes; write the "
                        f"value in {si_text(dims) or 'plain numbers'}")
    return dims


def same_dimension(a: str, b: str) -> bool:
    """True if unit strings ``a`` and ``b`` have the same dimension."""
    return dimension(a) == dimension(b)


@lru_cache(maxsize=None)
def to_si(unit: str) -> tuple[float, tuple[float, ...]]:
    """Factor from ``unit`` to SI, and the SI dimension: ``"mm"`` -> ``(1e-3, (1, 0, ...))``,
    ``"lbf"`` -> ``(4.448..., newton's exponents)``.

    Raises
    ------
    UnitError
        If pint does not know a symbol of ``unit`` (the message names it).
    """
    return _convert(unit, expression=False)


@lru_cache(maxsize=None)
def scale(expression: str) -> tuple[float, tuple[float, ...]]:
    """Like :func:`to_si` for a unit with numbers: ``"0.5*N"`` -> 0.5 N, ``"V*0.001 m/V"`` (a
    sensor giving 1 mm per volt) -> 0.001 m, ``"2.5 mm/V * V"`` -> 0.0025 m.

    Raises
    ------
    UnitError
        If pint cannot read it.
    """
    return _convert(expression, expression=True)


def _convert(unit: str, expression: bool) -> tuple[float, tuple[float, ...]]:
    from .designs import cached
    text = unit.replace("·", "*").replace("**", "^").strip()
    if text in ("", "1", "-"):
        return 1.0, (0,) * len(BASE)
    if "/" in text and not all(part.strip() for part in text.split("/")):
        raise UnitError(f"unit {unit!r} has nothing on one side of a '/'; write e.g. 'N/m' "
                        "or '1/s'")
    row = cached("unit", (text, expression, _pint_version()),
                 lambda: _parse(unit, text, expression))
    dims = tuple(int(e) if float(e).is_integer() else float(e) for e in row[1:])
    return float(row[0]), dims


NAMED = ("m", "m/s", "m/s^2", "N", "N m", "rad", "rad/s", "rad/s^2", "s", "Hz", "kg", "V", "A",
         "ohm", "H", "W", "Pa", "N/m", "N s/m", "count")
"""SI units :func:`si_text` names a dimension by, before a product of base units."""


def si_text(dims: tuple[float, ...]) -> str:
    """A coherent SI unit of exponents ``dims``: a name of :data:`NAMED` (``"N"``) or else
    the product of base units (``"kg m^2 s^-3 A^-2"``); ``""`` for a plain number."""
    for name in NAMED:
        if to_si(name)[1] == tuple(dims):
            return name
    return " ".join(b if e == 1 else f"{b}^{e:g}" for b, e in zip(BASE, dims) if e)


def _parse(unit: str, text: str, expression: bool) -> np.ndarray:
    """``[factor, *exponents]`` of ``text`` from pint (a unit, or an ``expression`` that may
    hold numbers)."""
    import pint
    registry = _registry()
    try:
        written = _BARE_EXPONENT.sub(r"^\1", _SQRT.sub(r"(\1)^0.5", text))
        quantity = (registry.parse_expression(written) * 1.0 if expression
                    else registry.Quantity(1.0, written)).to_base_units()
    except pint.UndefinedUnitError as exc:
        token = exc.unit_names if isinstance(exc.unit_names, str) else exc.unit_names[0]
        raise UnitError(f"unknown unit {token!r} in {unit!r}; use SI symbols "
                        f"({', '.join(BASE)}, N, J, W, Pa, V, C, ohm, H, Hz) with ^n exponents, "
                        "'*' or spaces and '/'") from None
    except Exception as exc:           # pint's parser raises several kinds on bad syntax
        detail = f" ({exc})" if str(exc) else ""
        raise UnitError(f"unit {unit!r} cannot be parsed{detail}; write e.g. 'N/m', "
                        "'m/s^2' or '1/s'") from None
    dims: dict[str, Any] = dict(quantity.dimensionality)
    other = sorted(set(dims) - set(_PINT_DIMENSIONS))
    if other:
        raise UnitError(f"unit {unit!r} has the dimension {', '.join(other)}, which is not "
                        f"made of the SI base units {', '.join(BASE)}")
    return np.array([float(quantity.magnitude),
                     *(float(dims.get(d, 0)) for d in _PINT_DIMENSIONS)])


@lru_cache(maxsize=1)
def _registry() -> Any:
    """pint's registry from its own definition file with ``radian`` and ``count`` made base
    dimensions (see the module docstring)."""
    import pint
    from .cachedir import cache_dir, write_whole
    source = Path(pint.__file__).parent
    text = (source / "default_en.txt").read_text(encoding="utf-8")
    for old, new in _CHECKED.items():
        if old not in text:
            raise RuntimeError(f"pint {pint.__version__} no longer defines {old.strip()!r}; "
                               "update hapflow.units")
        text = text.replace(old, new)
    folder = cache_dir() / f"pint-{pint.__version__}"
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in (("default_en.txt", text),
                          ("constants_en.txt", (source / "constants_en.txt").read_text("utf-8"))):
        path = folder / name
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            write_whole(path, content)                          # other processes may read it
    return pint.UnitRegistry(str(folder / "default_en.txt"))


@lru_cache(maxsize=1)
def _pint_version() -> str:
    return version("pint")
