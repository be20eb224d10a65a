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

Plants: :class:`SliderCrank` imposes a crank-speed profile (chapter 2's
scenario) and outputs the torque it takes; :class:`TorqueSliderCrank`
integrates the forward dynamics under a drive torque (chapter 3's),
supplied for instance by :class:`CrankServo`.  Both carry the sensors of
seed 004 section 3.2.1.
"""
from __future__ import annotations

import math

import numpy as np

from hapflow.block import Block, ParamError
from hapflow.jit import njit, njit_noalloc
from hapflow.names import Derived, offsets
from hapflow.params import Live, nonnegative, positive
from hapflow.ports import In, Out
from hapflow.rng import normal


@njit_noalloc(forceinline=True)
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


@njit_noalloc(forceinline=True)
def crank_kinematics(th, c, r, h):
    """:func:`crank_position` with the rod angle itself (rad) in place of its sine and cosine.

    Returns ``(phi, phi', phi'', xs, xs', xs'')`` for crank angle ``th`` (rad)
    and lengths ``c, r, h`` (m).
    """
    sp, _, dphi, ddphi, xs, dxs, ddxs = crank_position(th, c, r, h)
    return math.asin(sp), dphi, ddphi, xs, dxs, ddxs


@njit_noalloc(forceinline=True)
def crank_singularity(th, c, r, h):
    """Distance (rad) of the crank from the nearest dead centre: ``|theta - phi|`` mod ``pi``.

    Computed as ``asin(|sin(theta - phi)|)`` with ``sin(theta - phi) =
    -xs' cos(phi) / c`` (no rod angle, no modulo).
    """
    _, cp, _, _, _, dxs, _ = crank_position(th, c, r, h)
    return math.asin(min(1.0, abs(dxs) * cp / c))


@njit_noalloc(forceinline=True)
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


@njit_noalloc(forceinline=True)
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


@njit_noalloc(forceinline=True)
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


@njit_noalloc(forceinline=True)
def crank_acceleration(th, om, torque, force, c, r, h, mc, mr, ms, g):
    """Forward dynamics: crank acceleration (rad/s^2) under drive ``torque`` (N m) and slider
    ``force`` (N, +x) at angle ``th`` (rad) and speed ``om`` (rad/s) (:func:`crank_terms`)."""
    mass, cor, grav, dxs = crank_terms(th, c, r, h, mc, mr, ms, g)
    return (torque - cor * om * om - grav + force * dxs) / mass


@njit_noalloc(forceinline=True)
def speed_profile(t, w0, ripple, freq, th0):
    """Crank motion ``(theta, omega, alpha)`` at time ``t`` of the speed
    ``omega = w0 + ripple sin(2 pi freq t)`` from ``theta = th0`` at ``t = 0``."""
    w = 2.0 * math.pi * freq
    return (th0 + w0 * t + ripple * (1.0 - math.cos(w * t)) / w,
            w0 + ripple * math.sin(w * t), ripple * w * math.cos(w * t))


@njit_noalloc(forceinline=True)
def converter(value, step, full_scale):
    """A reading through an ADC: rounded to ``step`` and clipped to ``+-full_scale`` (no
    rounding for ``step`` 0, no clipping for ``full_scale`` 0)."""
    if step > 0.0:
        value = step * math.floor(value / step + 0.5)
    if full_scale > 0.0:
        value = min(max(value, -full_scale), full_scale)
    return value


def _geometry_problem(block: Block) -> None:
    problem = crank_geometry_problem(block.crank, block.rod, block.offset)
    if problem:
        raise ParamError("rod", f"{type(block).__name__}: {problem}")


_GEOMETRY = {"crank": Live(0.3, unit="m", check=positive, doc="crank length c"),
             "rod": Live(0.6, unit="m", check=positive, doc="rod length r"),
             "offset": Live(0.05, unit="m", doc="guide offset h"),
             "crank_mass": Live(1.872, unit="kg", check=nonnegative, doc="crank mass mc"),
             "rod_mass": Live(3.744, unit="kg", check=nonnegative, doc="rod mass mr"),
             "slider_mass": Live(1.2, unit="kg", check=nonnegative, doc="slider mass ms"),
             "gravity": Live(9.81, unit="m/s^2", check=nonnegative, doc="gravity along -y")}
"""Geometry and masses of a slider-crank (seed 004 table 3.1, nominal values)."""

_SENSORS = {"enc_noise": Live(0.003, unit="rad", check=nonnegative, doc="encoder noise std"),
            "acc_noise": Live(0.05, unit="m/s^2", check=nonnegative,
                              doc="accelerometer noise std"),
            "torque_noise": Live(0.28, unit="N*m", check=nonnegative,
                                 doc="torque-sensor noise std")}
"""The three sensors of seed 004 section 3.2.1 (white Gaussian noise)."""

_MOTION = {"omega0": Live(12.56, unit="rad/s", doc="mean crank speed"),
           "ripple": Live(1.256, unit="rad/s", doc="amplitude of the crank-speed ripple"),
           "ripple_freq": Live(2.0, unit="Hz", check=positive, doc="ripple frequency"),
           "theta0": Live(0.0, unit="rad", doc="crank angle at t = 0")}
"""A crank-speed profile ``omega0 + ripple sin(2 pi ripple_freq t)`` (:func:`speed_profile`)."""

_PORTS = (("theta", 1, "rad", "crank angle"), ("omega", 1, "rad/s", "crank speed"),
          ("alpha", 1, "rad/s^2", "crank acceleration"), ("slider_pos", 1, "m", "slider position"),
          ("slider_acc", 1, "m/s^2", "slider acceleration"), ("torque", 1, "N*m", "drive torque"),
          ("theta_meas", 1, "rad", "encoder reading"),
          ("acc_meas", 1, "m/s^2", "accelerometer reading"),
          ("torque_meas", 1, "N*m", "torque-sensor reading"),
          ("kin_meas", 2, None, "[theta_meas (rad), acc_meas (m/s^2)]"))


def _plant_outputs(fed: tuple[str, ...], without: tuple[str, ...] = ()) -> dict[str, Out]:
    """The outputs of a slider-crank plant but those in ``without``: those named in ``fed``
    depend on its inputs at the same tick, the others on its state only."""
    return {name: Out(size, unit=unit, doc=doc, depends=None if name in fed else "state")
            for name, size, unit, doc in _PORTS if name not in without}


_NOISE = ("n_enc", "n_acc", "n_torque")
"""Discrete states of a plant: the held noise sample of each sensor."""
NOISE = offsets("Noise", [(name, 1) for name in _NOISE])


@njit_noalloc(forceinline=True)
def _draw(d, m, enc, acc, torque):
    """The next noise sample of each sensor (std ``enc``, ``acc``, ``torque``) into ``d``."""
    d[NOISE.n_enc] = enc * normal(m, 0)
    d[NOISE.n_acc] = acc * normal(m, 1)
    d[NOISE.n_torque] = torque * normal(m, 2)


class SliderCrank(Block):
    """Offset slider-crank (seed 004 section 2.3.1) driven at a prescribed crank speed.

    The crank speed is ``omega = omega0 + ripple sin(2 pi f t)`` (seed 004
    section 2.3.1: 12.56 rad/s plus a 2 Hz ripple of 1.256 rad/s), so
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
    ticks (``update`` draws the next sample).  :class:`TorqueSliderCrank`
    is the same mechanism driven by a torque instead (seed 004 section
    3.2.1).

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
    outputs = _plant_outputs(fed=("torque", "torque_meas"))
    params = {**_MOTION, **_GEOMETRY, **_SENSORS}
    dstate = _NOISE
    random_streams = 3

    def configure(self) -> None:
        _geometry_problem(self)

    @staticmethod
    @njit
    def init(x, d, m, p):
        _draw(d, m, p[CRANK.enc_noise], p[CRANK.acc_noise], p[CRANK.torque_noise])

    @staticmethod
    @njit
    def output(t, x, d, m, p, force, theta, omega, alpha, slider_pos, slider_acc, torque,
               theta_meas, acc_meas, torque_meas, kin_meas):
        th, om, al = speed_profile(t, p[CRANK.omega0], p[CRANK.ripple], p[CRANK.ripple_freq],
                                   p[CRANK.theta0])
        c, r, h = p[CRANK.crank], p[CRANK.rod], p[CRANK.offset]
        kin = crank_position(th, c, r, h)
        acc = kin[5] * al + kin[6] * om * om
        tq = crank_torque(th, om, al, force[0], c, r, h, p[CRANK.crank_mass], p[CRANK.rod_mass],
                          p[CRANK.slider_mass], p[CRANK.gravity])
        theta[0] = th
        omega[0] = om
        alpha[0] = al
        slider_pos[0] = kin[4]
        slider_acc[0] = acc
        torque[0] = tq
        theta_meas[0] = th + d[NOISE.n_enc]
        acc_meas[0] = acc + d[NOISE.n_acc]
        torque_meas[0] = tq + d[NOISE.n_torque]
        kin_meas[0] = theta_meas[0]
        kin_meas[1] = acc_meas[0]

    @staticmethod
    @njit
    def update(t, x, d, m, p, force):
        _draw(d, m, p[CRANK.enc_noise], p[CRANK.acc_noise], p[CRANK.torque_noise])


CRANK = SliderCrank.P        # offsets by name


class TorqueSliderCrank(Block):
    """Offset slider-crank in the vertical plane driven by a torque (seed 004 section 3.2.1).

    The forward dynamics of :func:`crank_acceleration`: the crank turns under
    the drive torque ``torque`` (N m) against gravity, inertia and the
    external slider force ``force`` (N, along +x); state ``[theta, omega]``
    integrated by the graph's solver.  Sensors as in the seed: crank
    encoder ``theta + n_e`` (0.003 rad, a 2000 ppr encoder), slider
    accelerometer of sensitivity ``acc_sensitivity`` (6 mV per m/s^2) read
    by a ``adc_bits`` ADC over ``+-adc_range`` V (16 bit, +-10 V: a step of
    0.051 m/s^2 and a full scale of 1667 m/s^2), whose noise ``acc_noise``
    (0.05 m/s^2, the converter's resolution) is added before the converter
    rounds and clips the reading; a torque sensor with noise
    ``torque_noise`` (0.28 N m, 0.35 % of its full scale) clipped at
    ``torque_full_scale`` (80 N m).  Noise is white Gaussian, drawn once per
    tick from three streams seeded by the graph seed and held between
    ticks.  Geometry and masses default to the nominal values of seed 004
    table 3.1.

    Ports
    -----
    torque       : in, (1,), N*m         drive torque on the crank
    force        : in, (1,), N           external force on the slider (+x)
    theta        : out, (1,), rad        crank angle (state only)
    omega        : out, (1,), rad/s      crank speed (state only)
    alpha        : out, (1,), rad/s^2    crank acceleration
    slider_pos   : out, (1,), m          slider position xs (state only)
    slider_acc   : out, (1,), m/s^2      slider acceleration
    theta_meas   : out, (1,), rad        encoder reading (state only)
    acc_meas     : out, (1,), m/s^2      accelerometer reading (through the converter)
    torque_meas  : out, (1,), N*m        torque-sensor reading
    kin_meas     : out, (2,), rad and m/s^2   [theta_meas, acc_meas]
    """

    inputs = {"torque": In(1, unit="N*m", doc="drive torque on the crank"),
              "force": In(1, unit="N", doc="external force on the slider (+x)")}
    outputs = _plant_outputs(fed=("alpha", "slider_acc", "acc_meas", "torque_meas", "kin_meas"),
                             without=("torque",))
    params = {**_GEOMETRY, **_SENSORS,
              "acc_sensitivity": Live(6e-3, unit="V*s^2/m", check=positive,
                                      doc="accelerometer sensitivity"),
              "adc_bits": Live(16, kind="int", check=nonnegative,
                               doc="converter resolution (0: no converter)"),
              "adc_range": Live(10.0, unit="V", check=positive, doc="converter input range +-"),
              "torque_full_scale": Live(80.0, unit="N*m", check=positive,
                                        doc="torque-sensor full scale +-"),
              "theta0": Live(0.0, unit="rad", doc="initial crank angle"),
              "omega0": Live(0.0, unit="rad/s", doc="initial crank speed")}
    derived = {"acc_step": Derived(lambda b: b.acc_resolution(), unit="m/s^2",
                                   doc="converter step in acceleration"),
               "acc_full_scale": Derived(lambda b: b.adc_range / b.acc_sensitivity
                                         if b.adc_bits else 0.0, unit="m/s^2",
                                         doc="converter full scale in acceleration")}
    cstate = ("theta", "omega")
    initial_from = {"theta": "theta0", "omega": "omega0"}
    dstate = _NOISE
    random_streams = 3

    def configure(self) -> None:
        _geometry_problem(self)

    def acc_resolution(self) -> float:
        """The converter's step in m/s^2 (0 without a converter)."""
        if not self.adc_bits:
            return 0.0
        return 2.0 * self.adc_range / 2.0 ** self.adc_bits / self.acc_sensitivity

    @staticmethod
    @njit
    def init(x, d, m, p):
        _draw(d, m, p[DRIVEN.enc_noise], p[DRIVEN.acc_noise], p[DRIVEN.torque_noise])

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, torque, force, dx):
        dx[DRIVEN_X.theta] = x[DRIVEN_X.omega]
        dx[DRIVEN_X.omega] = crank_acceleration(
            x[DRIVEN_X.theta], x[DRIVEN_X.omega], torque[0], force[0], p[DRIVEN.crank],
            p[DRIVEN.rod], p[DRIVEN.offset], p[DRIVEN.crank_mass], p[DRIVEN.rod_mass],
            p[DRIVEN.slider_mass], p[DRIVEN.gravity])

    @staticmethod
    @njit
    def output(t, x, d, m, p, torque, force, theta, omega, alpha, slider_pos, slider_acc,
               theta_meas, acc_meas, torque_meas, kin_meas):
        th, om = x[DRIVEN_X.theta], x[DRIVEN_X.omega]
        c, r, h = p[DRIVEN.crank], p[DRIVEN.rod], p[DRIVEN.offset]
        al = crank_acceleration(th, om, torque[0], force[0], c, r, h, p[DRIVEN.crank_mass],
                                p[DRIVEN.rod_mass], p[DRIVEN.slider_mass], p[DRIVEN.gravity])
        kin = crank_position(th, c, r, h)
        acc = kin[5] * al + kin[6] * om * om
        theta[0] = th
        omega[0] = om
        alpha[0] = al
        slider_pos[0] = kin[4]
        slider_acc[0] = acc
        theta_meas[0] = th + d[NOISE.n_enc]
        acc_meas[0] = converter(acc + d[NOISE.n_acc], p[DRIVEN.acc_step],
                                p[DRIVEN.acc_full_scale])
        torque_meas[0] = converter(torque[0] + d[NOISE.n_torque], 0.0,
                                   p[DRIVEN.torque_full_scale])
        kin_meas[0] = theta_meas[0]
        kin_meas[1] = acc_meas[0]

    @staticmethod
    @njit
    def update(t, x, d, m, p, torque, force):
        _draw(d, m, p[DRIVEN.enc_noise], p[DRIVEN.acc_noise], p[DRIVEN.torque_noise])


