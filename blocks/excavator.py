"""Synthetic excavator arm (boom, stick, bucket) for seed 004's test case II (section 3.2.2).

The thesis takes its excavator signals from a 200-coordinate multibody
simulator of the University of La Coruna, which is not available; this module
reconstructs a planar three-link arm in the vertical plane and documents
every value it assumes (the thesis states only the structure, the sensors
and their noise):

- **Geometry and masses** (a 20 t class excavator, typical published values,
  not the thesis's): boom 5.7 m, 1800 kg, centre of mass 2.6 m from its
  pivot, 4900 kg m^2 about it; stick 2.9 m, 900 kg, 1.2 m, 650 kg m^2;
  bucket 1.5 m from its pin to the tip, 700 kg, 0.6 m along and 0.5 m off
  the pin-tip line (into the bowl, where the payload sits), 130 kg m^2.  Swing
  is neglected, as in the thesis.  Joint coordinates: ``theta1`` the boom's
  angle above the horizontal, ``theta2`` the stick's angle relative to the
  boom, ``theta3`` the bucket's relative to the stick (the encoders'
  ``theta_b``, ``theta_s``, ``theta_bc``).
- **Hydraulic cylinders**: each joint is driven by a cylinder between two
  pins at ``a`` and ``b`` from the joint, the angle between them
  ``psi0 + theta``; its force ``F`` (N, the measured actuation force) gives
  the torque ``F a b sin(psi) / l`` with ``l`` the cylinder's length.
- **Accelerometers** ``a1..a3``: one per link at ``d`` (3.0, 1.5, 0.8 m)
  from its joint, sensitive along the link's normal in the plane, reading
  the specific force (gravity included).
- **Loads**: the soil's force on the bucket tip ``(Fx, Fz)`` and a payload
  mass at the bucket's centre of mass (its weight is the thesis's "payload
  force"); both are inputs (:class:`DiggingCycle` makes a scenario).
- **Sensors** (the thesis's values): encoders 0.0063 rad (a 1000 ppr
  encoder), accelerometers 0.03 m/s^2 (10^-3 V/(m/s^2) into a 16-bit +-10 V
  converter), force sensors 12.3 kN (0.25 % of a 500 t load cell); white
  Gaussian noise, drawn once per tick.

The dynamics (:func:`arm_torques`) is written as the torque each joint's
actuator must apply to produce a given motion under given loads (recursive
moment balance of the links outboard of the joint); the forward dynamics
solves the 3x3 mass matrix built from it.  The same functions are the
observers' models, registered for the library's filters as
``excavator_kinematic`` and ``excavator_force`` (used by
:mod:`hapflow.ident.excavator`).
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

from .estimation_models import Model, register

_ARM = {"boom_length": Live(5.7, unit="m", check=positive, doc="boom pivot to stick pin"),
        "stick_length": Live(2.9, unit="m", check=positive, doc="stick pin to bucket pin"),
        "bucket_length": Live(1.5, unit="m", check=positive, doc="bucket pin to tip"),
        "boom_com": Live(2.6, unit="m", check=nonnegative, doc="boom centre of mass from its pivot"),
        "stick_com": Live(1.2, unit="m", check=nonnegative, doc="stick centre of mass from its pin"),
        "bucket_com": Live(0.6, unit="m", check=nonnegative,
                           doc="bucket (and payload) centre of mass from its pin"),
        "boom_mass": Live(1800.0, unit="kg", check=positive, doc="boom mass"),
        "stick_mass": Live(900.0, unit="kg", check=positive, doc="stick mass"),
        "bucket_mass": Live(700.0, unit="kg", check=positive, doc="empty bucket mass"),
        "boom_inertia": Live(4900.0, unit="kg*m^2", check=nonnegative, doc="boom, about its COM"),
        "stick_inertia": Live(650.0, unit="kg*m^2", check=nonnegative, doc="stick, about its COM"),
        "bucket_inertia": Live(130.0, unit="kg*m^2", check=nonnegative,
                               doc="bucket, about its COM"),
        "gravity": Live(9.81, unit="m/s^2", check=nonnegative, doc="gravity"),
        "boom_acc_pos": Live(3.0, unit="m", check=positive, doc="accelerometer a1 from the pivot"),
        "stick_acc_pos": Live(1.5, unit="m", check=positive, doc="accelerometer a2 from its pin"),
        "bucket_acc_pos": Live(0.8, unit="m", check=positive, doc="accelerometer a3 from its pin"),
        "boom_pin_a": Live(1.2, unit="m", check=positive, doc="boom cylinder: pin on the frame"),
        "boom_pin_b": Live(2.6, unit="m", check=positive, doc="boom cylinder: pin on the boom"),
        "boom_psi0": Live(1.0, unit="rad", doc="boom cylinder: pin angle at theta1 = 0"),
        "stick_pin_a": Live(0.9, unit="m", check=positive, doc="stick cylinder: pin on the boom"),
        "stick_pin_b": Live(2.2, unit="m", check=positive, doc="stick cylinder: pin on the stick"),
        "stick_psi0": Live(3.3, unit="rad", doc="stick cylinder: pin angle at theta2 = 0"),
        "bucket_pin_a": Live(0.6, unit="m", check=positive, doc="bucket cylinder: pin on the stick"),
        "bucket_pin_b": Live(1.2, unit="m", check=positive,
                             doc="bucket cylinder: pin on the linkage"),
        "bucket_psi0": Live(2.4, unit="rad", doc="bucket cylinder: pin angle at theta3 = 0"),
        "bucket_com_offset": Live(0.5, unit="m",
                                  doc="bucket (and payload) centre of mass off the pin-tip "
                                      "line, towards the bowl")}


ARM_PARAMETERS = tuple(_ARM)
"""The arm's values in the order the kernels read them: ``arm[o + AT.boom_length]`` reads
the boom's length from a vector with the arm's values from ``arm[o]`` on."""
AT = offsets("Arm", [(name, 1) for name in ARM_PARAMETERS])
"""Offset of each arm value from the first (the kernels' ``o``), by name."""
LINKS = ("boom", "stick", "bucket")
LENGTHS = tuple(getattr(AT, f"{link}_length") for link in LINKS)
"""Offsets of the links' lengths (joint to the next joint, or to the tip), boom first."""
ACCELEROMETERS = tuple(getattr(AT, f"{link}_acc_pos") for link in LINKS)
"""Offsets of the accelerometers' distances from their joints, boom first."""
CYLINDERS = tuple((getattr(AT, f"{link}_pin_a"), getattr(AT, f"{link}_pin_b"),
                   getattr(AT, f"{link}_psi0")) for link in LINKS)
"""Offsets of each cylinder's pins ``a``, ``b`` and angle ``psi0``, boom first."""

_START = {f"{link}0": Live(value, unit="rad", doc=f"initial {link} angle")
          for link, value in (("boom", 0.4), ("stick", -1.6), ("bucket", -0.9))}


def arm_values(**overrides: float) -> np.ndarray:
    """The arm's values (defaults, with ``overrides``) in :data:`ARM_PARAMETERS` order."""
    unknown = set(overrides) - set(ARM_PARAMETERS)
    if unknown:
        raise ValueError(f"unknown arm values {sorted(unknown)}; valid: {', '.join(ARM_PARAMETERS)}")
    return np.array([float(overrides.get(k, _ARM[k].default)) for k in ARM_PARAMETERS])


@njit_noalloc
def moment_arm(arm, o, j, theta):
    """Lever (m) of cylinder ``j`` at joint angle ``theta``: ``a b sin(psi) / l``."""
    pin_a, pin_b, psi0 = CYLINDERS[j]
    a, b = arm[o + pin_a], arm[o + pin_b]
    psi = arm[o + psi0] + theta
    return a * b * math.sin(psi) / math.sqrt(a * a + b * b - 2.0 * a * b * math.cos(psi))


@njit_noalloc
def _moment(px, pz, fx, fz, jx, jz):
    """Moment about ``(jx, jz)`` of a force ``(fx, fz)`` at ``(px, pz)`` (planar cross product)."""
    return (px - jx) * fz - (pz - jz) * fx


@njit_noalloc
def arm_torques(arm, o, th, om, al, fx, fz, payload, g):
    """Joint torques (N m) that give accelerations ``al`` at ``(th, om)`` under a soil force
    ``(fx, fz)`` on the bucket tip and a payload mass at the bucket's centre of mass.

    Moment balance about each joint of the links outboard of it:
    ``tau_i = sum_k>=i [(c_k - j_i-1) x m_k (a_k + g z) + I_k phi_k''] - (tip - j_i-1) x F``.
    ``g`` is passed separately (0 for the mass matrix)."""
    p1 = th[0]
    p2 = p1 + th[1]
    p3 = p2 + th[2]
    w1 = om[0]
    w2 = w1 + om[1]
    w3 = w2 + om[2]
    e1 = al[0]
    e2 = e1 + al[1]
    e3 = e2 + al[2]
    c1, s1, c2, s2, c3, s3 = math.cos(p1), math.sin(p1), math.cos(p2), math.sin(p2), \
        math.cos(p3), math.sin(p3)
    len1, len2, len3 = arm[o + AT.boom_length], arm[o + AT.stick_length], \
        arm[o + AT.bucket_length]
    com1, com2, com3 = arm[o + AT.boom_com], arm[o + AT.stick_com], arm[o + AT.bucket_com]
    off3 = arm[o + AT.bucket_com_offset]
    # joint positions (j0 = 0) and accelerations
    j1x, j1z = len1 * c1, len1 * s1
    j2x, j2z = j1x + len2 * c2, j1z + len2 * s2
    tx, tz = j2x + len3 * c3, j2z + len3 * s3
    a1x = len1 * (-e1 * s1 - w1 * w1 * c1)
    a1z = len1 * (e1 * c1 - w1 * w1 * s1)
    a2x = a1x + len2 * (-e2 * s2 - w2 * w2 * c2)
    a2z = a1z + len2 * (e2 * c2 - w2 * w2 * s2)
    # centres of mass: positions and accelerations
    k1x, k1z = com1 * c1, com1 * s1
    k2x, k2z = j1x + com2 * c2, j1z + com2 * s2
    k3x = j2x + com3 * c3 - off3 * s3
    k3z = j2z + com3 * s3 + off3 * c3
    b1x = com1 * (-e1 * s1 - w1 * w1 * c1)
    b1z = com1 * (e1 * c1 - w1 * w1 * s1)
    b2x = a1x + com2 * (-e2 * s2 - w2 * w2 * c2)
    b2z = a1z + com2 * (e2 * c2 - w2 * w2 * s2)
    b3x = a2x + com3 * (-e3 * s3 - w3 * w3 * c3) + off3 * (-e3 * c3 + w3 * w3 * s3)
    b3z = a2z + com3 * (e3 * c3 - w3 * w3 * s3) + off3 * (-e3 * s3 - w3 * w3 * c3)
    m1, m2, m3 = arm[o + AT.boom_mass], arm[o + AT.stick_mass], arm[o + AT.bucket_mass] + payload
    f1x, f1z = m1 * b1x, m1 * (b1z + g)         # force each body needs: m (a + g z)
    f2x, f2z = m2 * b2x, m2 * (b2z + g)
    f3x, f3z = m3 * b3x, m3 * (b3z + g)
    q1 = arm[o + AT.boom_inertia] * e1
    q2 = arm[o + AT.stick_inertia] * e2
    q3 = arm[o + AT.bucket_inertia] * e3
    # the soil's force acts on the bucket: the actuators supply the opposite moment
    t3 = _moment(k3x, k3z, f3x, f3z, j2x, j2z) + q3 - _moment(tx, tz, fx, fz, j2x, j2z)
    t2 = (_moment(k2x, k2z, f2x, f2z, j1x, j1z) + q2 + _moment(k3x, k3z, f3x, f3z, j1x, j1z) + q3
          - _moment(tx, tz, fx, fz, j1x, j1z))
    t1 = (_moment(k1x, k1z, f1x, f1z, 0.0, 0.0) + q1 + _moment(k2x, k2z, f2x, f2z, 0.0, 0.0) + q2
          + _moment(k3x, k3z, f3x, f3z, 0.0, 0.0) + q3 - _moment(tx, tz, fx, fz, 0.0, 0.0))
    return t1, t2, t3


@njit
def arm_accelerations(arm, o, th, om, tau, fx, fz, payload):
    """Forward dynamics: joint accelerations under joint torques ``tau`` (3x3 solve)."""
    zero = np.zeros(3)
    h = arm_torques(arm, o, th, om, zero, fx, fz, payload, arm[o + AT.gravity])
    mm = np.empty((3, 3))
    unit = np.zeros(3)
    for j in range(3):
        unit[:] = 0.0
        unit[j] = 1.0
        col = arm_torques(arm, o, th, zero, unit, 0.0, 0.0, payload, 0.0)
        for i in range(3):
            mm[i, j] = col[i]
    return _solve3(mm, tau[0] - h[0], tau[1] - h[1], tau[2] - h[2])


@njit
def _solve3(a, r0, r1, r2):
    """``a^-1 r`` for a 3x3 matrix by Cramer's rule (the arm's mass matrix is well conditioned)."""
    c00 = a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1]
    c01 = a[1, 2] * a[2, 0] - a[1, 0] * a[2, 2]
    c02 = a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]
    det = a[0, 0] * c00 + a[0, 1] * c01 + a[0, 2] * c02
    out = np.empty(3)
    out[0] = (r0 * c00 + r1 * (a[0, 2] * a[2, 1] - a[0, 1] * a[2, 2])
              + r2 * (a[0, 1] * a[1, 2] - a[0, 2] * a[1, 1])) / det
    out[1] = (r0 * c01 + r1 * (a[0, 0] * a[2, 2] - a[0, 2] * a[2, 0])
              + r2 * (a[0, 2] * a[1, 0] - a[0, 0] * a[1, 2])) / det
    out[2] = (r0 * c02 + r1 * (a[0, 1] * a[2, 0] - a[0, 0] * a[2, 1])
              + r2 * (a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0])) / det
    return out


