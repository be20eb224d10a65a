"""Process and measurement models of the nonlinear Kalman filters, registered by name.

A graph selects a model with the ``model`` parameter of
:class:`~hapflow.blocks.estimation.ExtendedKalmanFilter` or
:class:`~hapflow.blocks.estimation.UnscentedKalmanFilter`.  Each model is a
set of ``@njit_noalloc`` functions over flat arrays (no allocation), which the
filter steps bind directly (no dispatch at run time):

- ``f(s, so, out, oo, p, pc, u, dt, mode, w)``: the state ``s[so:so+n]`` one
  sample ``dt`` ahead into ``out[oo:oo+n]``, with the input ``u`` of the
  current sample, the model coefficients at ``p[pc:]`` and the values the
  model prepared for this sample at ``s[w:]``;
- optionally ``prepare(p, pc, u, s, w)``: up to :data:`PREPARED` values that
  depend on the input only, computed once per sample into ``s[w:]`` (a UKF
  propagates every sigma point with the same input);
- ``h(s, so, out, oo, p, pc)``: the predicted measurement into ``out[oo:]``,
  only for a model whose measurement is not its first ``m`` states; the
  others are ``z = H x`` with ``H`` the selection matrix, which the filters
  apply themselves (exactly: no sigma points, no finite differences);
- optionally ``fjac(s, so, p, pc, u, dt, mode, jac, jo, w)``: the analytic
  state Jacobian (row-major into ``jac[jo:]``); a model without it gets
  central finite differences;
- optionally ``mode(s, so, p, pc, previous) -> int``: a switching rule
  evaluated once per sample on the posterior mean (the hysteresis of the
  kinematic models near singular configurations).
- optionally ``noise(s, w, p, pc, u, cov, co)``: process noise that depends
  on the input, added to the prior covariance ``cov[co:]`` (n x n) after
  ``Q`` (the force observers' torque-model noise, which grows as the lever
  of the slider force vanishes).

:data:`MODELS` lists them with their sizes and coefficients, declared as
``(name, unit, default)`` tuples (``CRANK_COEFFS``, ...); the functions read
each coefficient by name through the offsets generated from them
(:func:`coefficient_offsets`: ``p[pc + CRANK.r]``), never by position.  The ``linear``
model (matrices ``A``, ``B``, ``H``) has no functions: the filters apply
its matrices themselves.  A model of one's own is a plain module with these
functions and its sizes: a graph names it by its import path (``model:
mylab.arm_model``), or :func:`register` adds it under a name.

Kinematic models (seed 004 chapter 2) take measured accelerations as the
input ``u`` and encoder angles as the measurement.  Their accelerations are
states: each step predicts position and speed with the previous
acceleration (``theta + dt omega + dt^2/2 alpha``, ``omega + dt alpha``),
solves the acceleration constraint at that prediction with the current
accelerometer sample for the new acceleration ``alpha_k``, and advances the
speed by the trapezoidal rule ``omega + dt (alpha + alpha_k) / 2`` - the
"kinematic equations with numerical derivative" scheme of its section
2.2.1.3, whose model noise on ``alpha`` is the random-walk term.

``slider_crank_kkf_walk`` is the kinematic observer with the accelerometer
as a measurement instead: the acceleration a random walk (section 2.2.1.1),
``z = [theta, xs' alpha + xs'' omega^2]``; ``slider_crank_kkf_jerk`` the same
one order up, ``[theta, omega, alpha, jerk]`` at constant jerk with the jerk
a random walk (a smoothly changing crank acceleration; its force stage is
``slider_crank_force_jerk``, the same force observer fed the four states).
They need no switching: the filter weights the accelerometer by the lever
``xs'`` itself, so near the dead centres the slider acceleration informs the
speed (through ``xs''``) and not the acceleration.  ``slider_crank_force_slope`` is the force
observer of eq. 3.5 with the slider force an integrated random walk
``[F, F']`` (it extrapolates through the dead centres, where the torque
carries no information about it, instead of holding it) and with the
torque-model noise raised by ``(M sa / xs')^2``: the kinematic acceleration
it is fed carries the slider-acceleration error ``sa`` over the lever, so
the torque is weighted by how well it observes the force.

The two-link arm has the three acceleration schemes of section 2.2.1:
``two_link_kkf_walk`` (2.2.1.1: positions and speeds one sample ahead by the
kinematic model at the previous state, the new accelerations the
constraint's there, the random walk their model noise),
``two_link_kkf_newmark`` (2.2.1.2: the same positions and speeds, the
accelerations by Newmark's numerical derivative of the positions, eq. 2.14
with ``beta`` > 0, or of the speeds, eq. 2.15 with ``gamma``; this makes them
``w alpha_c + (1 - w) alpha_prev`` with ``w = 1 / (2 beta)`` or ``1 / gamma``:
the random walk for ``w = 1``, an undamped oscillation at half the sample
rate for Newmark's usual ``gamma = 1/2``, ``beta = 1/4``) and
``two_link_kkf`` (2.2.1.3, the step described above).

The slider-crank KKF switches (seed 004 section 2.2.2) to a second model
near the dead centres, where the slider acceleration says little about the
crank acceleration.  The switching rule depends on position and speed, as
that section suggests (``Omega(z, z')``): mode 1 within ``band`` of a dead
centre (``|theta - phi|`` mod ``pi``; the seed's 0.08 rad) or wherever the
constraint solved for ``alpha`` amplifies a speed error faster than
``growth`` (:func:`~hapflow.blocks.multibody.crank_speed_growth`,
``-2 xs'' omega / xs'``, positive while the crank approaches a dead centre:
there the encoder cannot hold the speed error the accelerometer noise
drives, and it reaches the acceleration multiplied by that rate); back to
mode 0 beyond ``band + hysteresis`` once the rate is below ``growth``
(leaving a dead centre the rate is negative: errors decay).  In mode 1 the
acceleration is a random walk (held) and the accelerometer constrains the
speed instead: ``omega^2 = (u - xs' alpha) / xs''`` (``xs''`` does not
vanish at the dead centres), keeping the sign of the predicted speed.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

from hapflow.jit import njit_noalloc
from hapflow.names import offsets

from .multibody import (crank_geometry_problem, crank_position, crank_singularity,
                        crank_speed_growth, crank_terms)

PREPARED = 3
"""Entries of the filter state reserved for a model's per-sample prepared values."""


