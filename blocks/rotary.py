"""Rotary machines: a brushed DC motor with a gearbox, and the loads it turns (SI units)."""
from __future__ import annotations

from hapflow import kmath
from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, between, nonnegative, positive
from hapflow.ports import In, Out

STIFF_STEP = 2.0
"""Largest electrical pole times sample time, ``R / L Ts``, accepted: explicit solvers
(RK4, semi-implicit Euler on the current) lose stability near it."""


def _electrical_pole(motor: DCMotor) -> float:
    """``R / L`` (1/s), refused when the graph's step cannot follow it."""
    pole = motor.resistance / motor.inductance
    if pole * motor.sample_time > STIFF_STEP:
        raise ParamError("inductance", f"parameter 'inductance' ({motor.inductance:g} H) with "
                         f"resistance {motor.resistance:g} ohm gives an electrical time constant "
                         f"L/R = {1.0 / pole:.3g} s, too short for the step of "
                         f"{motor.sample_time:.3g} s: run the graph at a rate of at least "
                         f"{pole / STIFF_STEP:.0f} Hz")
    return pole


class DCMotor(Block):
    """Brushed DC motor with armature inductance, friction and a gearbox, driven by a voltage.

    The armature circuit and the shaft, with the gearbox's output as the
    reference (``N`` motor turns per output turn, efficiency ``eta``: the
    motor's torque reaches the output multiplied by ``eta N``, the
    output's motion reaches the motor multiplied by ``N``)::

        L di/dt  = voltage - R i - Ke N w
        J_eq dw/dt = eta N Kt i - eta N^2 b w - eta N Tc tanh(N w / w_c) - load_torque
        dtheta/dt = w,     J_eq = load_inertia + eta N^2 J

    ``i`` the armature current, ``theta`` and ``w`` the output shaft's
    angle and speed, ``J`` the rotor inertia, ``b`` its viscous friction,
    ``Tc`` its Coulomb friction smoothed by ``tanh`` over ``w_c``
    (``friction_speed``, at the motor).  A rigidly attached load adds its
    inertia as ``load_inertia``; what else it pushes back with (springs,
    friction, gravity: a :class:`RotaryLoad`) enters as ``load_torque``, an
    optional input (0 when unwired).  ``eta`` applies as in a gearbox that
    the motor drives (power from motor to load), in both directions of motion.

    Under a constant voltage ``V`` with no friction or load the speed settles
    at ``w = eta N Kt V / (eta N^2 (Kt Ke + R b))`` (the no-load speed over
    ``N`` when ``b = 0``), through the two poles of the ``(i, w)`` system.

    Defaults: a plausible 150 W brushed motor (1 ohm, 0.3 mH, 0.06 N m/A,
    14 g cm^2, 5 mN m friction), no gearbox.  The graph's rate must resolve
    the electrical time constant ``L/R``: ``R/L Ts <= 2`` is checked at load.

    Ports
    -----
    voltage     : in, (1,), V          armature voltage
    load_torque : in, (1,), N m        torque of the load against the output shaft (optional, 0)
    angle       : out, (1,), rad       output shaft angle (state only)
    speed       : out, (1,), rad/s     output shaft speed (state only)
    current     : out, (1,), A         armature current (state only)
    torque      : out, (1,), N m       drive torque at the output, eta N Kt i (state only)
    """

    inputs = {"voltage": In(1, unit="V", doc="armature voltage"),
              "load_torque": In(1, unit="N m", optional=True,
                                doc="torque of the load against the output shaft")}
    outputs = {"angle": Out(1, unit="rad", depends="state", doc="output shaft angle"),
               "speed": Out(1, unit="rad/s", depends="state", doc="output shaft speed"),
               "current": Out(1, unit="A", depends="state", doc="armature current"),
               "torque": Out(1, unit="N m", depends="state", doc="drive torque at the output")}
    params = {"resistance": Live(1.0, unit="ohm", check=positive, doc="armature resistance R"),
              "inductance": Live(3e-4, unit="H", check=positive, doc="armature inductance L"),
              "torque_constant": Live(0.06, unit="N m/A", check=positive, doc="Kt"),
              "emf_constant": Live(0.06, unit="V s/rad", check=nonnegative, doc="back-EMF Ke"),
              "inertia": Live(1.4e-5, unit="kg m^2", check=positive, doc="rotor inertia J"),
              "damping": Live(0.0, unit="N m s/rad", check=nonnegative,
                              doc="viscous friction b at the motor"),
              "friction": Live(0.005, unit="N m", check=nonnegative,
                               doc="Coulomb friction Tc at the motor"),
              "friction_speed": Live(0.1, unit="rad/s", check=positive,
                                     doc="speed scale w_c of tanh in the Coulomb friction"),
              "gear_ratio": Live(1.0, check=positive, doc="motor turns per output turn N"),
              "efficiency": Live(1.0, check=between(1e-3, 1.0), doc="gearbox efficiency eta"),
              "load_inertia": Live(0.0, unit="kg m^2", check=nonnegative,
                                   doc="inertia rigidly attached to the output shaft"),
              "angle0": Live(0.0, unit="rad", doc="initial output angle")}
    derived = {"inertia_eq": Derived(lambda b: b.load_inertia + b.efficiency * b.gear_ratio ** 2
                                     * b.inertia, unit="kg m^2", doc="J_eq at the output"),
               "drive": Derived(lambda b: b.efficiency * b.gear_ratio * b.torque_constant,
                                unit="N m/A", doc="eta N Kt"),
               "viscous": Derived(lambda b: b.efficiency * b.gear_ratio ** 2 * b.damping,
                                  unit="N m s/rad", doc="eta N^2 b"),
               "coulomb": Derived(lambda b: b.efficiency * b.gear_ratio * b.friction,
                                  unit="N m", doc="eta N Tc"),
               "emf": Derived(lambda b: b.emf_constant * b.gear_ratio, unit="V s/rad",
                              doc="Ke N"),
               "electrical": Derived(_electrical_pole, unit="1/s", doc="R / L")}
    cstate = ("current", "angle", "speed")
    initial_from = {"angle": "angle0"}
    position_states = (1,)

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, voltage, load_torque, dx):
        i, w = x[MOTOR_X.current], x[MOTOR_X.speed]
        dx[MOTOR_X.current] = (voltage[0] - p[MOTOR.resistance] * i - p[MOTOR.emf] * w) \
            / p[MOTOR.inductance]
        dx[MOTOR_X.angle] = w
        friction = p[MOTOR.coulomb] * kmath.tanh(p[MOTOR.gear_ratio] * w / p[MOTOR.friction_speed])
        dx[MOTOR_X.speed] = (p[MOTOR.drive] * i - p[MOTOR.viscous] * w - friction
                             - load_torque[0]) / p[MOTOR.inertia_eq]

    @staticmethod
    @njit
    def output(t, x, d, m, p, voltage, load_torque, angle, speed, current, torque):
        angle[0] = x[MOTOR_X.angle]
        speed[0] = x[MOTOR_X.speed]
        current[0] = x[MOTOR_X.current]
        torque[0] = p[MOTOR.drive] * x[MOTOR_X.current]