@njit_noalloc
def accelerometer_readings(arm, o, th, om, al, out):
    """Specific force (m/s^2) along each link's normal at the accelerometers ``d1..d3``:
    ``a_k = a(j_k-1) . n_k + d_k phi_k'' + g cos(phi_k)``."""
    phi = 0.0
    w = 0.0
    e = 0.0
    jx = 0.0                                    # acceleration of the link's joint
    jz = 0.0
    for k in range(3):
        phi += th[k]
        w += om[k]
        e += al[k]
        c, s = math.cos(phi), math.sin(phi)
        out[k] = -jx * s + jz * c + arm[o + ACCELEROMETERS[k]] * e + arm[o + AT.gravity] * c
        length = arm[o + LENGTHS[k]]
        jx += length * (-e * s - w * w * c)
        jz += length * (e * c - w * w * s)


@njit_noalloc
def accelerations_from_readings(arm, o, th, om, readings, out):
    """Joint accelerations from the three accelerometer readings: the inverse of
    :func:`accelerometer_readings` (forward substitution link by link; ``d_k > 0``, so it
    has no singular configuration)."""
    phi = 0.0
    w = 0.0
    e = 0.0
    jx = 0.0
    jz = 0.0
    prev = 0.0
    for k in range(3):
        phi += th[k]
        w += om[k]
        c, s = math.cos(phi), math.sin(phi)
        e = (readings[k] - arm[o + AT.gravity] * c - (-jx * s + jz * c)) \
            / arm[o + ACCELEROMETERS[k]]
        out[k] = e - prev
        prev = e
        length = arm[o + LENGTHS[k]]
        jx += length * (-e * s - w * w * c)
        jz += length * (e * c - w * w * s)


