"""Hunt-Crossley contact identification from paddle motion and contact force (seed 001).

A ball bounces on a paddle whose motion ``y_p(t)`` is measured, with a
force sensor under the paddle; the ball itself is not observed.  During a
contact the force is Hunt & Crossley's ``F = p^n (k + b p')`` with the
penetration ``p = y_p - y``.  The ball's motion follows from the measured
force: from touch-down at ``t_T`` with velocity ``v_T``::

    y(t) = y_p(t_T) + v_T (t - t_T) - g (t - t_T)^2 / 2 + (1/m) int int F_measured

so each contact adds two unknowns ``(t_T, v_T)`` and the model predicts
the force samples from ``(k, b)``.  All contacts are fitted together
(``scipy.optimize.least_squares`` over the touch-downs, ``k`` and ``b`` by
linear least squares inside) on the samples of each contact plus a few on
either side, where the model must give zero.  The double integral of the
measured force averages its noise, so the fit differentiates nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from .errors import IdentError


@dataclass
class ContactFit:
    """Identified Hunt-Crossley parameters.

    Attributes
    ----------
    k : float
        Stiffness, N/m^n.
    b : float
        Damping, N s/m^(n+1).
    exponent : float
        The shape exponent n used (given, not fitted).
    contacts : int
        Contacts used.
    rms : float
        RMS force residual, N.
    touchdowns : ndarray
        Fitted touch-down times, s.
    """

    k: float
    b: float
    exponent: float
    contacts: int
    rms: float
    touchdowns: np.ndarray


def contact_windows(force: np.ndarray, threshold: float, pad: int) -> list[slice]:
    """Sample ranges of the contacts (force above ``threshold``), ``pad`` samples wider."""
    on = np.flatnonzero(force > threshold)
    if on.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(on) > 2 * pad + 1)
    starts = np.concatenate([[on[0]], on[breaks + 1]])
    ends = np.concatenate([on[breaks], [on[-1]]])
    return [slice(max(s - pad, 0), min(e + pad + 1, force.size)) for s, e in zip(starts, ends)]


def _ball(t, y_p0, t_td, v_td, accel, gravity):
    """Ball height (m) and velocity (m/s) at the samples ``t`` around a touch-down.

    Ballistic through ``(t_td, y_p0, v_td)``, plus the double integral of the
    measured contact acceleration ``accel`` (force / m) from the first sample
    at or after ``t_td`` (trapezoidal on the sample grid; before touch-down
    the force is zero).
    """
    a = np.where(t >= t_td, accel, 0.0)
    dt = np.diff(t)
    v_forced = np.concatenate([[0.0], np.cumsum(0.5 * (a[1:] + a[:-1]) * dt)])
    y_forced = np.concatenate([[0.0], np.cumsum(0.5 * (v_forced[1:] + v_forced[:-1]) * dt)])
    tau = t - t_td
    return (y_p0 + v_td * tau - 0.5 * gravity * tau * tau + y_forced,
            v_td - gravity * tau + v_forced)


def fit_hunt_crossley(time: np.ndarray, paddle_pos: np.ndarray, paddle_vel: np.ndarray,
                      force: np.ndarray, mass: float, exponent: float = 1.5,
                      gravity: float = 9.81, threshold: float | None = None,
                      pad: int = 3) -> ContactFit:
    """Fit Hunt-Crossley ``k`` and ``b`` to the contacts in a recording.

    Touch-down velocities start from the flights: between the end of one
    contact and the start of the next the ball is ballistic between two
    known paddle positions, so ``v_T = (y_p(t_T) - y_p(t_L)) / tau - g tau / 2``;
    the first contact (no flight before it) is not used.  For given
    ``(t_T, v_T)`` of every contact, ``k`` and ``b`` follow by linear least
    squares (``F = p^n k + p^n p' b``); the outer nonlinear fit adjusts the
    touch-downs (variable projection).

    Parameters
    ----------
    time : ndarray
        Sample times, s (uniform).
    paddle_pos, paddle_vel : ndarray
        Measured paddle position (m) and velocity (m/s).
    force : ndarray
        Measured contact force on the paddle, N (down positive: the ball pushes).
    mass : float
        Ball mass, kg.
    exponent : float
        Hunt-Crossley shape exponent n (1.5 for a sphere).
    gravity : float
        m/s^2.
    threshold : float, optional
        Force above which a sample is in contact (default: 5 standard
        deviations of the force noise, estimated from the negative readings,
        which only noise produces).
    pad : int
        Samples of zero force kept on either side of each contact.

    Raises
    ------
    IdentError
        If there are fewer than three contacts or the fit does not converge.
    """
    force = np.asarray(force, dtype=float)
    if threshold is None:
        negative = force[force < 0.0]
        sigma = float(np.sqrt(np.mean(negative ** 2))) if negative.size else 0.0
        threshold = max(5.0 * sigma, 1e-9 * float(np.max(np.abs(force))))
    windows = [w for w in contact_windows(force, threshold, pad)
               if np.count_nonzero(force[w] > threshold) >= 3]
    if len(windows) < 3:
        raise IdentError(f"found {len(windows)} contact(s) above {threshold:.3g} N; need at least 3 "
                         "(a longer recording, or a lower 'threshold')")
    accel = force / mass
    edges = [(w.start + np.argmax(force[w] > threshold),
              w.stop - 1 - np.argmax(force[w][::-1] > threshold)) for w in windows]
    guesses = []
    for (_, off), (on, _) in zip(edges[:-1], edges[1:]):
        t_l, t_t = time[off + 1], time[on - 1]          # zero force just outside each contact
        tau = t_t - t_l
        guesses += [t_t, (paddle_pos[on - 1] - paddle_pos[off + 1]) / tau - 0.5 * gravity * tau]
    windows = windows[1:]

    def model_rows(z):
        """Per window: (regressor columns p^n, p^n p', in-contact mask)."""
        rows = []
        for j, w in enumerate(windows):
            t_td, v_td = z[2 * j], z[2 * j + 1]
            y, v = _ball(time[w], np.interp(t_td, time, paddle_pos), t_td, v_td, accel[w], gravity)
            pen, rate = paddle_pos[w] - y, paddle_vel[w] - v
            reach = np.where(pen > 0.0, np.abs(pen) ** exponent, 0.0)
            rows.append((reach, reach * rate))
        return rows

    def stiffness_damping(rows):
        a = np.vstack([np.column_stack(r) for r in rows])
        f = np.concatenate([force[w] for w in windows])
        return np.linalg.lstsq(a, f, rcond=None)[0]

    peak = max(float(force[w].max()) for w in windows)

    def residuals(z):
        rows = model_rows(z)
        k, b = stiffness_damping(rows)
        model = np.concatenate([np.maximum(r0 * k + r1 * b, 0.0) for r0, r1 in rows])
        return (model - np.concatenate([force[w] for w in windows])) / peak

    z0 = np.array(guesses)
    fit = least_squares(residuals, z0, x_scale=np.tile([1e-4, 1e-2], len(windows)),
                        xtol=1e-12, ftol=1e-12, max_nfev=400)
    if not fit.success:
        raise IdentError(f"Hunt-Crossley fit did not converge: {fit.message}")
    k, b = stiffness_damping(model_rows(fit.x))
    rms = float(np.sqrt(np.mean(fit.fun ** 2)) * peak)
    return ContactFit(float(k), float(b), exponent, len(windows), rms, fit.x[0::2].copy())
