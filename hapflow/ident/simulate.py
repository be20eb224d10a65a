"""Free-run simulation of an impedance model driven by force (admittance).

The model gives force from motion, ``F = m(x) a + b(x) v + k(x) x + F0(x)``
per direction, blended by velocity (:mod:`hapflow.blocks.impedance_model`).  Driven by
a force it is an ODE in ``(x, v)``: since the blended force is affine in
``a``, the acceleration is ::

    a = (F - F(x, v, 0)) / (F(x, v, 1) - F(x, v, 0))

with ``F(x, v, a)`` the model's own kernel and the denominator its mass at
``(x, v)``, so the same kernel serves impedance and admittance and no
parameter is read twice.  A model whose mass is not positive somewhere in its
range cannot be integrated and is rejected (:func:`check_mass`).

:func:`simulate` integrates with classical RK4 on a grid ``substeps`` times
finer than the samples; the force between samples is interpolated
band-limited (``scipy.signal.resample_poly``, a Kaiser-windowed sinc), since
a linear interpolation of content at a quarter of the sample rate is off by
tens of per cent.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from hapflow.blocks.impedance_model import ImpedanceModel, admittance_accel, nonpositive_mass

from .errors import IdentError


@njit(cache=True)
def _rk4(table, fh, h, x0, v0, every, x_out, v_out):
    """RK4 over force samples at half steps ``fh`` (``fh[2 i]`` at step i); record every ``every``."""
    x = x0
    v = v0
    steps = (fh.shape[0] - 1) // 2
    for i in range(steps + 1):
        if i % every == 0:
            x_out[i // every] = x
            v_out[i // every] = v
        if i == steps:
            break
        f0 = fh[2 * i]
        f1 = fh[2 * i + 1]
        f2 = fh[2 * i + 2]
        a1 = admittance_accel(table, x, v, f0)
        v2 = v + 0.5 * h * a1
        a2 = admittance_accel(table, x + 0.5 * h * v, v2, f1)
        v3 = v + 0.5 * h * a2
        a3 = admittance_accel(table, x + 0.5 * h * v2, v3, f1)
        v4 = v + h * a3
        a4 = admittance_accel(table, x + h * v3, v4, f2)
        x += h / 6.0 * (v + 2.0 * v2 + 2.0 * v3 + v4)
        v += h / 6.0 * (a1 + 2.0 * a2 + 2.0 * a3 + a4)


def check_mass(model: ImpedanceModel) -> None:
    """Raise if the mass of either direction is not positive at some knot.

    Raises
    ------
    IdentError
        Naming the direction and the position range (mm) where ``m <= 0``.
    """
    reason = nonpositive_mass(model)
    if reason is not None:
        raise IdentError(reason)


def simulate(model: ImpedanceModel, force: np.ndarray, rate: float, x0: float, v0: float,
             substeps: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Position and velocity of the model driven by a sampled force, from ``(x0, v0)``.

    Parameters
    ----------
    model : ImpedanceModel
        Its mass must be positive everywhere (:func:`check_mass`).
    force : ndarray
        Force samples, N, at ``rate`` Hz.
    rate : float
        Sample rate, Hz.
    x0, v0 : float
        Position (m) and velocity (m/s) at the first sample.
    substeps : int
        RK4 steps per sample.

    Returns
    -------
    x, v : ndarray
        At the force's sample times.
    """
    from scipy.signal import resample_poly
    check_mass(model)
    force = np.ascontiguousarray(force, dtype=np.float64).reshape(-1)
    if force.size < 2:
        raise IdentError("simulation needs at least two force samples")
    if not np.all(np.isfinite(force)):
        raise IdentError("the force to simulate from has NaN or infinite values")
    n = force.size
    fine = resample_poly(force, 2 * substeps, 1, padtype="line")[:2 * substeps * (n - 1) + 1]
    x = np.empty(n)
    v = np.empty(n)
    try:
        _rk4(model.table(), np.ascontiguousarray(fine), 1.0 / (rate * substeps), float(x0),
             float(v0), substeps, x, v)
    except ZeroDivisionError:       # a NaN velocity blends to no direction: zero mass
        x[:] = np.nan
    if not np.all(np.isfinite(x)):
        raise IdentError("the model's free run from this force diverged (its position left the "
                         "finite range): the model is unstable or too stiff for "
                         f"{substeps} integration steps per sample")
    return x, v