class ExcavatorArm(Block):
    """Planar boom-stick-bucket arm driven by three hydraulic cylinders (seed 004 section 3.2.2).

    State ``[theta1..3, omega1..3]`` (joint angles and speeds, see the module
    docstring for the geometry), integrated by the graph's solver under the
    cylinder forces ``force``, the soil's force ``(Fx, Fz)`` on the bucket
    tip (``digging``) and a payload mass in the bucket.  Sensor outputs carry
    white Gaussian noise (three streams, drawn once per tick): encoders
    ``enc_noise``, accelerometers ``acc_noise``, cylinder force sensors
    ``force_noise``.

    Ports
    -----
    force       : in, (3,), N          boom, stick and bucket cylinder forces
    digging     : in, (2,), N          soil force on the bucket tip (x forward, z up)
    payload     : in, (1,), kg         payload mass in the bucket
    theta       : out, (3,), rad       joint angles (state only)
    omega       : out, (3,), rad/s     joint speeds (state only)
    alpha       : out, (3,), rad/s^2   joint accelerations
    tip         : out, (2,), m         bucket tip position (state only)
    accel       : out, (3,), m/s^2     accelerometer signals a1..a3, noise-free
    theta_meas  : out, (3,), rad       encoder readings (state only)
    accel_meas  : out, (3,), m/s^2     accelerometer readings
    force_meas  : out, (3,), N         cylinder force-sensor readings
    """

    inputs = {"force": In(3, unit="N", doc="cylinder forces"),
              "digging": In(2, unit="N", doc="soil force on the bucket tip"),
              "payload": In(1, unit="kg", doc="payload mass")}
    outputs = {"theta": Out(3, unit="rad", depends="state", doc="joint angles"),
               "omega": Out(3, unit="rad/s", depends="state", doc="joint speeds"),
               "alpha": Out(3, unit="rad/s^2", doc="joint accelerations"),
               "tip": Out(2, unit="m", depends="state", doc="bucket tip position"),
               "accel": Out(3, unit="m/s^2", doc="accelerometer signals"),
               "theta_meas": Out(3, unit="rad", depends="state", doc="encoder readings"),
               "accel_meas": Out(3, unit="m/s^2", doc="accelerometer readings"),
               "force_meas": Out(3, unit="N", depends=("force",), doc="force-sensor readings")}
    params = {**_ARM,
              "enc_noise": Live(0.0063, unit="rad", check=nonnegative, doc="encoder noise (std)"),
              "acc_noise": Live(0.03, unit="m/s^2", check=nonnegative,
                                doc="accelerometer noise (std)"),
              "force_noise": Live(12.3e3, unit="N", check=nonnegative,
                                  doc="force-sensor noise (std)"),
              **_START}
    cstate = ("th1", "th2", "th3", "om1", "om2", "om3")
    dstate = ("n_enc1", "n_enc2", "n_enc3", "n_acc1", "n_acc2", "n_acc3", "n_f1", "n_f2", "n_f3")
    initial_from = {"th1": "boom0", "th2": "stick0", "th3": "bucket0"}
    random_streams = 3
    position_states = (0, 1, 2)

    @staticmethod
    @njit
    def init(x, d, m, p):
        _draw(d, m, p)

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, force, digging, payload, dx):
        o = ARM.boom_length
        th, om = x[ARM_X.th1:ARM_X.th3 + 1], x[ARM_X.om1:ARM_X.om3 + 1]
        tau = np.empty(3)
        for j in range(3):
            dx[ARM_X.th1 + j] = om[j]
            tau[j] = force[j] * moment_arm(p, o, j, th[j])
        al = arm_accelerations(p, o, th, om, tau, digging[0], digging[1], payload[0])
        for j in range(3):
            dx[ARM_X.om1 + j] = al[j]

    @staticmethod
    @njit
    def output(t, x, d, m, p, force, digging, payload, theta, omega, alpha, tip, accel,
               theta_meas, accel_meas, force_meas):
        o = ARM.boom_length
        th, om = x[ARM_X.th1:ARM_X.th3 + 1], x[ARM_X.om1:ARM_X.om3 + 1]
        tau = np.empty(3)
        for j in range(3):
            tau[j] = force[j] * moment_arm(p, o, j, th[j])
        al = arm_accelerations(p, o, th, om, tau, digging[0], digging[1], payload[0])
        accelerometer_readings(p, o, th, om, al, accel)
        phi = 0.0
        tip[0] = 0.0
        tip[1] = 0.0
        for j in range(3):
            theta[j] = th[j]
            omega[j] = om[j]
            alpha[j] = al[j]
            phi += th[j]
            tip[0] += p[o + LENGTHS[j]] * math.cos(phi)
            tip[1] += p[o + LENGTHS[j]] * math.sin(phi)
            theta_meas[j] = th[j] + d[ARM_D.n_enc1 + j]
            accel_meas[j] = accel[j] + d[ARM_D.n_acc1 + j]
            force_meas[j] = force[j] + d[ARM_D.n_f1 + j]

    @staticmethod
    @njit
    def update(t, x, d, m, p, force, digging, payload):
        _draw(d, m, p)