# ------------------------------------------------------------------ coefficients
Coeffs = tuple[tuple[str, str, float], ...]
"""A model's coefficients: ``(name, unit, default)`` each, packed in this order."""


def coefficient_offsets(title: str, coeffs: Coeffs) -> tuple:
    """A named tuple ``title`` with the offset of each coefficient of ``coeffs`` from the
    first: the model functions read ``p[pc + OFFSETS.name]`` (module constants, which numba
    folds into the compiled steps)."""
    return offsets(title, [(name, 1) for name, _, _ in coeffs])


PENDULUM_COEFFS: Coeffs = (("g", "m/s^2", 9.81), ("L", "m", 1.0), ("c", "1/s", 0.0))
CRANK_COEFFS: Coeffs = (("c", "m", 0.3), ("r", "m", 0.6), ("h", "m", 0.05))
CRANK_KKF_COEFFS: Coeffs = CRANK_COEFFS + (("band", "rad", 0.08), ("hysteresis", "rad", 0.02),
                                           ("growth", "1/s", 60.0))
CRANK_FORCE_COEFFS: Coeffs = CRANK_COEFFS + (("mc", "kg", 1.872), ("mr", "kg", 3.744),
                                             ("ms", "kg", 1.2), ("g", "m/s^2", 9.81))
CRANK_SLOPE_COEFFS: Coeffs = CRANK_FORCE_COEFFS + (("sa", "m/s^2", 0.5), ("lever", "m", 0.01))
TWO_LINK_COEFFS: Coeffs = (("L1", "m", 0.3), ("d1", "m", 0.2), ("d2", "m", 0.2))
TWO_LINK_NEWMARK_COEFFS: Coeffs = TWO_LINK_COEFFS + (("beta", "1", 0.0), ("gamma", "1", 0.6))

