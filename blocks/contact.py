"""Devices whose contact changes: switching first-order system, ball on a driven paddle.

Both are piece-wise ODEs in the sense of seed 003 (Gillespie): each mode has
its flow, readout, indicator (guard) and transition (reset) function.  The
engine locates every guard crossing inside its tick (:mod:`hapflow.events`),
so switching times are exact to ~1e-13 s, not rounded to the tick.

Guard functions are only meaningful in their own mode; in the other modes a
guard reads a constant 1.0 (no crossing).  A guard that is already <= 0 when
a tick starts cannot fire, so each block's ``update`` re-checks its mode at
the tick boundary (a contact made exactly at a tick, or a ball placed on the
paddle at t = 0).
"""
from __future__ import annotations

from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, Structural, between, nonnegative, one_of, positive
from hapflow.ports import In, Out


class SwitchingFirstOrder(Block):
    """First-order switching ("thermostat") system of seed 001, table 1, with its sensitivities.

    Flows ``x' = -tau x + u_i`` in mode i = 1, 2; switch 1 -> 2 when ``x``
    rises to ``s1`` and 2 -> 1 when it falls to ``s2``; resets keep ``x``
    (``x+ = x-``).  From ``x_a`` in mode i the state is
    ``x(t) = u_i/tau + (x_a - u_i/tau) exp(-tau t)``, so each switching time
    has the closed form ``ln((x_a - u_i/tau) / (s_i - u_i/tau)) / tau``.
    Switching needs ``u1/tau > s1 > s2 > u2/tau``.

    **Trajectory sensitivities** (Hiskens & Pai, as used in seed 001) to the
    parameters ``alpha = (tau, u1, u2, s1, s2, x0)`` are integrated with the
    state: ``lambda = dx/dalpha`` obeys ``lambda' = f_x lambda + f_alpha``
    (``f_x = -tau``, ``f_tau = -x``, ``f_ui = 1`` in mode i), from
    ``lambda(0) = dx0/dalpha``.  At a switch with event function
    ``g = x - s`` the switching time moves by
    ``tau_alpha = -(g_x lambda- + g_alpha) / (g_x f-)`` and the sensitivity
    jumps by ``lambda+ = lambda- - (f+ - f-) tau_alpha`` (the reset is the
    identity).  ``x(alpha + da) ~ x + lambda da`` away from switches; see
    :func:`hapflow.sensitivity.reconstruct` for the refinement near them.

    Ports
    -----
    x           : out, (1,), 1      state (e.g. a normalised room temperature)
    mode        : out, (1,), i8     1 (heating, rising to s1) or 2 (cooling, falling to s2)
    switches    : out, (1,), i8     number of switches so far
    switch_time : out, (1,), s      time of the latest switch, located inside its tick
    sens        : out, (6,), any    dx/d(tau, u1, u2, s1, s2, x0)
    switch_sens : out, (6,), any    d(switch_time)/d(tau, u1, u2, s1, s2, x0) of the latest switch
    """

    outputs = {"x": Out(1, unit="", depends="state", doc="state"),
               "mode": Out(1, dtype="i8", unit="", depends="state", doc="active mode, 1 or 2"),
               "switches": Out(1, dtype="i8", unit="count", depends="state", doc="switches so far"),
               "switch_time": Out(1, unit="s", depends="state", doc="time of the latest switch"),
               "sens": Out(6, depends="state", doc="dx/d(tau, u1, u2, s1, s2, x0)"),
               "switch_sens": Out(6, depends="state",
                                  doc="d(latest switch time)/d(tau, u1, u2, s1, s2, x0)")}
    params = {"tau": Live(1.0, unit="1/s", check=positive, doc="decay rate"),
              "u1": Live(2.0, unit="1/s", doc="input in mode 1"),
              "u2": Live(0.0, unit="1/s", doc="input in mode 2"),
              "s1": Live(1.5, doc="switching level 1 -> 2 (x rising)"),
              "s2": Live(0.5, doc="switching level 2 -> 1 (x falling)"),
              "x0": Live(0.0, doc="initial state (mode 1)")}
    cstate = 7
    dstate = 7
    istate = 2
    nguards = 1
    PARAMETERS = ("tau", "u1", "u2", "s1", "s2", "x0")
    initial_depends = ("x0", "s1")

    def validate(self, changed: str | None) -> None:
        tau, u1, u2, s1, s2 = (self.values[k] for k in ("tau", "u1", "u2", "s1", "s2"))
        if not u1 / tau > s1 > s2 > u2 / tau:
            raise ParamError(changed or "s1", f"switching needs u1/tau > s1 > s2 > u2/tau (got "
                                              f"u1/tau = {u1 / tau:g}, s1 = {s1:g}, s2 = "
                                              f"{s2:g}, u2/tau = {u2 / tau:g})")

    def initial_state(self):
        x, d, m = super().initial_state()
        x[0] = self.x0
        x[6] = 1.0                                  # d x(0) / d x0
        m[0] = 1 if self.x0 < self.s1 else 2
        return x, d, m

    @staticmethod
    @njit
    def output(t, x, d, m, p, xo, mode, switches, switch_time, sens, switch_sens):
        xo[0] = x[0]
        mode[0] = m[0]
        switches[0] = m[1]
        switch_time[0] = d[0]
        for j in range(6):
            sens[j] = x[1 + j]
            switch_sens[j] = d[1 + j]

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, dx):
        mode = m[0]
        dx[0] = -p[SWITCHING.tau] * x[0] + (p[SWITCHING.u1] if mode == 1 else p[SWITCHING.u2])
        for j in range(6):
            dx[1 + j] = -p[SWITCHING.tau] * x[1 + j]
        dx[1] -= x[0]                               # f_tau = -x
        dx[2 if mode == 1 else 3] += 1.0            # f_u of the active mode

    @staticmethod
    @njit
    def guard(t, x, d, m, p, g):
        g[0] = p[SWITCHING.s1] - x[0] if m[0] == 1 else x[0] - p[SWITCHING.s2]

    @staticmethod
    @njit
    def reset(t, x, d, m, p, k):
        mode = m[0]
        f_before = -p[SWITCHING.tau] * x[0] + (p[SWITCHING.u1] if mode == 1 else p[SWITCHING.u2])
        f_after = -p[SWITCHING.tau] * x[0] + (p[SWITCHING.u2] if mode == 1 else p[SWITCHING.u1])
        for j in range(6):                          # event g = x - s: g_x = 1, g_s = -1
            g_alpha = -1.0 if j == (3 if mode == 1 else 4) else 0.0
            t_alpha = -(x[1 + j] + g_alpha) / f_before
            d[1 + j] = t_alpha
            x[1 + j] -= (f_after - f_before) * t_alpha
        m[0] = 3 - mode
        m[1] += 1
        d[0] = t