@njit
def _draw(d, m, p):
    for j in range(3):
        d[ARM_D.n_enc1 + j] = p[ARM.enc_noise] * normal(m, 0)
        d[ARM_D.n_acc1 + j] = p[ARM.acc_noise] * normal(m, 1)
        d[ARM_D.n_f1 + j] = p[ARM.force_noise] * normal(m, 2)


ARM, ARM_X, ARM_D = ExcavatorArm.P, ExcavatorArm.X, ExcavatorArm.D


def _step(block: Block) -> float:
    """The block's step (s); its discrete filters need the graph's rate."""
    if block.sample_time is None:
        raise ParamError("period" if isinstance(block, DiggingCycle) else "bandwidth",
                         "needs the graph's rate (add the block to a graph)")
    return block.sample_time


@njit
def _cycle_weight(phase, start, end):
    """Raised-cosine bump over ``[start, end]`` of the cycle's phase in [0, 1), else 0."""
    if phase <= start or phase >= end:
        return 0.0
    return 0.5 - 0.5 * math.cos(2.0 * math.pi * (phase - start) / (end - start))


@njit
def _smoothstep(phase, start, end):
    """0 before ``start``, 1 after ``end``, a raised-cosine ramp in between."""
    if phase <= start:
        return 0.0
    if phase >= end:
        return 1.0
    return 0.5 - 0.5 * math.cos(math.pi * (phase - start) / (end - start))