PENDULUM = coefficient_offsets("PendulumCoeffs", PENDULUM_COEFFS)
CRANK = coefficient_offsets("CrankCoeffs", CRANK_COEFFS)
CRANK_KKF = coefficient_offsets("CrankKkfCoeffs", CRANK_KKF_COEFFS)
CRANK_FORCE = coefficient_offsets("CrankForceCoeffs", CRANK_FORCE_COEFFS)
CRANK_SLOPE = coefficient_offsets("CrankSlopeCoeffs", CRANK_SLOPE_COEFFS)
TWO_LINK = coefficient_offsets("TwoLinkCoeffs", TWO_LINK_COEFFS)
TWO_LINK_NEWMARK = coefficient_offsets("TwoLinkNewmarkCoeffs", TWO_LINK_NEWMARK_COEFFS)
"""Offsets of each model's coefficients by name.  A model whose coefficients extend another's
(the slider-crank ones extend ``CRANK_COEFFS``, the force observers' with the lever weighting
extend ``CRANK_FORCE_COEFFS``) shares that one's offsets: functions common to several models
read through the shortest."""


# ------------------------------------------------------------------ pendulum
@njit_noalloc(forceinline=True)
def _pendulum_f(s, so, out, oo, p, pc, u, dt, mode, w):
    th, om = s[so], s[so + 1]
    out[oo] = th + dt * om
    out[oo + 1] = om + dt * (-p[pc + PENDULUM.g] / p[pc + PENDULUM.L] * math.sin(th)
                             - p[pc + PENDULUM.c] * om)


@njit_noalloc(forceinline=True)
def _pendulum_fjac(s, so, p, pc, u, dt, mode, jac, jo, w):
    jac[jo] = 1.0
    jac[jo + 1] = dt
    jac[jo + 2] = -dt * p[pc + PENDULUM.g] / p[pc + PENDULUM.L] * math.cos(s[so])
    jac[jo + 3] = 1.0 - dt * p[pc + PENDULUM.c]


# ------------------------------------------------------------------ kinematic predictor
@njit_noalloc(forceinline=True)
def _advance(s, so, out, oo, k, dt, alpha_new, j):
    """Coordinate ``j`` of a ``k``-dof ``[q, q', q'']`` state: trapezoidal speed, new
    acceleration ``alpha_new``."""
    q, v, a = s[so + j], s[so + k + j], s[so + 2 * k + j]
    out[oo + j] = q + dt * v + 0.5 * dt * dt * a
    out[oo + k + j] = v + 0.5 * dt * (a + alpha_new)
    out[oo + 2 * k + j] = alpha_new


# ------------------------------------------------------------------ slider-crank
@njit_noalloc(forceinline=True)
def _crank_kkf_f(s, so, out, oo, p, pc, u, dt, mode, w):
    th, om, al = s[so], s[so + 1], s[so + 2]
    thp = th + dt * om + 0.5 * dt * dt * al
    omp = om + dt * al
    # xs, xs', xs''
    kin = crank_position(thp, p[pc + CRANK.c], p[pc + CRANK.r], p[pc + CRANK.h])[4:]
    if mode == 1:
        # near a dead centre: acceleration a random walk; the slider acceleration
        # u = xs' alpha + xs'' omega^2 is then a constraint on the speed instead
        _advance(s, so, out, oo, 1, dt, al, 0)
        sq = (u[0] - kin[1] * al) / kin[2]
        if sq > 0.0:
            out[oo + 1] = math.copysign(math.sqrt(sq), omp)
        return
    _advance(s, so, out, oo, 1, dt, (u[0] - kin[2] * omp * omp) / kin[1], 0)


@njit_noalloc(forceinline=True)
def _crank_kkf_mode(s, so, p, pc, previous):
    """Switching rule ``Omega(theta, omega)``: 1 within ``band`` of a dead centre or where the
    kinematic model amplifies speed errors faster than ``growth``; back to 0 beyond
    ``band + hysteresis`` once the growth rate is below ``growth``."""
    c, r, h = p[pc + CRANK_KKF.c], p[pc + CRANK_KKF.r], p[pc + CRANK_KKF.h]
    dist = crank_singularity(s[so], c, r, h)
    fast = crank_speed_growth(s[so], s[so + 1], c, r, h) > p[pc + CRANK_KKF.growth]
    if fast or dist <= p[pc + CRANK_KKF.band]:
        return 1
    if previous == 1 and dist <= p[pc + CRANK_KKF.band] + p[pc + CRANK_KKF.hysteresis]:
        return 1
    return 0


