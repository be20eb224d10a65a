"""Pendulum on a cart between two walls: seed 003's virtual object as a piece-wise ODE.

Seed 003 (Gillespie) lists "pendulums on carts colliding with walls" among the
virtual objects its simulator renders, and its simulator loop reads the
sensors once, advances the object one 2 ms RK4 step and writes the force,
with a 7 ms servo cycle ("the simulation was not synchronized to real-time";
"as we sample the inputs only once per step instead of three times as
required by such codes, the numerical accuracy lies somewhere between that of
the Euler method and the fourth-order Runge-Kutta method").  Both are
parameters here (``input_sampling``, ``time_scale``), so the seed's set-up
and the exact one run side by side (``tests/evals/test_cart_pendulum.py``).
"""
from __future__ import annotations

import math

from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, Structural, between, nonnegative, one_of, positive
from hapflow.ports import In, Out

FREE, AT_LEFT, AT_RIGHT = 0, 1, 2


@njit
def _coupling(x, p, hand_pos, hand_vel):
    """Force (N, +x) the hand applies to the cart through the virtual coupling."""
    return (p[CART.coupling_stiffness] * (hand_pos - x[CART_X.pos])
            + p[CART.coupling_damping] * (hand_vel / p[CART.time_scale] - x[CART_X.vel]))


@njit
def _swing(x, p):
    """Right-hand side of the pendulum's equation, ``-m g l sin(th) - c th'`` (N m)."""
    return (-p[CART.bob_mass] * p[CART.gravity] * p[CART.length] * math.sin(x[CART_X.angle])
            - p[CART.pivot_damping] * x[CART_X.rate])


@njit
def _free_accelerations(x, p, fu):
    """Cart and pendulum accelerations ``(q'', th'')`` of the free cart under the hand force."""
    big, m, l = p[CART.cart_mass], p[CART.bob_mass], p[CART.length]
    s, c = math.sin(x[CART_X.angle]), math.cos(x[CART_X.angle])
    r1 = fu + m * l * s * x[CART_X.rate] ** 2 - p[CART.cart_damping] * x[CART_X.vel]
    r2 = _swing(x, p)
    det = m * l * l * (big + m * s * s)
    return (m * l * l * r1 - m * l * c * r2) / det, ((big + m) * r2 - m * l * c * r1) / det


@njit
def _wall_reaction(x, p, fu):
    """Force (N, +x) the wall must apply to keep the cart at rest against it."""
    m, l = p[CART.bob_mass], p[CART.length]
    s, c = math.sin(x[CART_X.angle]), math.cos(x[CART_X.angle])
    thdd = _swing(x, p) / (m * l * l)
    return m * l * c * thdd - m * l * s * x[CART_X.rate] ** 2 - fu


@njit
def _hit(t, x, d, m, p, side, fu):
    """Rigid impact with a wall: cart velocity reversed and scaled by the restitution, the
    pendulum's rate jumping by ``-cos(th) dv / l`` (no impulse acts on the angle)."""
    wall = p[CART.wall_left] if side == AT_LEFT else p[CART.wall_right]
    v_before = x[CART_X.vel]
    v_after = -p[CART.restitution] * v_before
    if abs(v_after) < p[CART.v_stick]:
        v_after = 0.0
    dv = v_after - v_before
    th = x[CART_X.angle]
    x[CART_X.pos] = wall
    x[CART_X.vel] = v_after
    x[CART_X.rate] -= math.cos(th) * dv / p[CART.length]
    if dv != 0.0:                               # not a cart placed at rest against the wall
        d[CART_D.impact_time] = t
        d[CART_D.impulse] = (p[CART.cart_mass] + p[CART.bob_mass] * math.sin(th) ** 2) * dv
        m[1] += 1
    pushed = _wall_reaction(x, p, fu)
    if v_after == 0.0 and (pushed > 0.0 if side == AT_LEFT else pushed < 0.0):
        m[0] = side