class DiggingCycle(Block):
    """A repeated digging cycle for :class:`ExcavatorArm`: joint references and the soil's loads.

    Assumed (the thesis's time histories are lost): each joint follows
    ``mean + swing sin(2 pi t / period + phase)`` (a 10 s cycle, the
    boom 0.4 +- 0.25 rad, the stick -1.6 +- 0.45 rad, the bucket -0.9 +-
    0.6 rad).  During the digging window of each cycle (``dig_start`` to
    ``dig_end``, fractions of the period) the soil pushes on the bucket tip
    with ``(fx, fz)`` shaped by a raised cosine and roughened by
    ``irregularity`` (relative) of white noise through a first-order 10 Hz
    low-pass: the band the thesis's force observer assumes.  The payload
    mass ramps up to ``payload_mass`` over the digging window and drops to
    zero over the dump (``dump_start`` to ``dump_end``).

    Ports
    -----
    ref      : out, (3,), rad       joint angle references
    ref_vel  : out, (3,), rad/s     their derivatives
    ref_acc  : out, (3,), rad/s^2   their second derivatives
    digging  : out, (2,), N         soil force on the bucket tip (state only)
    payload  : out, (1,), kg        payload mass
    """

    outputs = {"ref": Out(3, unit="rad", doc="joint angle references"),
               "ref_vel": Out(3, unit="rad/s", doc="reference speeds"),
               "ref_acc": Out(3, unit="rad/s^2", doc="reference accelerations"),
               "digging": Out(2, unit="N", depends="state", doc="soil force on the bucket tip"),
               "payload": Out(1, unit="kg", doc="payload mass")}
    params = {"period": Live(10.0, unit="s", check=positive, doc="cycle period"),
              **{f"{link}_{what}": Live(value, unit="rad", doc=f"{link}: {text}")
                 for link, values in (("boom", (0.4, 0.25, 0.0)), ("stick", (-1.6, 0.45, 1.6)),
                                      ("bucket", (-0.9, 0.6, 2.6)))
                 for what, value, text in zip(("mean", "swing", "phase"), values,
                                              ("mean angle", "amplitude", "phase"))},
              "fx": Live(25e3, unit="N", doc="peak soil force on the tip, x"),
              "fz": Live(10e3, unit="N", doc="peak soil force on the tip, z"),
              "irregularity": Live(0.15, check=nonnegative,
                                   doc="relative std of the soil force's 10 Hz roughness"),
              "roughness_band": Live(10.0, unit="Hz", check=positive,
                                     doc="corner of the roughness low-pass"),
              "dig_start": Live(0.15, check=nonnegative, doc="digging starts (cycle fraction)"),
              "dig_end": Live(0.45, check=positive, doc="digging ends (cycle fraction)"),
              "dump_start": Live(0.7, check=positive, doc="dump starts (cycle fraction)"),
              "dump_end": Live(0.8, check=positive, doc="dump ends (cycle fraction)"),
              "payload_mass": Live(1500.0, unit="kg", check=nonnegative, doc="full bucket")}
    derived = {"pole": Derived(lambda b: math.exp(-2.0 * math.pi * b.roughness_band * _step(b)),
                               doc="roughness low-pass pole per tick"),
               "drive": Derived(lambda b: math.sqrt(1.0 - math.exp(-4.0 * math.pi
                                                             * b.roughness_band * _step(b))),
                                doc="input scale giving the roughness unit variance"),
               "tick": Derived(lambda b: _step(b), unit="s", doc="the block's step")}
    dstate = ("rough_x", "rough_z", "fx_now", "fz_now")
    random_streams = 1

    @staticmethod
    @njit
    def output(t, x, d, m, p, ref, ref_vel, ref_acc, digging, payload):
        w = 2.0 * math.pi / p[CYCLE.period]
        for j in range(3):
            arg = w * t + p[CYCLE_PHASE[j]]
            a = p[CYCLE_SWING[j]]
            ref[j] = p[CYCLE_MEAN[j]] + a * math.sin(arg)
            ref_vel[j] = a * w * math.cos(arg)
            ref_acc[j] = -a * w * w * math.sin(arg)
        digging[0] = d[CYCLE_D.fx_now]
        digging[1] = d[CYCLE_D.fz_now]
        phase = (t / p[CYCLE.period]) % 1.0
        full = _smoothstep(phase, p[CYCLE.dig_start], p[CYCLE.dig_end])
        empty = _smoothstep(phase, p[CYCLE.dump_start], p[CYCLE.dump_end])
        payload[0] = p[CYCLE.payload_mass] * full * (1.0 - empty)

    @staticmethod
    @njit
    def update(t, x, d, m, p):
        a, b = p[CYCLE.pole], p[CYCLE.drive]
        d[CYCLE_D.rough_x] = a * d[CYCLE_D.rough_x] + b * normal(m, 0)
        d[CYCLE_D.rough_z] = a * d[CYCLE_D.rough_z] + b * normal(m, 0)
        tn = t + p[CYCLE.tick]           # the force held over the next tick
        bump = _cycle_weight((tn / p[CYCLE.period]) % 1.0, p[CYCLE.dig_start], p[CYCLE.dig_end])
        k = p[CYCLE.irregularity]
        d[CYCLE_D.fx_now] = p[CYCLE.fx] * bump * (1.0 + k * d[CYCLE_D.rough_x])
        d[CYCLE_D.fz_now] = p[CYCLE.fz] * bump * (1.0 + k * d[CYCLE_D.rough_z])