@njit_noalloc(forceinline=True)
def _crank_terms(theta, p, pc):
    """:func:`~hapflow.blocks.multibody.crank_terms` at ``theta`` with the geometry and masses
    at ``p[pc:]`` (a model with ``CRANK_FORCE_COEFFS``)."""
    return crank_terms(theta, p[pc + CRANK_FORCE.c], p[pc + CRANK_FORCE.r], p[pc + CRANK_FORCE.h],
                       p[pc + CRANK_FORCE.mc], p[pc + CRANK_FORCE.mr], p[pc + CRANK_FORCE.ms],
                       p[pc + CRANK_FORCE.g])


@njit_noalloc(forceinline=True)
def _crank_force_prepare(p, pc, u, s, w):
    """Torque of the motion ``u`` without the force, the force's lever ``xs'`` and the
    inertia ``M``."""
    mass, cor, grav, dxs = _crank_terms(u[0], p, pc)
    s[w] = mass * u[2] + cor * u[1] * u[1] + grav
    s[w + 1] = dxs
    s[w + 2] = mass


@njit_noalloc(forceinline=True)
def _crank_force_f(s, so, out, oo, p, pc, u, dt, mode, w):
    out[oo] = s[w] - s[so + 1] * s[w + 1]
    out[oo + 1] = s[so + 1]


@njit_noalloc(forceinline=True)
def _crank_force_fjac(s, so, p, pc, u, dt, mode, jac, jo, w):
    jac[jo] = 0.0
    jac[jo + 1] = -s[w + 1]
    jac[jo + 2] = 0.0
    jac[jo + 3] = 1.0


@njit_noalloc(forceinline=True)
def _crank_slope_f(s, so, out, oo, p, pc, u, dt, mode, w):
    out[oo] = s[w] - s[so + 1] * s[w + 1]
    out[oo + 1] = s[so + 1] + dt * s[so + 2]
    out[oo + 2] = s[so + 2]


@njit_noalloc(forceinline=True)
def _crank_slope_fjac(s, so, p, pc, u, dt, mode, jac, jo, w):
    for i in range(9):
        jac[jo + i] = 0.0
    jac[jo + 1] = -s[w + 1]
    jac[jo + 4] = 1.0
    jac[jo + 5] = dt
    jac[jo + 8] = 1.0


@njit_noalloc(forceinline=True)
def _crank_slope_noise(s, w, p, pc, u, cov, co):
    """Torque-model noise of the KKF's acceleration error, ``(M sa / max(|xs'|, lever))^2``:
    the kinematic acceleration ``(a - xs'' omega^2) / xs'`` carries the slider-acceleration
    error ``sa`` over the lever ``xs'``."""
    e = s[w + 2] * p[pc + CRANK_SLOPE.sa] / max(abs(s[w + 1]), p[pc + CRANK_SLOPE.lever])
    cov[co] += e * e


@njit_noalloc(forceinline=True)
def _crank_bench_f(s, so, out, oo, p, pc, u, dt, mode, w):
    th, om, al, force = s[so], s[so + 1], s[so + 2], s[so + 3]
    thp = th + dt * om + 0.5 * dt * dt * al
    omp = om + dt * al
    mass, cor, grav, dxs = _crank_terms(thp, p, pc)
    _advance(s, so, out, oo, 1, dt, (u[0] - cor * omp * omp - grav + force * dxs) / mass, 0)
    out[oo + 3] = force


@njit_noalloc(forceinline=True)
def _crank_bench_h(s, so, out, oo, p, pc):
    dxs, ddxs = crank_position(s[so], p[pc + CRANK.c], p[pc + CRANK.r], p[pc + CRANK.h])[5:]
    out[oo] = s[so]
    out[oo + 1] = dxs * s[so + 2] + ddxs * s[so + 1] * s[so + 1]


@njit_noalloc(forceinline=True)
def _crank_walk_f(s, so, out, oo, p, pc, u, dt, mode, w):
    _advance(s, so, out, oo, 1, dt, s[so + 2], 0)


@njit_noalloc(forceinline=True)
def _taylor_jacobian(jac, jo, n, dt):
    """The Jacobian of ``n`` states, each the derivative of the one before, advanced by
    their Taylor series at a constant last state: row ``i`` holds ``dt^(j-i) / (j-i)!``
    from column ``i`` on (up to ``n = 4``)."""
    terms = (1.0, dt, 0.5 * dt * dt, dt * dt * dt / 6.0)
    for i in range(n):
        for j in range(n):
            jac[jo + i * n + j] = terms[j - i] if j >= i else 0.0


