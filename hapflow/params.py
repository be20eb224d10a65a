"""Parameter declarations: live (in the parameter array) or structural (baked in).

Every parameter has a unit, a default where one makes sense, and a check
that runs at build time.  A check is a callable ``check(value) -> str | None``
returning an error text ("must be > 0") or ``None``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

REQUIRED = object()
"""Marker default: the parameter must be given."""

Check = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class Param:
    """A block parameter.

    Parameters
    ----------
    default : object
        Value used when none is given; :data:`REQUIRED` if it must be given.
    unit : str
        SI unit (``""`` for dimensionless).
    check : callable, optional
        Build-time validation returning an error text or ``None``.
    doc : str
        One line for the block reference.
    kind : {'float', 'int', 'str', 'floats', 'bool', 'file'}
        Value type; ``floats`` is a 1-D sequence of numbers; ``file`` is the path
        of a file the block reads while it is built (a string; in a graph file,
        a relative path is relative to the graph file's folder).
    """

    default: Any = REQUIRED
    unit: str = ""
    check: Check | None = None
    doc: str = ""
    kind: str = "float"
    live: bool = field(default=False, init=False)

    @property
    def required(self) -> bool:
        """True if the parameter has no default."""
        return self.default is REQUIRED

    def coerce(self, value: Any) -> Any:
        """Convert ``value`` to the declared kind and run the check.

        Raises
        ------
        ValueError
            With a message saying what would be valid.
        """
        if value is None and self.default is None:
            return None
        converted = _CONVERT[self.kind](value)
        if self.check is not None:
            problem = self.check(converted)
            if problem:
                raise ValueError(f"{problem} (got {value!r})")
        return converted


@dataclass(frozen=True)
class Live(Param):
    """A parameter stored in the parameter array, changeable without recompiling."""

    live: bool = field(default=True, init=False)


@dataclass(frozen=True)
class Structural(Param):
    """A parameter baked into the generated code (sizes, orders, modes)."""


MAX_MAGNITUDE = 1e30
"""Largest magnitude of a number parameter: no physical quantity of a rig comes near it,
and 1e300 overflowed the state to inf on the first tick instead of failing at load."""


def _finite(x: float) -> float:
    if not math.isfinite(x) or abs(x) > MAX_MAGNITUDE:
        raise ValueError(f"must be a finite number of magnitude at most {MAX_MAGNITUDE:g} "
                         f"(got {x!r})")
    return x


def _to_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"must be a number (got {value!r})")
    return _finite(float(value))


def _to_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"must be an integer (got {value!r})")
    return int(value)


def _to_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string (got {value!r})")
    return value


def _to_bool(value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"must be true or false (got {value!r})")
    return bool(value)


def _to_floats(value: Any) -> tuple[float, ...]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"must be a non-empty list of numbers (got {value!r})")
    return tuple(_to_float(v) for v in value)


_CONVERT = {"float": _to_float, "int": _to_int, "str": _to_str,
            "floats": _to_floats, "bool": _to_bool, "file": _to_str}


def positive(x: Any) -> str | None:
    """Check: every value > 0."""
    return None if np.all(np.asarray(x) > 0) else "must be > 0"


def nonnegative(x: Any) -> str | None:
    """Check: every value >= 0."""
    return None if np.all(np.asarray(x) >= 0) else "must be >= 0"


def between(lo: float, hi: float) -> Check:
    """Check factory: ``lo <= value <= hi``."""
    def check(x: Any) -> str | None:
        arr = np.asarray(x)
        return None if np.all((arr >= lo) & (arr <= hi)) else f"must be between {lo} and {hi}"
    return check


def one_of(*choices: Any) -> Check:
    """Check factory: value is one of ``choices``."""
    def check(x: Any) -> str | None:
        return None if x in choices else "must be one of " + ", ".join(repr(c) for c in choices)
    return check


def at_least(n: float) -> Check:
    """Check factory: every value >= ``n``."""
    def check(x: Any) -> str | None:
        return None if np.all(np.asarray(x) >= n) else f"must be >= {n}"
    return check