class ExcavatorServo(Block):
    """Operator and hydraulics of the :class:`ExcavatorArm`: computed torque, cylinder lag.

    The cylinders follow the references with a PID law on a nominal model of
    the arm (this block's own arm values; it knows neither the payload nor
    the soil's force, which the integral takes up)::

        v = ref_acc + kp e + kd e' + ki int(e),   e = ref - theta
        tau = M(theta) v + h(theta, omega),   F_cmd = tau / r(theta)
        kp = 3 w^2,  kd = 3 w,  ki = w^3,  w = 2 pi f     (a triple pole at -w)

    and the cylinder forces lag the command by a first-order ``bandwidth``
    (excavators' actuators are slow: the thesis's fig. 3.12), updated every
    tick and held.  They start holding the arm still at its initial angles.

    Ports
    -----
    theta    : in, (3,), rad       joint angles
    omega    : in, (3,), rad/s     joint speeds
    ref      : in, (3,), rad       references
    ref_vel  : in, (3,), rad/s     reference speeds
    ref_acc  : in, (3,), rad/s^2   reference accelerations
    force    : out, (3,), N        cylinder forces (state only)
    """

    inputs = {"theta": In(3, unit="rad", doc="joint angles"),
              "omega": In(3, unit="rad/s", doc="joint speeds"),
              "ref": In(3, unit="rad", doc="references"),
              "ref_vel": In(3, unit="rad/s", doc="reference speeds"),
              "ref_acc": In(3, unit="rad/s^2", doc="reference accelerations")}
    outputs = {"force": Out(3, unit="N", depends="state", doc="cylinder forces")}
    params = {**_ARM,
              **_START,
              "frequency": Live(2.0, unit="Hz", check=positive, doc="tracking bandwidth f"),
              "bandwidth": Live(10.0, unit="Hz", check=positive, doc="cylinder force lag")}
    derived = {"lag": Derived(lambda b: 1.0 - math.exp(-2.0 * math.pi * b.bandwidth * _step(b)),
                              doc="first-order lag step per tick"),
               "tick": Derived(lambda b: _step(b), unit="s", doc="the block's step")}
    dstate = ("f1", "f2", "f3", "i1", "i2", "i3")
    initial_depends = (*ARM_PARAMETERS, *_START)

    def initial_state(self):
        """The cylinders start holding the arm still at ``boom0, stick0, bucket0``."""
        x, d, m = super().initial_state()
        arm = arm_values(**{k: self.values[k] for k in ARM_PARAMETERS})
        th = np.array([self.values[k] for k in _START])
        tau = arm_torques(arm, 0, th, np.zeros(3), np.zeros(3), 0.0, 0.0, 0.0, arm[AT.gravity])
        for j in range(3):
            d[self.D.f1 + j] = tau[j] / moment_arm(arm, 0, j, th[j])
        return x, d, m

    @staticmethod
    @njit
    def output(t, x, d, m, p, theta, omega, ref, ref_vel, ref_acc, force):
        for j in range(3):
            force[j] = d[SERVO_D.f1 + j]

    @staticmethod
    @njit
    def update(t, x, d, m, p, theta, omega, ref, ref_vel, ref_acc):
        o = SERVO.boom_length
        w = 2.0 * math.pi * p[SERVO.frequency]
        v = np.empty(3)
        for j in range(3):
            e = ref[j] - theta[j]
            d[SERVO_D.i1 + j] += e * p[SERVO.tick]
            v[j] = ref_acc[j] + 3.0 * w * w * e + 3.0 * w * (ref_vel[j] - omega[j]) \
                + w * w * w * d[SERVO_D.i1 + j]
        tau = arm_torques(p, o, theta, omega, v, 0.0, 0.0, 0.0, p[SERVO.gravity])
        for j in range(3):
            command = tau[j] / moment_arm(p, o, j, theta[j])
            d[SERVO_D.f1 + j] += p[SERVO.lag] * (command - d[SERVO_D.f1 + j])