@njit_noalloc(forceinline=True)
def _crank_walk_fjac(s, so, p, pc, u, dt, mode, jac, jo, w):
    _taylor_jacobian(jac, jo, 3, dt)


@njit_noalloc(forceinline=True)
def _crank_jerk_f(s, so, out, oo, p, pc, u, dt, mode, w):
    th, om, al, je = s[so], s[so + 1], s[so + 2], s[so + 3]
    out[oo] = th + dt * om + 0.5 * dt * dt * al + dt * dt * dt / 6.0 * je
    out[oo + 1] = om + dt * al + 0.5 * dt * dt * je
    out[oo + 2] = al + dt * je
    out[oo + 3] = je


@njit_noalloc(forceinline=True)
def _crank_jerk_fjac(s, so, p, pc, u, dt, mode, jac, jo, w):
    _taylor_jacobian(jac, jo, 4, dt)


# ------------------------------------------------------------------ two-link planar arm
@njit_noalloc(forceinline=True)
def _two_link_alpha2(th2, om1, a1, a2, l1, d1, d2):
    """Elbow acceleration from the two tangential accelerometers (seed 004 eq. 2.24)."""
    return -a1 * (l1 * math.cos(th2) + d2) / (d1 * d2) + (a2 - l1 * math.sin(th2) * om1 * om1) / d2


@njit_noalloc(forceinline=True)
def _two_link_f(s, so, out, oo, p, pc, u, dt, mode, w):
    l1, d1, d2 = p[pc + TWO_LINK.L1], p[pc + TWO_LINK.d1], p[pc + TWO_LINK.d2]
    th2p = s[so + 1] + dt * s[so + 3] + 0.5 * dt * dt * s[so + 5]
    om1p = s[so + 2] + dt * s[so + 4]
    _advance(s, so, out, oo, 2, dt, u[0] / d1, 0)
    _advance(s, so, out, oo, 2, dt, _two_link_alpha2(th2p, om1p, u[0], u[1], l1, d1, d2), 1)


@njit_noalloc(forceinline=True)
def _two_link_fjac(s, so, p, pc, u, dt, mode, jac, jo, w):
    l1, d1, d2 = p[pc + TWO_LINK.L1], p[pc + TWO_LINK.d1], p[pc + TWO_LINK.d2]
    th2p = s[so + 1] + dt * s[so + 3] + 0.5 * dt * dt * s[so + 5]
    om1p = s[so + 2] + dt * s[so + 4]
    g1 = u[0] * l1 * math.sin(th2p) / (d1 * d2) - l1 * math.cos(th2p) * om1p * om1p / d2
    g2 = -2.0 * l1 * math.sin(th2p) * om1p / d2
    # d alpha2_new / d [th1, th2, om1, om2, al1, al2]
    da = (0.0, g1, g2, g1 * dt, g2 * dt, g1 * 0.5 * dt * dt)
    for i in range(36):
        jac[jo + i] = 0.0
    for j in range(2):
        jac[jo + j * 6 + j] = 1.0
        jac[jo + j * 6 + 2 + j] = dt
        jac[jo + j * 6 + 4 + j] = 0.5 * dt * dt
        jac[jo + (2 + j) * 6 + 2 + j] = 1.0
        jac[jo + (2 + j) * 6 + 4 + j] = 0.5 * dt
    for i in range(6):
        jac[jo + 3 * 6 + i] += 0.5 * dt * da[i]
        jac[jo + 5 * 6 + i] = da[i]


@njit_noalloc(forceinline=True)
def _two_link_constraint(s, so, p, pc, u, dt, out, oo):
    """Into ``out[oo:oo + 6]``: the positions and speeds one sample ahead of the state ``s``
    (the kinematic model of eq. 2.7 at the previous sample, as in eq. 2.11) and the
    accelerations the accelerometers ``u`` give at ``s`` (eq. 2.24) that move them."""
    l1, d1, d2 = p[pc + TWO_LINK.L1], p[pc + TWO_LINK.d1], p[pc + TWO_LINK.d2]
    a1 = u[0] / d1
    a2 = _two_link_alpha2(s[so + 1], s[so + 2], u[0], u[1], l1, d1, d2)
    out[oo] = s[so] + dt * s[so + 2] + 0.5 * dt * dt * a1
    out[oo + 1] = s[so + 1] + dt * s[so + 3] + 0.5 * dt * dt * a2
    out[oo + 2] = s[so + 2] + dt * a1
    out[oo + 3] = s[so + 3] + dt * a2
    out[oo + 4] = a1
    out[oo + 5] = a2


