"""Exponentially weighted recursive least squares (Colton & Hollerbach 2005).

Run over the samples of one direction sorted by position, EWLS gives
parameters that vary with position (seed 002, table 1)::

    g     = P phi
    L     = g / (lambda + phi^T g)
    e     = y - phi^T theta                    (a-priori error)
    theta = theta + L e
    P     = (P - L g^T) / lambda

``phi = [a v x 1] / scales`` (any subset of the regressors, each divided by
a fixed scale so that ``P`` is well balanced; the reported parameters are
``theta_j / scale_j``), ``y = F``, forgetting factor ``lambda`` (0.999 in
the paper: an exponential window of about ``1 / (1 - lambda) = 1000``
samples), ``P(0) = p0 I`` and ``theta(0) = 0``.

Covariance wind-up guard: when ``trace(P - L g^T)`` already exceeds
``n p0`` (the initial trace) the division by ``lambda`` is skipped for that
step, so ``P`` cannot grow without bound while the data does not excite a
direction (a probe at rest, a constant regressor).  With exciting data the
guard never acts and the update is exactly the paper's.

The update is **one** ``@njit`` function, :func:`hapflow.blocks.ewls.ewls_step`,
acting in place on a flat state vector (its layout is in :mod:`hapflow.blocks.ewls`);
the offline path (:func:`run`, :func:`fit_ewls`) and the online block
``hapflow.blocks.EWLS`` both call it, so they give the same numbers bit for bit.

Choosing ``lambda``: over position-sorted data the window is
``1 / (1 - lambda)`` samples, i.e. ``1 / ((1 - lambda) density)`` metres,
so the same ``lambda`` resolves finer features in denser data (seed 002:
90 s at 4 kHz over 50 mm, ~3600 samples/mm per direction, so 0.999 is a
~0.3 mm window).  Because the stiffness is the slope of a local linear fit,
far samples have a long lever arm: after a step in ``k`` the estimate
needs several windows to settle (about 8 windows to within 1 %), so keep
the window well below the features of interest; ``window=`` (metres) sets
``lambda`` from the data density.

Grid values (:func:`fit_ewls`): for each grid point ``g`` (multiples of
``grid``, 1 mm by default, inside the data's range) the reported parameters
are the estimate **right after the last sample with x <= g** in the
ascending pass, i.e. "the estimate after passing the grid point".  Its
exponential window lies behind ``g`` (a lag of about half a window in
position).  ``two_sided=True`` also runs a descending pass, takes its
estimate after the last sample with ``x >= g``, and combines the two by
their information matrices, ``theta = (P_f^-1 + P_b^-1)^-1 (P_f^-1 theta_f +
P_b^-1 theta_b)``: a window centred on ``g`` without lag.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from hapflow.blocks.ewls import ewls_parameter, ewls_step, initial_state, state_size

from .errors import IdentError
from .prep import Group
from .segmented import REGRESSORS, design


@njit(cache=True)
def _run(s, n, phi, y, lam, p0, scales, marks, theta_out, p_out):
    """Feed rows in order; snapshot theta (SI) and P (scaled) after each row in ``marks``."""
    nm = marks.shape[0]
    k = 0
    iphi = n + n * n
    for r in range(phi.shape[0]):
        for j in range(n):
            s[iphi + j] = phi[r, j]
        ewls_step(s, n, y[r], lam, p0, scales, 0)
        while k < nm and marks[k] == r:
            for j in range(n):
                theta_out[k, j] = ewls_parameter(s, j, scales, 0)
            for q in range(n * n):
                p_out[k, q] = s[n + q]
            k += 1


def check_settings(forgetting: float, p0: float) -> None:
    """Raise :class:`IdentError` for a forgetting factor outside (0, 1] or p0 <= 0."""
    if not (isinstance(forgetting, (int, float)) and 0.0 < forgetting <= 1.0):
        raise IdentError(f"forgetting factor must be in (0, 1], got {forgetting!r} "
                         "(0.999 keeps a window of about 1000 samples)")
    if not (isinstance(p0, (int, float)) and p0 > 0 and math.isfinite(p0)):
        raise IdentError(f"initial covariance p0 must be a positive number, got {p0!r}")


def run(phi: np.ndarray, y: np.ndarray, forgetting: float = 0.999, p0: float = 1e6,
        scales: np.ndarray | None = None, marks: np.ndarray | None = None,
        state: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run EWLS over rows in the given order.

    Parameters
    ----------
    phi : ndarray (N, n)
        Raw regressors.
    y : ndarray (N,)
        Force, N.
    forgetting, p0 : float
        Forgetting factor and initial covariance.
    scales : ndarray (n,), optional
        Regressor scales (default ones).
    marks : ndarray of int, optional
        Row indices (non-decreasing) after which to snapshot (default: the last row).
    state : ndarray, optional
        Initial state (default :func:`initial_state`); updated in place.

    Returns
    -------
    theta : ndarray (len(marks), n)
        Parameters in SI units after each mark.
    P : ndarray (len(marks), n, n)
        Covariance (scaled coordinates) after each mark.
    state : ndarray
        Final state.
    """
    check_settings(forgetting, p0)
    phi = np.ascontiguousarray(phi, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    N, n = phi.shape
    scales = np.ones(n) if scales is None else np.ascontiguousarray(scales, dtype=np.float64)
    marks = np.array([N - 1]) if marks is None else np.ascontiguousarray(marks, dtype=np.int64)
    s = initial_state(n, p0) if state is None else state
    theta = np.zeros((marks.size, n))
    P = np.zeros((marks.size, n * n))
    _run(s, n, phi, y, float(forgetting), float(p0), scales, marks, theta, P)
    return theta, P.reshape(-1, n, n), s


def default_scales(phi: np.ndarray) -> np.ndarray:
    """Largest |value| of each regressor column (1 for an all-zero column)."""
    s = np.max(np.abs(phi), axis=0)
    s[s == 0.0] = 1.0
    return s


@dataclass
class GridFit:
    """EWLS parameters of one direction on a position grid.

    Attributes
    ----------
    direction : int
    x : ndarray (G,)
        Grid positions, m.
    theta : ndarray (G, 4)
        ``m, b, k, F0`` at the grid points (0 for dropped regressors).
    regressors : tuple of str
    scales : ndarray
        Regressor scales used.
    """

    direction: int
    x: np.ndarray
    theta: np.ndarray
    regressors: tuple[str, ...]
    scales: np.ndarray
    info: dict = field(default_factory=dict)


def grid_points(lo: float, hi: float, spacing: float) -> np.ndarray:
    """Multiples of ``spacing`` in ``[lo, hi]`` (at least the two ends if none fall inside)."""
    if spacing <= 0:
        raise IdentError(f"grid spacing must be > 0 m, got {spacing!r}")
    k0, k1 = math.ceil(lo / spacing - 1e-9), math.floor(hi / spacing + 1e-9)
    if k1 - k0 + 1 < 2:
        return np.array([lo, hi]) if hi > lo else np.array([lo])
    return np.arange(k0, k1 + 1) * spacing


def forgetting_for_window(group: Group, window: float) -> float:
    """Forgetting factor whose window ``1 / (1 - lambda)`` holds the samples of ``window`` metres.

    ``lambda = 1 - 1 / (density window)`` with ``density`` the group's mean
    number of samples per metre (at least 2 samples in the window).
    """
    if not window > 0:
        raise IdentError(f"EWLS window must be > 0 m, got {window!r}")
    span = float(group.x[-1] - group.x[0])
    if span <= 0:
        raise IdentError("all samples of one direction are at the same position")
    per_window = max(2.0, len(group) / span * window)
    return 1.0 - 1.0 / per_window


def fit_ewls(group: Group, regressors: tuple[str, ...] = REGRESSORS, forgetting: float = 0.999,
             p0: float = 1e6, grid: float = 1e-3, two_sided: bool = False,
             scales: np.ndarray | None = None, window: float | None = None) -> GridFit:
    """EWLS over one position-sorted direction group, sampled on a grid.

    Parameters
    ----------
    group : Group
        Direction-grouped, position-sorted samples.
    regressors : tuple of str
        Subset of ``('a', 'v', 'x', '1')``.
    forgetting, p0 : float
        Forgetting factor and initial covariance (scaled units: N^2).
    grid : float
        Grid spacing, m.
    two_sided : bool
        Combine an ascending and a descending pass (see the module docstring).
    scales : ndarray, optional
        Regressor scales (default :func:`default_scales`).
    window : float, optional
        Exponential window in metres; replaces ``forgetting`` by
        :func:`forgetting_for_window` (the same position resolution whatever
        the data density).

    Returns
    -------
    GridFit
    """
    n = len(regressors)
    if window is not None:
        forgetting = forgetting_for_window(group, window)
    if len(group) < n + 1:
        raise IdentError(f"direction {group.direction:+d} has only {len(group)} samples")
    phi = design(group, regressors)
    scales = default_scales(phi) if scales is None else np.asarray(scales, dtype=np.float64)
    x = group.x
    g = grid_points(float(x[0]), float(x[-1]), grid)
    marks = np.searchsorted(x, g, side="right") - 1
    theta_f, P_f, _ = run(phi, group.force, forgetting, p0, scales, marks)
    theta = theta_f
    if two_sided:
        rev = slice(None, None, -1)
        # descending pass: after the last sample with x >= g
        first_ge = np.searchsorted(x, g, side="left")
        marks_b = (x.size - 1 - first_ge)[::-1]
        theta_b, P_b, _ = run(phi[rev], group.force[rev], forgetting, p0, scales, marks_b)
        theta_b, P_b = theta_b[::-1], P_b[::-1]
        theta = np.empty_like(theta_f)
        for k in range(g.size):
            If = np.linalg.inv(P_f[k])
            Ib = np.linalg.inv(P_b[k])
            ts = np.linalg.solve(If + Ib, If @ (theta_f[k] * scales) + Ib @ (theta_b[k] * scales))
            theta[k] = ts / scales
    full = np.zeros((g.size, 4))
    for j, r in enumerate(regressors):
        full[:, REGRESSORS.index(r)] = theta[:, j]
    return GridFit(group.direction, g, full, tuple(regressors), scales,
                   {"forgetting": forgetting, "p0": p0, "grid": grid, "two_sided": two_sided,
                    "window": window})