DRIVEN, DRIVEN_X = TorqueSliderCrank.P, TorqueSliderCrank.X


class CrankServo(Block):
    """Drive of the :class:`TorqueSliderCrank`: computed-torque feed-forward plus PD tracking.

    The crank follows the speed profile ``omega_r = omega0 + ripple sin(2 pi
    ripple_freq t)`` (:func:`speed_profile`) under the torque::

        T = M alpha_r + C omega_r^2 + G  (at theta_r, geometry and masses given)
            + kp (theta_r - theta) + kd (omega_r - omega),   clipped to +-torque_limit

    The feed-forward knows neither the slider force nor the model errors;
    the PD loop (on the drive's own crank angle and speed) keeps the crank
    near the profile against them.  Why a loop at all: in the vertical plane
    the feed-forward alone is unstable - fed the torque of a 6 rad/s profile
    with an unmodelled 50 N slider force, the crank leaves the profile and
    reaches -26..+27 rad/s within 5 s.

    Ports
    -----
    theta  : in, (1,), rad       crank angle
    omega  : in, (1,), rad/s     crank speed
    torque : out, (1,), N*m      drive torque
    """

    inputs = {"theta": In(1, unit="rad", doc="crank angle"),
              "omega": In(1, unit="rad/s", doc="crank speed")}
    outputs = {"torque": Out(1, unit="N*m", doc="drive torque")}
    params = {**_MOTION, **_GEOMETRY,
              "kp": Live(350.0, unit="N*m/rad", check=nonnegative, doc="angle gain"),
              "kd": Live(22.0, unit="N*m*s/rad", check=nonnegative, doc="speed gain"),
              "torque_limit": Live(80.0, unit="N*m", check=positive,
                                   doc="largest torque the drive applies")}

    def configure(self) -> None:
        _geometry_problem(self)

    @staticmethod
    @njit
    def output(t, x, d, m, p, theta, omega, torque):
        th, om, al = speed_profile(t, p[SERVO.omega0], p[SERVO.ripple], p[SERVO.ripple_freq],
                                   p[SERVO.theta0])
        feed = crank_torque(th, om, al, 0.0, p[SERVO.crank], p[SERVO.rod], p[SERVO.offset],
                            p[SERVO.crank_mass], p[SERVO.rod_mass], p[SERVO.slider_mass],
                            p[SERVO.gravity])
        tq = feed + p[SERVO.kp] * (th - theta[0]) + p[SERVO.kd] * (om - omega[0])
        torque[0] = min(max(tq, -p[SERVO.torque_limit]), p[SERVO.torque_limit])


SERVO = CrankServo.P


def slider_crank_coefficients(block: SliderCrank | TorqueSliderCrank | None = None, **errors: float) -> np.ndarray:
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