@njit_noalloc(forceinline=True)
def _two_link_walk_f(s, so, out, oo, p, pc, u, dt, mode, w):
    """Kinematic equations with random walk (section 2.2.1.1): the new accelerations are the
    constraint's at the previous state (eq. 2.11), their model noise the random walk."""
    _two_link_constraint(s, so, p, pc, u, dt, out, oo)


@njit_noalloc(forceinline=True)
def _two_link_newmark_f(s, so, out, oo, p, pc, u, dt, mode, w):
    """Numerical derivative with model uncertainty (section 2.2.1.2): positions and speeds from
    the kinematic model, the accelerations by Newmark's derivative of the positions (eq. 2.14,
    ``beta`` > 0) or of the speeds (eq. 2.15, ``beta`` 0, ``gamma``)."""
    _two_link_constraint(s, so, p, pc, u, dt, out, oo)
    beta, gamma = p[pc + TWO_LINK_NEWMARK.beta], p[pc + TWO_LINK_NEWMARK.gamma]
    for j in range(2):
        if beta > 0.0:
            out[oo + 4 + j] = ((out[oo + j] - s[so + j]) / (beta * dt * dt)
                               - s[so + 2 + j] / (beta * dt)
                               + (1.0 - 0.5 / beta) * s[so + 4 + j])
        else:
            out[oo + 4 + j] = ((out[oo + 2 + j] - s[so + 2 + j]) / (gamma * dt)
                               + (gamma - 1.0) / gamma * s[so + 4 + j])


# ------------------------------------------------------------------ registry
@dataclass(frozen=True)
class Model:
    """A registered estimation model.

    Attributes
    ----------
    states, measurements, controls : int or None
        Fixed sizes (None: any, as set by the block's parameters).
    coeffs : tuple of (name, unit, default)
        Model coefficients, packed in this order.
    control_matrix : bool
        True if the control enters as ``+ B u`` (the block's ``B``).
    doc : str
        One line for error messages and the block reference.
    f, h, fjac, mode, prepare, noise : callable or None
        The model functions (see the module doc); ``h`` None: the model
        measures ``z = H x`` (the block's ``H`` for ``linear``, else its first
        ``m`` states); ``fjac`` None: finite differences.
    check : callable or None
        ``check(coeffs) -> str | None``: what is wrong with a coefficient
        vector (naming the coefficient and its valid range), or None.
    """

    states: int | None
    measurements: int | None
    controls: int | None
    coeffs: Coeffs
    control_matrix: bool
    doc: str
    f: Callable | None = None
    h: Callable | None = None
    fjac: Callable | None = None
    mode: Callable | None = None
    prepare: Callable | None = None
    check: Callable | None = None
    noise: Callable | None = None


def _crank_check(v) -> str | None:
    """Geometry ``c, r, h`` of a slider-crank model."""
    return crank_geometry_problem(v[CRANK.c], v[CRANK.r], v[CRANK.h])


def _crank_masses_check(v) -> str | None:
    """The geometry (:func:`_crank_check`), then masses and gravity >= 0."""
    problem = _crank_check(v)
    masses = v[CRANK_FORCE.mc:CRANK_FORCE.g + 1]
    if problem is None and min(masses) < 0.0:
        problem = f"masses mc, mr, ms and g must be >= 0, got {list(masses)}"
    return problem


def _crank_kkf_check(v) -> str | None:
    """The switching rule's band in (0, pi/2), hysteresis >= 0 and growth > 0, then the
    geometry (:func:`_crank_check`)."""
    band, hysteresis, growth = v[CRANK_KKF.band], v[CRANK_KKF.hysteresis], v[CRANK_KKF.growth]
    if not 0.0 < band < 0.5 * math.pi:
        return f"band must be in (0, pi/2) rad, got {band:g}"
    if hysteresis < 0.0 or growth <= 0.0:
        return f"hysteresis must be >= 0 and growth > 0, got {hysteresis:g} rad, {growth:g} 1/s"
    return _crank_check(v)