FLIGHT, CONTACT, RESTING, UNLOADED = 0, 1, 2, 3


@njit
def _loading(x, p, pv):
    """Hunt-Crossley ``k + b p'`` (N/m^n): the sign of the contact force while penetrating."""
    return p[BALL.stiffness] + p[BALL.damping] * (pv - x[1])


@njit
def _paddle_force(x, m, p, pp, pv, pa):
    """Contact force on the ball, upward (N): zero in flight, never tensile."""
    mode = m[0]
    if mode == RESTING:
        return p[BALL.mass] * (pa + p[BALL.gravity])
    if mode != CONTACT:
        return 0.0
    pen = pp - x[0]
    force = pen ** p[BALL.exponent] * _loading(x, p, pv) if pen > 0.0 else 0.0
    return force if force > 0.0 else 0.0


@njit
def _touch(t, x, d, m, p, pp, pv, pa):
    """The ball reaches the paddle: rigid impact (restitution, or resting) or compliant contact."""
    m[1] += 1
    d[BALL_D.impact_time] = t
    if p[BALL.compliant] != 0.0:
        m[0] = CONTACT
        d[BALL_D.impulse] = 0.0
        return
    approach = pv - x[1]                       # > 0: ball moving into the paddle
    rebound = p[BALL.restitution] * approach if approach > 0.0 else 0.0
    d[BALL_D.impulse] = p[BALL.mass] * (approach + rebound)
    x[0] = pp
    if rebound < p[BALL.v_stick]:
        x[1] = pv
        if pa + p[BALL.gravity] > 0.0:
            m[0] = RESTING
    else:
        x[1] = pv + rebound


@njit
def _leave(x, m, pp, pv):
    """Contact ends: back to flight (a resting ball starts with the paddle's state)."""
    if m[0] == RESTING:
        x[0] = pp
        x[1] = pv
    m[0] = FLIGHT