class RotaryLoad(Block):
    """What a rotating load pushes back with: torsion spring, friction and an unbalance.

    ::

        torque = k (angle - rest_angle) + c speed + Tc tanh(speed / w_c) + T_g sin(angle)

    ``T_g = m g r`` is the gravity torque of an unbalanced mass ``m`` at radius
    ``r`` (``angle = 0`` hanging down).  The load's inertia is not here: a
    rigid load adds it to the motor's ``load_inertia``, so wiring
    ``motor.angle -> load.angle``, ``motor.speed -> load.speed`` and
    ``load.torque -> motor.load_torque`` closes no algebraic loop (the
    motor's outputs are its state).

    Ports
    -----
    angle  : in, (1,), rad       shaft angle
    speed  : in, (1,), rad/s     shaft speed
    torque : out, (1,), N m      torque the load applies against the shaft
    """

    inputs = {"angle": In(1, unit="rad", doc="shaft angle"),
              "speed": In(1, unit="rad/s", doc="shaft speed")}
    outputs = {"torque": Out(1, unit="N m", doc="torque against the shaft")}
    params = {"stiffness": Live(0.0, unit="N m/rad", check=nonnegative, doc="torsion spring k"),
              "rest_angle": Live(0.0, unit="rad", doc="angle at which the spring is relaxed"),
              "damping": Live(0.0, unit="N m s/rad", check=nonnegative, doc="viscous friction c"),
              "friction": Live(0.0, unit="N m", check=nonnegative, doc="Coulomb friction Tc"),
              "friction_speed": Live(0.01, unit="rad/s", check=positive,
                                     doc="speed scale w_c of tanh in the Coulomb friction"),
              "gravity_torque": Live(0.0, unit="N m", doc="unbalance m g r")}

    @staticmethod
    @njit
    def output(t, x, d, m, p, angle, speed, torque):
        a, w = angle[0], speed[0]
        torque[0] = (p[LOAD.stiffness] * (a - p[LOAD.rest_angle]) + p[LOAD.damping] * w
                     + p[LOAD.friction] * kmath.tanh(w / p[LOAD.friction_speed])
                     + p[LOAD.gravity_torque] * kmath.sin(a))


MOTOR, MOTOR_X, LOAD = DCMotor.P, DCMotor.X, RotaryLoad.P     # offsets by name