def _crank_slope_check(v) -> str | None:
    """The slider-acceleration error ``sa`` >= 0 and lever floor > 0, then
    :func:`_crank_masses_check`."""
    sa, lever = v[CRANK_SLOPE.sa], v[CRANK_SLOPE.lever]
    if sa < 0.0 or lever <= 0.0:
        return f"sa must be >= 0 m/s^2 and lever > 0 m, got {sa:g}, {lever:g}"
    return _crank_masses_check(v)


def _two_link_check(v) -> str | None:
    """Link length and accelerometer distances of the two-link arm, all > 0."""
    lengths = [v[TWO_LINK.L1], v[TWO_LINK.d1], v[TWO_LINK.d2]]
    return None if min(lengths) > 0.0 else f"L1, d1, d2 must be > 0 m, got {lengths}"


def _two_link_newmark_check(v) -> str | None:
    """Newmark's ``beta`` >= 0 and ``gamma`` > 0, then :func:`_two_link_check`."""
    beta, gamma = v[TWO_LINK_NEWMARK.beta], v[TWO_LINK_NEWMARK.gamma]
    if beta < 0.0 or gamma <= 0.0:
        return f"beta must be >= 0 and gamma > 0, got {beta:g}, {gamma:g}"
    return _two_link_check(v)


def _force_slope(controls: int, source: str) -> Model:
    """The force observer of eq. 3.5 with an integrated random-walk force, fed the ``controls``
    entries of a kinematic observer's estimate (``source``; the first three are used)."""
    return Model(3, 1, controls, CRANK_SLOPE_COEFFS, False,
                 f"slider-crank force observer [T, F, F'], u = {source} from a KKF, "
                 "z = crank torque, F an integrated random walk, torque-model noise weighted by "
                 "the force's lever", f=_crank_slope_f, fjac=_crank_slope_fjac,
                 prepare=_crank_force_prepare, noise=_crank_slope_noise,
                 check=_crank_slope_check)

MODELS: dict[str, Model] = {
    "linear": Model(None, None, None, (), True, "x[k] = A x[k-1] + B u[k], z = H x"),
    "pendulum": Model(2, 1, None, PENDULUM_COEFFS, True,
                      "damped pendulum [theta, omega], explicit Euler (+ B u), z = theta",
                      f=_pendulum_f, fjac=_pendulum_fjac),
    "slider_crank_kkf": Model(3, 1, 1, CRANK_KKF_COEFFS, False,
                              "slider-crank KKF [theta, omega, alpha], u = slider acceleration, "
                              "z = crank angle, switching near dead centres (angle band, "
                              "and speed-error growth rate on the approach)",
                              f=_crank_kkf_f, mode=_crank_kkf_mode, check=_crank_kkf_check),
    "slider_crank_force": Model(2, 1, 3, CRANK_FORCE_COEFFS, False,
                                "slider-crank force observer [T, F], u = [theta, omega, alpha] "
                                "from a KKF, z = crank torque, F a random walk",
                                f=_crank_force_f, fjac=_crank_force_fjac,
                                prepare=_crank_force_prepare, check=_crank_masses_check),
    "slider_crank_force_slope": _force_slope(3, "[theta, omega, alpha]"),
    "slider_crank_force_jerk": _force_slope(4, "[theta, omega, alpha, jerk]"),
    "slider_crank_kkf_walk": Model(3, 2, 0, CRANK_COEFFS, False,
                                   "slider-crank kinematic observer [theta, omega, alpha], "
                                   "alpha a random walk, z = [crank angle, slider acceleration]",
                                   f=_crank_walk_f, fjac=_crank_walk_fjac, h=_crank_bench_h,
                                   check=_crank_check),
    "slider_crank_kkf_jerk": Model(4, 2, 0, CRANK_COEFFS, False,
                                   "slider-crank kinematic observer [theta, omega, alpha, jerk], "
                                   "jerk a random walk, z = [crank angle, slider acceleration]",
                                   f=_crank_jerk_f, fjac=_crank_jerk_fjac, h=_crank_bench_h,
                                   check=_crank_check),
    "slider_crank_benchmark": Model(4, 2, 1, CRANK_FORCE_COEFFS, False,
                                    "slider-crank dynamic observer [theta, omega, alpha, F], "
                                    "u = crank torque, z = [theta, slider acceleration]",
                                    f=_crank_bench_f, h=_crank_bench_h, check=_crank_masses_check),
    "two_link_kkf": Model(6, 2, 2, TWO_LINK_COEFFS,
                          False, "two-link planar arm KKF [th1, th2, om1, om2, al1, al2], "
                          "u = tangential link accelerations, z = joint angles",
                          f=_two_link_f, fjac=_two_link_fjac, check=_two_link_check),
    "two_link_kkf_walk": Model(6, 2, 2, TWO_LINK_COEFFS, False,
                               "two-link planar arm KKF [th1, th2, om1, om2, al1, al2], "
                               "kinematic equations with random walk (section 2.2.1.1)",
                               f=_two_link_walk_f, check=_two_link_check),
    "two_link_kkf_newmark": Model(6, 2, 2, TWO_LINK_NEWMARK_COEFFS, False,
                                  "two-link planar arm KKF [th1, th2, om1, om2, al1, al2], "
                                  "accelerations by Newmark's numerical derivative (section "
                                  "2.2.1.2: of the positions with beta > 0, else of the speeds "
                                  "with gamma)", f=_two_link_newmark_f,
                                  check=_two_link_newmark_check),
}