class BallOnPaddle(Block):
    """Ball above a paddle driven by the input motion (seed 001): rigid or Hunt-Crossley contact.

    The ball (height ``y``, velocity ``v``, up positive) falls under gravity
    onto a paddle whose motion ``paddle_pos/vel/acc`` is the input.  Modes:

    - **flight** (0): ``y'' = -g``; guard ``y - paddle_pos``.
    - **rigid impact** (``contact: rigid``): the relative velocity reverses
      scaled by the coefficient of restitution, ``v+ - vp = -e (v- - vp)``;
      the impulse ``m (1 + e)(vp - v-)`` goes to ``impulse``.
    - **resting** (2, rigid only): when the rebound speed relative to the
      paddle is below ``v_stick`` (the Zeno cascade of ever smaller bounces:
      with the paddle still they would be infinitely many in finite time) the
      ball rides on the paddle, ``y'' = paddle_acc``, pressing on it with
      ``m (paddle_acc + g)``; it lifts off when that force reaches zero
      (guard ``paddle_acc + g``, i.e. the paddle accelerates down faster than g).
    - **compliant contact** (1, ``contact: hunt_crossley``): with penetration
      ``p = paddle_pos - y`` the force on the ball is Hunt & Crossley's
      ``F = k |p|^(n-1) p + b |p|^n p' = p^n (k + b p')``, never sticky:
      ``y'' = -g + F/m``; the contact ends when ``p`` returns to zero (guard).
    - **unloaded** (3, compliant): the ball still overlaps the paddle but
      leaves faster than the surface recovers, ``k + b p' <= 0`` (guard), so
      the force would be tensile: it is zero and the ball flies until ``p``
      reaches zero or ``k + b p'`` turns positive again (both guards).
      Locating this switch keeps the force law smooth inside every step.

    ``v_stick`` (default 0.01 m/s: bounces under 5 um, shorter than 2 ms)
    sets where the rigid model declares the ball at rest.

    Ports
    -----
    paddle_pos : in, (1,), m         paddle surface height
    paddle_vel : in, (1,), m/s       its velocity
    paddle_acc : in, (1,), m/s^2     its acceleration (resting mode and lift-off)
    height     : out, (1,), m        ball height (bottom of the ball)
    vel        : out, (1,), m/s      ball velocity
    force      : out, (1,), N        contact force the ball exerts on the paddle (down positive)
    mode       : out, (1,), i8       0 flight, 1 compliant contact, 2 resting, 3 unloaded
    impacts    : out, (1,), i8       impacts (touch-downs) so far
    impact_time : out, (1,), s       time of the latest impact, located inside its tick
    impulse    : out, (1,), N s      impulse of the latest rigid impact (0 for compliant contact)
    """

    inputs = {"paddle_pos": In(1, unit="m", doc="paddle surface height"),
              "paddle_vel": In(1, unit="m/s", doc="paddle velocity"),
              "paddle_acc": In(1, unit="m/s^2", doc="paddle acceleration")}
    outputs = {"height": Out(1, unit="m", depends="state", doc="ball height"),
               "vel": Out(1, unit="m/s", depends="state", doc="ball velocity"),
               "force": Out(1, unit="N", depends=("paddle_pos", "paddle_vel", "paddle_acc"),
                            doc="contact force on the paddle, down positive"),
               "mode": Out(1, dtype="i8", unit="", depends="state",
                           doc="0 flight, 1 compliant contact, 2 resting, 3 unloaded"),
               "impacts": Out(1, dtype="i8", unit="count", depends="state", doc="impacts so far"),
               "impact_time": Out(1, unit="s", depends="state", doc="time of the latest impact"),
               "impulse": Out(1, unit="N s", depends="state", doc="impulse of the latest rigid impact")}
    params = {"contact": Structural("rigid", kind="str", check=one_of("rigid", "hunt_crossley"),
                                    doc="contact model: rigid (restitution) or hunt_crossley"),
              "mass": Live(0.05, unit="kg", check=positive, doc="ball mass"),
              "gravity": Live(9.81, unit="m/s^2", check=positive, doc="gravitational acceleration"),
              "restitution": Live(0.8, check=between(0.0, 1.0), doc="coefficient of restitution (rigid)"),
              "stiffness": Live(1.0e5, check=positive,
                                doc="Hunt-Crossley k, N/m^n (n = exponent)"),
              "damping": Live(100.0, check=nonnegative,
                              doc="Hunt-Crossley b, N s/m^(n+1)"),
              "exponent": Live(1.5, check=positive, doc="Hunt-Crossley n (1.5: Hertz sphere)"),
              "v_stick": Live(0.01, unit="m/s", check=nonnegative,
                              doc="rebound speed below which a rigid ball comes to rest"),
              "h0": Live(0.1, unit="m", doc="initial ball height"),
              "v0": Live(0.0, unit="m/s", doc="initial ball velocity")}
    derived = {"compliant": Derived(lambda b: b.contact != "rigid",
                                    doc="1: Hunt-Crossley contact, 0: rigid")}
    cstate = 2
    dstate = ("impact_time", "impulse")
    istate = 2
    nguards = 3
    position_states = (0,)
    initial_depends = ("h0", "v0")

    def initial_state(self):
        x, d, m = super().initial_state()
        x[:] = self.h0, self.v0
        return x, d, m

    @staticmethod
    @njit
    def output(t, x, d, m, p, paddle_pos, paddle_vel, paddle_acc,
               height, vel, force, mode, impacts, impact_time, impulse):
        height[0] = x[0]
        vel[0] = x[1]
        force[0] = _paddle_force(x, m, p, paddle_pos[0], paddle_vel[0], paddle_acc[0])
        mode[0] = m[0]
        impacts[0] = m[1]
        impact_time[0] = d[BALL_D.impact_time]
        impulse[0] = d[BALL_D.impulse]

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, paddle_pos, paddle_vel, paddle_acc, dx):
        dx[0] = x[1]
        if m[0] == RESTING:
            dx[1] = paddle_acc[0]
        else:
            dx[1] = _paddle_force(x, m, p, paddle_pos[0], paddle_vel[0], paddle_acc[0]) / p[BALL.mass] \
                - p[BALL.gravity]

    @staticmethod
    @njit
    def guard(t, x, d, m, p, paddle_pos, paddle_vel, paddle_acc, g):
        mode = m[0]
        load = _loading(x, p, paddle_vel[0])
        if mode == FLIGHT:
            g[0] = x[0] - paddle_pos[0]
        elif mode == UNLOADED:
            g[0] = -load
        else:
            g[0] = 1.0
        if mode == CONTACT or mode == UNLOADED:
            g[1] = paddle_pos[0] - x[0]
        elif mode == RESTING:
            g[1] = paddle_acc[0] + p[BALL.gravity]
        else:
            g[1] = 1.0
        g[2] = load if mode == CONTACT else 1.0

    @staticmethod
    @njit
    def reset(t, x, d, m, p, paddle_pos, paddle_vel, paddle_acc, k):
        if k == 0 and m[0] == UNLOADED:
            m[0] = CONTACT
        elif k == 0:
            _touch(t, x, d, m, p, paddle_pos[0], paddle_vel[0], paddle_acc[0])
        elif k == 1:
            _leave(x, m, paddle_pos[0], paddle_vel[0])
        else:
            m[0] = UNLOADED

    @staticmethod
    @njit
    def update(t, x, d, m, p, paddle_pos, paddle_vel, paddle_acc):
        pp, pv, pa = paddle_pos[0], paddle_vel[0], paddle_acc[0]
        mode = m[0]
        if mode == RESTING:                   # ride exactly on the paddle (no drift)
            x[0] = pp
            x[1] = pv
            if pa + p[BALL.gravity] <= 0.0:
                _leave(x, m, pp, pv)
        elif mode == FLIGHT and x[0] <= pp and x[1] <= pv:
            _touch(t, x, d, m, p, pp, pv, pa)  # contact at a tick (or placed on the paddle)
        elif (mode == CONTACT or mode == UNLOADED) and x[0] >= pp:
            _leave(x, m, pp, pv)               # left between ticks (contact under one tick)
        elif mode == CONTACT and _loading(x, p, pv) <= 0.0:
            m[0] = UNLOADED
        elif mode == UNLOADED and _loading(x, p, pv) > 0.0:
            m[0] = CONTACT


# the offsets their kernels name
SWITCHING = SwitchingFirstOrder.P
BALL, BALL_D = BallOnPaddle.P, BallOnPaddle.D
