"""Custom analog scales: a polynomial or a table from the card's volts to the port's unit.

A VeriStand or NI-DAQmx user calibrates a nonlinear sensor with a custom scale: a
polynomial (``DAQmxCreatePolynomialScale``, forward coefficients from volts) or a
table (``DAQmxCreateTableScale``, prescaled volts to scaled values, linear between
points).  hapflow does not give NI-DAQmx the scale: its channels stay in volts,
so the recording keeps what the card measured (``/hil/card/ai_volts``, the raw
volts every recording holds) and the scaled value (the port's signal), and a
recording can be rescaled later with a corrected calibration.  The scale is
applied by the real-time loop right after the read, as the linear ``scale`` and
``offset`` are::

    hardware:
      head:
        force: {channel: Dev1/ai0, polynomial: [0.02, 9.8, 0.15]}       # N = c0 + c1 V + c2 V^2
        accel: {channel: Dev1/ai1, table: {volts: [-10, 0, 10],
                                           values: [-310, 0, 290]}}     # m/s^2, linear between

Checked at load: finite numbers; a polynomial of 2 to 8 coefficients; a table of 2 to
256 points with strictly increasing volts that span the channel's ``range`` (no reading
falls outside it, so nothing is extrapolated); and the scale strictly monotonic over
the range (so a limit in the port's unit is one interval of volts, tare is well defined
and the simulated card can invert it).  A tare adds its offset after the scale (the
value at the tare's mean volts reads 0).

On an analog output the scale is the actuator's: the command the volts produce (an
amplifier's force per volt, calibrated).  The loop writes the volts at which the scale
reads the command: its inverse, exact for a table (linear between the same points), for
a polynomial through :data:`INVERSE_POINTS` points over the range (NI-DAQmx asks for
reverse coefficients instead, fitted by ``DAQmxCalculateReversePolyCoeff``); the limit,
the clipping to what the card can put out and the recorded command stay in the port's
unit, the recorded ``ao_volts`` in volts.

The simulated card (:mod:`hapflow.hil.simrig`) applies the same scales the other way:
an input's inverse turns the plant's value into volts, an output's scale turns the
volts into the actuator's command.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from numba import njit

KINDS = ("polynomial", "table")
"""The binding keys of the custom scales."""
MAX_COEFFS = 8
MAX_POINTS = 256
INVERSE_POINTS = 4097
"""Points of a polynomial's tabulated inverse in the simulated card (5 mV apart on +-10 V)."""


@dataclass(frozen=True)
class Scale:
    """A custom scale from volts to the port's unit.

    Attributes
    ----------
    kind : {'polynomial', 'table'}
    coeffs : tuple of float
        Polynomial: ``value = sum(coeffs[i] * volts**i)`` (NI-DAQmx's forward coefficients).
    volts, values : tuple of float
        Table: strictly increasing volts and their values, linear in between.
    """

    kind: str
    coeffs: tuple[float, ...] = ()
    volts: tuple[float, ...] = ()
    values: tuple[float, ...] = ()

    def __call__(self, volts: Any) -> Any:
        """The value at ``volts`` (a number or an array)."""
        if self.kind == "polynomial":
            return np.polynomial.polynomial.polyval(volts, self.coeffs)
        return np.interp(volts, self.volts, self.values)

    def inverse(self, value: float, low: float, high: float) -> float:
        """The volts in ``[low, high]`` at which the scale reads ``value`` (clamped)."""
        volts = (np.union1d(np.linspace(low, high, INVERSE_POINTS), self.volts)
                 if self.kind == "table" else np.linspace(low, high, INVERSE_POINTS))
        values = self(volts)
        order = np.argsort(values)
        return float(np.interp(value, values[order], volts[order]))

    def describe(self) -> str:
        """``polynomial [c0, c1, ...]`` or ``table of N points``, for logs and listings."""
        if self.kind == "polynomial":
            return "polynomial [" + ", ".join(f"{c:g}" for c in self.coeffs) + "]"
        return f"table of {len(self.volts)} points"