CYCLE, CYCLE_D = DiggingCycle.P, DiggingCycle.D
CYCLE_MEAN, CYCLE_SWING, CYCLE_PHASE = (tuple(getattr(CYCLE, f"{link}_{what}") for link in LINKS)
                                        for what in ("mean", "swing", "phase"))
"""Offsets of each link's reference mean, swing and phase, boom first."""
SERVO, SERVO_D = ExcavatorServo.P, ExcavatorServo.D


# ------------------------------------------------------------------ observers' models
ARM_COEFFS = tuple((name, _ARM[name].unit, _ARM[name].default) for name in ARM_PARAMETERS)
"""The arm's values as estimation-model coefficients (name, unit, default), in kernel order."""
KINEMATIC_COEFFS = ARM_COEFFS + (("beta", "1", 0.25), ("gamma", "1", 0.5))
FORCE_COEFFS = ARM_COEFFS + (("cutoff", "Hz", 10.0),)
KINEMATIC = offsets("KinematicCoeffs", [(name, 1) for name, _, _ in KINEMATIC_COEFFS])
FORCE = offsets("ForceCoeffs", [(name, 1) for name, _, _ in FORCE_COEFFS])
"""Offsets of the observers' coefficients from the first (``pc``), by name."""


@njit_noalloc(forceinline=True)
def _kinematic_f(s, so, out, oo, p, pc, u, dt, mode, w):
    """Newmark's prediction merged with the accelerometer constraint (see
    :mod:`hapflow.ident.excavator`): ``[theta, theta', theta'']`` one sample ahead, the new
    accelerations those the readings ``u`` give at the kinematically predicted state."""
    beta, gamma = p[pc + KINEMATIC.beta], p[pc + KINEMATIC.gamma]
    for j in range(3):
        out[oo + j] = s[so + j] + dt * s[so + 3 + j] + 0.5 * dt * dt * s[so + 6 + j]
        out[oo + 3 + j] = s[so + 3 + j] + dt * s[so + 6 + j]
    accelerations_from_readings(p, pc, out[oo:oo + 3], out[oo + 3:oo + 6], u,
                                out[oo + 6:oo + 9])
    for j in range(3):
        th, om, al, a_new = s[so + j], s[so + 3 + j], s[so + 6 + j], out[oo + 6 + j]
        out[oo + j] = th + dt * om + dt * dt * ((0.5 - beta) * al + beta * a_new)
        out[oo + 3 + j] = om + dt * ((1.0 - gamma) * al + gamma * a_new)