def register(name: str, model: Model | ModuleType) -> Model:
    """Make ``model`` selectable as ``model: name`` by the EKF and UKF blocks.

    Parameters
    ----------
    name : str
        The name graphs and blocks use.
    model : Model or module
        A :class:`Model`, or a plain module defining one: the functions under the names
        of the module docstring above (``f``; optionally ``h``, ``fjac``, ``mode``,
        ``prepare``, ``noise``; compiled with ``hapflow.jit.njit_noalloc``), the sizes
        ``STATES``, ``MEASUREMENTS``, ``CONTROLS`` (None: set by the block),
        ``COEFFS`` (``(name, unit, default)`` per coefficient, packed in that order; its
        functions read them through ``coefficient_offsets(title, COEFFS)``),
        optionally ``CONTROL_MATRIX`` (the block's ``B u`` added; default False) and
        ``check(coeffs) -> str | None``; the first line of its docstring describes it.

    Returns
    -------
    Model
        The registered model.

    Raises
    ------
    ValueError
        If ``name`` names another model already, or the module lacks ``f`` or a size.
    """
    if isinstance(model, ModuleType):
        model = _from_module(model)
    known = MODELS.get(name)
    if known is not None and known != model:
        raise ValueError(f"estimation model {name!r} is registered already ({known.doc})")
    MODELS[name] = model
    return model


def _from_module(module: ModuleType) -> Model:
    missing = [n for n in ("f", "STATES", "MEASUREMENTS", "CONTROLS", "COEFFS")
               if not hasattr(module, n)]
    if missing:
        raise ValueError(f"module {module.__name__!r} is no estimation model: it defines no "
                         f"{', '.join(missing)} (see hapflow.blocks.estimation_models)")
    doc = (module.__doc__ or module.__name__).strip().splitlines()[0]
    functions = {n: getattr(module, n, None) for n in ("f", "h", "fjac", "mode", "prepare",
                                                       "check", "noise")}
    return Model(module.STATES, module.MEASUREMENTS, module.CONTROLS,
                 tuple(tuple(c) for c in module.COEFFS),
                 bool(getattr(module, "CONTROL_MATRIX", False)), doc, **functions)


def model_named(name: str) -> Model:
    """The model registered as ``name``; a dotted name not registered yet is a module's
    import path: the module is imported and registered under that name (so a graph file
    can name a model of its own, ``model: mylab.arm_model``, and every process that loads
    the graph gets it).

    Raises
    ------
    ValueError
        Naming the valid models, or why the module is not one.
    """
    if name in MODELS:
        return MODELS[name]
    if "." in name:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise ValueError(f"cannot import estimation model module {name!r}: {exc}") from None
        return register(name, module)
    raise ValueError(f"must be one of {', '.join(map(repr, MODELS))} or the import path of a "
                     "module defining a model (see hapflow.blocks.estimation_models.register)")


def known_model(name: str) -> str | None:
    """Check of a ``model`` parameter: None for a registered model or a model module's import
    path (which it imports and registers), else what is wrong."""
    try:
        model_named(name)
    except ValueError as exc:
        return str(exc)
    return None