class CartPendulum(Block):
    """Pendulum on a cart between two rigid walls, held through a virtual coupling (seed 003).

    A cart (mass ``M``, position ``q``) on a level rail carries a pendulum
    (point mass ``m`` at length ``l``, angle ``th`` from hanging straight
    down).  The hand holds the cart through a spring-damper (seed 003's model
    B idea: smooth force from position and velocity only)::

        F_u = k_c (hand_pos - q) + b_c (hand_vel - q')
        (M + m) q'' + m l cos(th) th'' - m l sin(th) th'^2 = F_u - c_q q'
        m l cos(th) q'' + m l^2 th''                      = -m g l sin(th) - c_th th'

    Modes (seed 003's piece-wise ODE: flow, readout, indicator, transition):

    - **free** (0): the equations above; indicators ``q - wall_left`` and
      ``wall_right - q``.
    - **impact** (transition): ``q'+ = -e q'-`` and, since the wall's impulse
      ``J = (M + m sin^2 th) (q'+ - q'-)`` acts on the cart only,
      ``th'+ = th'- - cos(th) (q'+ - q'-) / l``.  With ``e = 1`` the kinetic
      energy is unchanged.  A rebound slower than ``v_stick`` ends the
      cascade of ever smaller bounces: the cart stops at the wall and, if it
      is pushed into it, rests there.  (A located impact leaves the cart on
      the wall, where the indicator is zero and cannot fire again within the
      tick; a hand pushing with ``F`` brings it back by the next tick at about
      ``F dt / M``, so ``v_stick`` must exceed ``e F dt / M`` or the cascade
      goes on one bounce per tick: 0.05 m/s covers 40 N at 1 kHz.)
    - **at the left / right wall** (1 / 2): ``q' = 0``, the pendulum swings
      about a fixed pivot; indicator: the wall's reaction
      ``R = m l cos(th) th'' - m l sin(th) th'^2 - F_u`` (left: ``R``,
      right: ``-R``), which reaches zero when the cart starts to leave.

    The readout is ``force = F_u``, the force the hand applies (a display
    pushes the hand with ``-force``).

    ``input_sampling: step`` reads the hand once per step (held over the RK4
    stages, as seed 003's simulator did) instead of at every stage.
    ``time_scale`` is simulated seconds per second of the graph's clock:
    seed 003 advanced one 2 ms step per 7 ms servo cycle, ``time_scale``
    2/7 at a 1/7 ms rate (the object then moves 3.5x slower than it would
    for real; ``hand_vel`` is converted to simulated time).

    Ports
    -----
    hand_pos    : in, (1,), m        hand (handle) position
    hand_vel    : in, (1,), m/s      hand velocity
    force       : out, (1,), N       force the hand applies to the cart through the coupling
    cart_pos    : out, (1,), m       cart position (state only)
    cart_vel    : out, (1,), m/s     cart velocity, simulated time (state only)
    angle       : out, (1,), rad     pendulum angle from hanging down (state only)
    rate        : out, (1,), rad/s   pendulum angular velocity, simulated time (state only)
    mode        : out, (1,), i8      0 free, 1 at the left wall, 2 at the right wall
    impacts     : out, (1,), i8      wall impacts so far
    impact_time : out, (1,), s       time of the latest impact, located inside its tick
    impulse     : out, (1,), N s     the wall's impulse on the cart at the latest impact
    """

    inputs = {"hand_pos": In(1, unit="m", doc="hand position"),
              "hand_vel": In(1, unit="m/s", doc="hand velocity")}
    outputs = {"force": Out(1, unit="N", doc="force of the hand on the cart"),
               "cart_pos": Out(1, unit="m", depends="state", doc="cart position"),
               "cart_vel": Out(1, unit="m/s", depends="state", doc="cart velocity"),
               "angle": Out(1, unit="rad", depends="state", doc="pendulum angle"),
               "rate": Out(1, unit="rad/s", depends="state", doc="pendulum angular velocity"),
               "mode": Out(1, dtype="i8", unit="", depends="state",
                           doc="0 free, 1 at the left wall, 2 at the right wall"),
               "impacts": Out(1, dtype="i8", unit="count", depends="state", doc="impacts so far"),
               "impact_time": Out(1, unit="s", depends="state", doc="time of the latest impact"),
               "impulse": Out(1, unit="N s", depends="state", doc="wall impulse at the latest impact")}
    params = {"cart_mass": Live(1.0, unit="kg", check=positive, doc="cart mass M"),
              "bob_mass": Live(0.3, unit="kg", check=positive, doc="pendulum mass m"),
              "length": Live(0.25, unit="m", check=positive, doc="pendulum length l"),
              "gravity": Live(9.81, unit="m/s^2", check=nonnegative, doc="gravity g"),
              "wall_left": Live(-0.1, unit="m", doc="cart position at the left wall"),
              "wall_right": Live(0.1, unit="m", doc="cart position at the right wall"),
              "restitution": Live(0.6, check=between(0.0, 1.0), doc="coefficient of restitution e"),
              "v_stick": Live(0.05, unit="m/s", check=nonnegative,
                              doc="rebound speed below which the cart stops at the wall"),
              "coupling_stiffness": Live(200.0, unit="N/m", check=nonnegative,
                                         doc="virtual coupling k_c"),
              "coupling_damping": Live(4.0, unit="N s/m", check=nonnegative,
                                       doc="virtual coupling b_c"),
              "cart_damping": Live(0.0, unit="N s/m", check=nonnegative, doc="rail friction c_q"),
              "pivot_damping": Live(0.0, unit="N m s/rad", check=nonnegative,
                                    doc="pivot friction c_th"),
              "time_scale": Live(1.0, check=positive,
                                 doc="simulated seconds per second of the graph's clock"),
              "input_sampling": Structural("stage", kind="str", check=one_of("stage", "step"),
                                           doc="read the hand at every solver stage, or once "
                                               "per step (seed 003's simulator)"),
              "x0": Live(0.0, unit="m", doc="initial cart position"),
              "angle0": Live(0.0, unit="rad", doc="initial pendulum angle"),
              "v0": Live(0.0, unit="m/s", doc="initial cart velocity"),
              "rate0": Live(0.0, unit="rad/s", doc="initial pendulum rate")}
    derived = {"held": Derived(lambda b: b.input_sampling == "step",
                               doc="1: the hand is read once per step")}
    cstate = ("pos", "angle", "vel", "rate")
    initial_from = {"pos": "x0", "angle": "angle0", "vel": "v0", "rate": "rate0"}
    dstate = ("impact_time", "impulse", "hand_pos", "hand_vel")
    istate = 2
    nguards = 2
    position_states = (0, 1)

    def validate(self, changed: str | None) -> None:
        if not self.wall_left < self.x0 < self.wall_right:
            raise ParamError(changed or "x0", f"the cart must start between the walls: "
                             f"wall_left ({self.wall_left:g} m) < x0 ({self.x0:g} m) < "
                             f"wall_right ({self.wall_right:g} m)")

    @staticmethod
    @njit
    def output(t, x, d, m, p, hand_pos, hand_vel, force, cart_pos, cart_vel, angle, rate, mode,
               impacts, impact_time, impulse):
        force[0] = _coupling(x, p, hand_pos[0], hand_vel[0])
        cart_pos[0] = x[CART_X.pos]
        cart_vel[0] = x[CART_X.vel]
        angle[0] = x[CART_X.angle]
        rate[0] = x[CART_X.rate]
        mode[0] = m[0]
        impacts[0] = m[1]
        impact_time[0] = d[CART_D.impact_time]
        impulse[0] = d[CART_D.impulse]

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, hand_pos, hand_vel, dx):
        if p[CART.held] != 0.0:
            fu = _coupling(x, p, d[CART_D.hand_pos], d[CART_D.hand_vel])
        else:
            fu = _coupling(x, p, hand_pos[0], hand_vel[0])
        s = p[CART.time_scale]
        dx[CART_X.angle] = s * x[CART_X.rate]
        if m[0] == FREE:
            qdd, thdd = _free_accelerations(x, p, fu)
            dx[CART_X.pos] = s * x[CART_X.vel]
            dx[CART_X.vel] = s * qdd
        else:
            thdd = _swing(x, p) / (p[CART.bob_mass] * p[CART.length] ** 2)
            dx[CART_X.pos] = 0.0
            dx[CART_X.vel] = 0.0
        dx[CART_X.rate] = s * thdd

    @staticmethod
    @njit
    def guard(t, x, d, m, p, hand_pos, hand_vel, g):
        mode = m[0]
        if mode == FREE:
            g[0] = x[CART_X.pos] - p[CART.wall_left]
            g[1] = p[CART.wall_right] - x[CART_X.pos]
            return
        if p[CART.held] != 0.0:
            fu = _coupling(x, p, d[CART_D.hand_pos], d[CART_D.hand_vel])
        else:
            fu = _coupling(x, p, hand_pos[0], hand_vel[0])
        reaction = _wall_reaction(x, p, fu)
        g[0] = reaction if mode == AT_LEFT else 1.0
        g[1] = -reaction if mode == AT_RIGHT else 1.0

    @staticmethod
    @njit
    def reset(t, x, d, m, p, hand_pos, hand_vel, k):
        if m[0] != FREE:                        # the cart leaves the wall
            m[0] = FREE
            x[CART_X.vel] = 0.0
            return
        if p[CART.held] != 0.0:
            fu = _coupling(x, p, d[CART_D.hand_pos], d[CART_D.hand_vel])
        else:
            fu = _coupling(x, p, hand_pos[0], hand_vel[0])
        _hit(t, x, d, m, p, AT_LEFT if k == 0 else AT_RIGHT, fu)

    @staticmethod
    @njit
    def update(t, x, d, m, p, hand_pos, hand_vel):
        d[CART_D.hand_pos] = hand_pos[0]        # the once-per-step sample (input_sampling: step)
        d[CART_D.hand_vel] = hand_vel[0]
        fu = _coupling(x, p, hand_pos[0], hand_vel[0])
        mode, q, v = m[0], x[CART_X.pos], x[CART_X.vel]
        if mode == FREE and q <= p[CART.wall_left] and v <= 0.0:
            _hit(t, x, d, m, p, AT_LEFT, fu)    # reached at a tick (or placed at the wall)
        elif mode == FREE and q >= p[CART.wall_right] and v >= 0.0:
            _hit(t, x, d, m, p, AT_RIGHT, fu)
        elif mode != FREE:
            x[CART_X.pos] = p[CART.wall_left] if mode == AT_LEFT else p[CART.wall_right]
            x[CART_X.vel] = 0.0                 # rest exactly at the wall (no drift)
            reaction = _wall_reaction(x, p, fu)
            if (reaction <= 0.0) if mode == AT_LEFT else (reaction >= 0.0):
                m[0] = FREE


CART, CART_X, CART_D = CartPendulum.P, CartPendulum.X, CartPendulum.D   # offsets by name