@njit_noalloc(forceinline=True)
def _force_f(s, so, out, oo, p, pc, u, dt, mode, w):
    """Cylinder forces by the inverse dynamics at the kinematic estimate ``u`` under the
    predicted loads; soil force a low-pass of the random walk ``(wx, wz)``; payload held."""
    lp = 1.0 - math.exp(-2.0 * math.pi * p[pc + FORCE.cutoff] * dt)
    for j in range(3, 5):
        out[oo + j] = s[so + j] + lp * (s[so + j + 2] - s[so + j])
    for j in range(5, 8):
        out[oo + j] = s[so + j]
    tau = arm_torques(p, pc, u[0:3], u[3:6], u[6:9], out[oo + 3], out[oo + 4], out[oo + 7],
                      p[pc + AT.gravity])
    for j in range(3):
        out[oo + j] = tau[j] / moment_arm(p, pc, j, u[j])


def _arm_check(v) -> str | None:
    lengths = [float(v[at]) for at in LENGTHS]
    return None if min(lengths) > 0.0 else f"link lengths must be > 0 m, got {lengths}"


register("excavator_kinematic", Model(
    9, 3, 3, KINEMATIC_COEFFS, False,
    "excavator kinematic observer [theta, theta', theta''] of the three joints, u = the "
    "accelerometers, z = the encoders (Newmark prediction with the accelerometer constraint)",
    f=_kinematic_f, check=_arm_check))
register("excavator_force", Model(
    8, 3, 9, FORCE_COEFFS, False,
    "excavator force observer [F1, F2, F3, Fx, Fz, wx, wz, m_p], u = the kinematic "
    "estimate, z = the cylinder forces (soil force a low-passed random walk)",
    f=_force_f, check=_arm_check))
