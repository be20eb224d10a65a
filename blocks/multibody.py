"""Rigid multibody models: the offset slider-crank of seed 004 (kinematics, dynamics, plant).

Geometry (seed 004 fig. 3.2, vertical plane, gravity ``-g`` along ``y``):
the crank (length ``c``, mass ``mc``, uniform rod) turns about the origin by
``theta``; its pin ``A = c (cos theta, sin theta)``; the connecting rod
(length ``r``, mass ``mr``, uniform) joins ``A`` to the slider pin
``B = (xs, h)`` on a horizontal guide at height ``h`` (the frame offset);
the slider (mass ``ms``) moves along ``x``.  With ``phi`` the rod angle,
``r sin phi = h - c sin theta`` and ``xs = c cos theta + r cos phi``
(``cos phi > 0``: the slider is on the +x side).

The helpers return derivatives with respect to ``theta`` (``'``), so that
time derivatives follow as ``xs_dot = xs' omega`` and
``xs_ddot = xs' alpha + xs'' omega^2``.  The dead centres, where crank and
rod are aligned (``theta - phi = k pi``), are where ``xs' = 0``: there the
slider acceleration says nothing about the crank acceleration (the
kinematic model singularity of seed 004 section 2.2.2) and the slider force
does no work on the crank.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from hapflow.block import Block
from hapflow.jit import njit_noalloc
from hapflow.params import Live, nonnegative, positive
from hapflow.ports import In, Out
from hapflow.rng import normal


@njit_noalloc(inline="always")
def crank_position(th, c, r, h):
    """Slider-crank position analysis without the rod angle itself (no ``asin``).

    Parameters
    ----------
    th : float
        Crank angle (rad).
    c, r, h : float
        Crank length, rod length, guide offset (m).

    Returns
    -------
    tuple of float
        ``(sin phi, cos phi, phi', phi'', xs, xs', xs'')``: the rod angle's
        sine and cosine, its first and second derivatives w.r.t. ``th``
        (1, 1/rad), slider position (m) and its derivatives (m/rad, m/rad^2).
        NaN when the rod cannot reach the guide (``|h - c sin th| > r``).
    """
    st, ct = math.sin(th), math.cos(th)
    s = (h - c * st) / r
    cp = math.sqrt(1.0 - s * s)
    dphi = -c * ct / (r * cp)
    ddphi = (c * st * cp - c * ct * s * dphi) / (r * cp * cp)
    xs = c * ct + r * cp
    dxs = -c * st - r * s * dphi
    ddxs = -c * ct - r * cp * dphi * dphi - r * s * ddphi
    return s, cp, dphi, ddphi, xs, dxs, ddxs


@njit_noalloc(inline="always")
def crank_kinematics(th, c, r, h):
    """:func:`crank_position` with the rod angle itself (rad) in place of its sine and cosine.

    Returns ``(phi, phi', phi'', xs, xs', xs'')`` for crank angle ``th`` (rad)
    and lengths ``c, r, h`` (m).
    """
    sp, _, dphi, ddphi, xs, dxs, ddxs = crank_position(th, c, r, h)
    return math.asin(sp), dphi, ddphi, xs, dxs, ddxs


@njit_noalloc(inline="always")
def crank_singularity(th, c, r, h):
    """Distance (rad) of the crank from the nearest dead centre: ``|theta - phi|`` mod ``pi``.

    Computed as ``asin(|sin(theta - phi)|)`` with ``sin(theta - phi) =
    -xs' cos(phi) / c`` (no rod angle, no modulo).
    """
    _, cp, _, _, _, dxs, _ = crank_position(th, c, r, h)
    return math.asin(min(1.0, abs(dxs) * cp / c))


@njit_noalloc(inline="always")
def crank_speed_growth(th, om, c, r, h):
    """Rate (1/s) at which the acceleration constraint solved for ``alpha`` grows a speed error.

    The kinematic model ``alpha = (a - xs'' omega^2) / xs'`` gives
    ``d alpha / d omega = -2 xs'' omega / xs'``: integrated, a crank-speed
    error grows as ``exp(growth t)`` where this is positive (the crank
    approaching a dead centre) and decays where it is negative (leaving
    it).  Its magnitude diverges at the dead centres (``xs' = 0``).

    Parameters
    ----------
    th : float
        Crank angle (rad).
    om : float
        Crank speed (rad/s).
    c, r, h : float
        Crank length, rod length, guide offset (m).

    Returns
    -------
    float
        ``-2 xs'' omega / xs'`` (1/s); +-inf exactly at a dead centre.
    """
    dxs, ddxs = crank_position(th, c, r, h)[5:]
    if dxs == 0.0:
        return math.copysign(math.inf, -ddxs * om)
    return -2.0 * ddxs * om / dxs


@njit_noalloc(inline="always")
def crank_terms(th, c, r, h, mc, mr, ms, g):
    """Reduced dynamics ``T = M alpha + C omega^2 + G - F xs'`` about the crank axis.

    From the power balance of the three bodies (crank and rod as uniform
    slender rods, point-mass slider): ``M = sum m_i J_i.J_i + I_i w_i^2``,
    ``C = sum m_i J_i.J_i' + I_i w_i w_i'`` with ``J_i`` the derivative of
    body ``i``'s centre of mass w.r.t. ``theta`` and ``w_i`` that of its
    angle, ``G = g sum m_i J_iy``.

    Returns
    -------
    tuple of float
        ``(M, C, G, xs')``: inertia (kg m^2), velocity term (kg m^2),
        gravity torque (N m) and the slider's lever ``xs'`` (m/rad).
    """
    st, ct = math.sin(th), math.cos(th)
    sp, cp, dp, ddp, xs, dxs, ddxs = crank_position(th, c, r, h)
    # rod centre of mass: A + r/2 (cos phi, sin phi)
    jx = -c * st - 0.5 * r * sp * dp
    jy = c * ct + 0.5 * r * cp * dp
    jxd = -c * ct - 0.5 * r * (cp * dp * dp + sp * ddp)
    jyd = -c * st + 0.5 * r * (-sp * dp * dp + cp * ddp)
    i_rod = mr * r * r / 12.0
    mass = mc * c * c / 3.0 + mr * (jx * jx + jy * jy) + i_rod * dp * dp + ms * dxs * dxs
    cor = mr * (jx * jxd + jy * jyd) + i_rod * dp * ddp + ms * dxs * ddxs
    grav = g * (0.5 * mc * c * ct + mr * jy)
    return mass, cor, grav, dxs


@njit_noalloc(inline="always")
def crank_torque(th, om, al, force, c, r, h, mc, mr, ms, g):
    """Crank torque (N m) for crank motion ``(th, om, al)`` and slider force ``force`` (N, +x)."""
    mass, cor, grav, dxs = crank_terms(th, c, r, h, mc, mr, ms, g)
    return mass * al + cor * om * om + grav - force * dxs


def crank_geometry_problem(c: float, r: float, h: float) -> str | None:
    """Why lengths ``c, r`` and offset ``h`` (m) make no slider-crank that turns fully, or None."""
    if c <= 0.0 or r <= 0.0:
        return f"crank c={c:g} m and rod r={r:g} m must be > 0"
    if r <= c + abs(h):
        return (f"rod length r={r:g} m must exceed crank c={c:g} m plus |offset h|={abs(h):g} m "
                "(else the rod cannot reach the guide at every crank angle)")
    return None


# packed parameters of SliderCrank
_W0, _RIP, _OMR, _TH0, _GEO = 0, 1, 2, 3, 4          # _GEO: c, r, h, mc, mr, ms, g
_NOISE = _GEO + 7                                   # enc, acc, torque std


class SliderCrank(Block):
    """Offset slider-crank (seed 004 section 3.2.1) driven at a prescribed crank speed.

    The crank speed is ``omega = omega0 + ripple sin(2 pi f t)`` (seed 004:
    12.56 rad/s plus a 2 Hz ripple of 1.256 rad/s), so
    ``theta = theta0 + omega0 t + ripple (1 - cos(2 pi f t)) / (2 pi f)`` and
    ``alpha = 2 pi f ripple cos(2 pi f t)``.  The block outputs the torque
    the drive must apply (inverse dynamics, see :func:`crank_torque`) against
    gravity, inertia and the external slider force ``force`` (N, along +x),
    the slider acceleration ``xs' alpha + xs'' omega^2``, and the three
    sensors of the seed: encoder ``theta + n_e``, slider accelerometer
    ``a + n_a`` and torque sensor ``T + n_T`` with white Gaussian noise of
    standard deviations ``enc_noise`` (0.003 rad), ``acc_noise``
    (0.05 m/s^2) and ``torque_noise`` (0.28 N m), drawn once per tick from
    three streams seeded by the graph seed.  Geometry and masses default
    to the nominal values of seed 004 table 3.1.  Noise is held between
    ticks (``update`` draws the next sample).

    Ports
    -----
    force        : in, (1,), N           external force on the slider (+x)
    theta        : out, (1,), rad        crank angle (state only)
    omega        : out, (1,), rad/s      crank speed
    alpha        : out, (1,), rad/s^2    crank acceleration
    slider_pos   : out, (1,), m          slider position xs
    slider_acc   : out, (1,), m/s^2      slider acceleration
    torque       : out, (1,), N*m        drive torque
    theta_meas   : out, (1,), rad        encoder reading
    acc_meas     : out, (1,), m/s^2      accelerometer reading
    torque_meas  : out, (1,), N*m        torque-sensor reading
    kin_meas     : out, (2,), rad and m/s^2   [theta_meas, acc_meas] (one vector, for an
                                              observer measuring both)
    """

    inputs = {"force": In(1, unit="N", doc="external force on the slider (+x)")}
    outputs = {"theta": Out(1, unit="rad", depends="state", doc="crank angle"),
               "omega": Out(1, unit="rad/s", depends="state", doc="crank speed"),
               "alpha": Out(1, unit="rad/s^2", depends="state", doc="crank acceleration"),
               "slider_pos": Out(1, unit="m", depends="state", doc="slider position"),
               "slider_acc": Out(1, unit="m/s^2", depends="state", doc="slider acceleration"),
               "torque": Out(1, unit="N*m", doc="drive torque"),
               "theta_meas": Out(1, unit="rad", depends="state", doc="encoder reading"),
               "acc_meas": Out(1, unit="m/s^2", depends="state", doc="accelerometer reading"),
               "torque_meas": Out(1, unit="N*m", doc="torque-sensor reading"),
               "kin_meas": Out(2, depends="state", doc="[theta_meas (rad), acc_meas (m/s^2)]")}
    params = {"omega0": Live(12.56, unit="rad/s", doc="mean crank speed"),
              "ripple": Live(1.256, unit="rad/s", doc="amplitude of the crank-speed ripple"),
              "ripple_freq": Live(2.0, unit="Hz", check=positive, doc="ripple frequency"),
              "theta0": Live(0.0, unit="rad", doc="crank angle at t = 0"),
              "crank": Live(0.3, unit="m", check=positive, doc="crank length c"),
              "rod": Live(0.6, unit="m", check=positive, doc="rod length r"),
              "offset": Live(0.05, unit="m", doc="guide offset h"),
              "crank_mass": Live(1.872, unit="kg", check=nonnegative, doc="crank mass mc"),
              "rod_mass": Live(3.744, unit="kg", check=nonnegative, doc="rod mass mr"),
              "slider_mass": Live(1.2, unit="kg", check=nonnegative, doc="slider mass ms"),
              "gravity": Live(9.81, unit="m/s^2", check=nonnegative, doc="gravity along -y"),
              "enc_noise": Live(0.003, unit="rad", check=nonnegative, doc="encoder noise std"),
              "acc_noise": Live(0.05, unit="m/s^2", check=nonnegative,
                                doc="accelerometer noise std"),
              "torque_noise": Live(0.28, unit="N*m", check=nonnegative,
                                   doc="torque-sensor noise std")}
    dstate = 3
    random_streams = 3

    def configure(self) -> None:
        problem = crank_geometry_problem(self.crank, self.rod, self.offset)
        if problem:
            from hapflow.block import ParamError
            raise ParamError("rod", f"SliderCrank: {problem}")

    @staticmethod
    @njit
    def init(x, d, m, p):
        for k in range(3):
            d[k] = p[_NOISE + k] * normal(m, k)

    @staticmethod
    @njit
    def output(t, x, d, m, p, force, theta, omega, alpha, slider_pos, slider_acc, torque,
               theta_meas, acc_meas, torque_meas, kin_meas):
        w = 2.0 * math.pi * p[_OMR]
        th = p[_TH0] + p[_W0] * t + p[_RIP] * (1.0 - math.cos(w * t)) / w
        om = p[_W0] + p[_RIP] * math.sin(w * t)
        al = p[_RIP] * w * math.cos(w * t)
        c, r, h = p[_GEO], p[_GEO + 1], p[_GEO + 2]
        kin = crank_kinematics(th, c, r, h)
        acc = kin[4] * al + kin[5] * om * om
        tq = crank_torque(th, om, al, force[0], c, r, h, p[_GEO + 3], p[_GEO + 4], p[_GEO + 5],
                          p[_GEO + 6])
        theta[0] = th
        omega[0] = om
        alpha[0] = al
        slider_pos[0] = kin[3]
        slider_acc[0] = acc
        torque[0] = tq
        theta_meas[0] = th + d[0]
        acc_meas[0] = acc + d[1]
        torque_meas[0] = tq + d[2]
        kin_meas[0] = theta_meas[0]
        kin_meas[1] = acc_meas[0]

    @staticmethod
    @njit
    def update(t, x, d, m, p, force):
        for k in range(3):
            d[k] = p[_NOISE + k] * normal(m, k)


def slider_crank_coefficients(block: SliderCrank | None = None, **errors: float) -> np.ndarray:
    """``[c, r, h, mc, mr, ms, g]`` of a plant (default: nominal) plus additive ``errors``.

    ``errors`` keys are those names (``c=-0.003`` ...): seed 004 table 3.1's
    deviations between the model an observer uses and the actual mechanism.
    """
    plant = block if block is not None else SliderCrank()
    names = ("c", "r", "h", "mc", "mr", "ms", "g")
    base = [plant.crank, plant.rod, plant.offset, plant.crank_mass, plant.rod_mass,
            plant.slider_mass, plant.gravity]
    unknown = set(errors) - set(names)
    if unknown:
        raise ValueError(f"unknown slider-crank coefficient(s) {sorted(unknown)}; valid: {names}")
    return np.array([v + errors.get(n, 0.0) for n, v in zip(names, base)])