def parse(kind: str, spec: Any, low: float, high: float) -> Scale:
    """The custom scale of a binding's ``polynomial`` or ``table`` key, checked against the
    channel's range ``[low, high]`` V.

    Raises
    ------
    ValueError
        Saying what is wrong and what would be valid.
    """
    if kind == "polynomial":
        coeffs = _numbers(spec, "polynomial", "[c0, c1, ...] (value = c0 + c1 V + c2 V^2 ...)")
        if not 2 <= len(coeffs) <= MAX_COEFFS or coeffs[-1] == 0:
            raise ValueError(f"polynomial needs 2 to {MAX_COEFFS} coefficients [c0, c1, ...], the "
                             f"last nonzero; got {len(coeffs)}")
        scale = Scale("polynomial", coeffs=coeffs)
    else:
        form = "{volts: [v0, v1, ...], values: [y0, y1, ...]} (linear in between)"
        if not isinstance(spec, dict) or set(spec) != {"volts", "values"}:
            raise ValueError(f"table must be {form}; got {spec!r}")
        volts = _numbers(spec["volts"], "table volts", form)
        values = _numbers(spec["values"], "table values", form)
        if len(volts) != len(values) or not 2 <= len(volts) <= MAX_POINTS:
            raise ValueError(f"table needs 2 to {MAX_POINTS} points, as many volts as values; got "
                             f"{len(volts)} volts and {len(values)} values")
        if any(b <= a for a, b in zip(volts, volts[1:])):
            raise ValueError(f"table volts must increase strictly; got {list(volts)}")
        if volts[0] > low or volts[-1] < high:
            raise ValueError(f"table volts [{volts[0]:g} .. {volts[-1]:g}] must span the "
                             f"channel's range [{low:g}, {high:g}] V (nothing is extrapolated); "
                             "add end points or narrow 'range'")
        scale = Scale("table", volts=volts, values=values)
    grid = np.linspace(low, high, INVERSE_POINTS)
    if scale.kind == "table":
        grid = np.union1d(grid, [v for v in scale.volts if low <= v <= high])
    signs = np.sign(np.diff(scale(grid)))
    if not (np.all(signs > 0) or np.all(signs < 0)):
        turns = np.nonzero(signs[1:] != signs[:-1])[0]
        bad = grid[turns[0] + 1] if turns.size else grid[0]
        raise ValueError(f"{scale.describe()} is not strictly monotonic over the range "
                         f"[{low:g}, {high:g}] V (it turns near {bad:.4g} V): a value would "
                         "stand for two voltages; narrow 'range' or fix the calibration")
    return scale


def _numbers(value: Any, what: str, form: str) -> tuple[float, ...]:
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in value):
        raise ValueError(f"{what} must be a list of finite numbers, {form}; got {value!r}")
    return tuple(float(v) for v in value)


class ScaleArrays:
    """The custom scales of a list of channels as padded arrays for compiled code.

    Parameters
    ----------
    scales : sequence of Scale or None
        One per channel (None: a linear channel, left alone).
    low, high : sequence of float
        The channels' ranges in V (for a polynomial's tabulated inverse).
    """

    def __init__(self, scales: Sequence[Scale | None], low: Sequence[float],
                 high: Sequence[float]):
        n = len(scales)
        self.index = np.array([k for k, s in enumerate(scales) if s is not None], dtype=np.int64)
        self.kind = np.zeros(n, dtype=np.int64)           # 0 linear, 1 polynomial, 2 table
        self.coeffs = np.zeros((n, MAX_COEFFS))
        self.ncoeffs = np.zeros(n, dtype=np.int64)
        width = max([INVERSE_POINTS] + [len(s.volts) for s in scales if s is not None])
        self.volts = np.zeros((n, width))
        self.values = np.zeros((n, width))
        self.npoints = np.zeros(n, dtype=np.int64)
        for k, s in enumerate(scales):
            if s is None:
                continue
            self.kind[k] = KINDS.index(s.kind) + 1
            self.coeffs[k, :len(s.coeffs)] = s.coeffs
            self.ncoeffs[k] = len(s.coeffs)
            volts = (np.array(s.volts) if s.kind == "table" else
                     np.linspace(low[k], high[k], INVERSE_POINTS))
            values = s(volts)
            order = np.argsort(values)                    # ascending values, for the inverse
            m = volts.size
            self.volts[k, :m], self.values[k, :m], self.npoints[k] = volts[order], values[order], m

    @property
    def any(self) -> bool:
        """Whether any channel has a custom scale."""
        return self.index.size > 0

    def forward(self):
        """The arguments of :func:`add_scaled` after ``volts``."""
        return (self.index, self.kind, self.coeffs, self.ncoeffs, self.volts, self.values,
                self.npoints)

    def inverse(self):
        """The arguments of :func:`volts_of` after ``value`` and ``k``."""
        return self.kind, self.volts, self.values, self.npoints


@njit(cache=True)
def scaled(k, v, kind, coeffs, ncoeffs, volts, values, npoints):
    """Channel ``k``'s custom scale at ``v`` volts (a polynomial exactly, by Horner)."""
    if kind[k] == 1:
        y = 0.0
        for i in range(ncoeffs[k] - 1, -1, -1):
            y = y * v + coeffs[k, i]
        return y
    n = npoints[k]                  # a table: its points sorted by value; volts increase
    xs, ys = volts[k, :n], values[k, :n]
    if xs[0] > xs[n - 1]:
        xs, ys = xs[::-1], ys[::-1]
    return np.interp(v, xs, ys)


@njit(cache=True)
def add_scaled(volts, index, kind, coeffs, ncoeffs, tvolts, tvalues, npoints, slot, values, f):
    """``values[k] += scale_k(volts[k])`` for the custom-scaled channels ``index`` (their
    linear part is 0, so ``values`` held their offset) and into ``f[slot[k]]``."""
    for i in range(index.size):
        k = index[i]
        values[k] += scaled(k, volts[k], kind, coeffs, ncoeffs, tvolts, tvalues, npoints)
        f[slot[k]] = values[k]


@njit(cache=True)
def volts_of(value, k, kind, volts, values, npoints):
    """The volts at which channel ``k``'s custom scale reads ``value`` (its inverse, from
    the table sorted by value)."""
    n = npoints[k]
    return np.interp(value, values[k, :n], volts[k, :n])
