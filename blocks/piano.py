"""The virtual piano action of seed 003 (Gillespie): key and hammer, models A and B.

Geometry (vertical plane, x toward the back of the instrument, y up; SI):
the key pivots at the balance point ``P1 = (0, 0)``; the user's finger
presses at distance ``key_front`` in front of it and the key angle ``s``
(rad, positive = front pressed down, back raised) is prescribed by the
user.  At distance ``key_back`` behind the pivot the key carries the point
``S_K = key_back (cos s, sin s)`` where the slider ``S`` pivots on the key
and slides along the hammer shank.  The hammer pivots at
``P2 = (pivot_x, pivot_y)`` with angle ``q`` (rad, from the horizontal);
its shank points along ``u = (cos q, sin q)``, normal ``n = (-sin q, cos q)``.
With ``r = S_K - P2`` the slider constraint (hammer resting on the key) is
``r x u = 0``, i.e. ``q = phi(s) = atan2(r_y, r_x)``; at ``s = 0`` with the
defaults the key lifts the hammer with the ratio
``key_back / (key_back - pivot_x) = 3``.

Dynamics: the hammer is a pendulum about ``P2`` (inertia ``J_h``, first
moment ``M_h = m_h l_c``), ``J_h q'' = -M_h g cos q + F_KH L`` with the
key-hammer force ``F_KH`` normal to the shank at distance ``L = r.u``.  The
key (inertia ``J_k``, first moment ``M_k`` toward the back) obeys
``J_k s'' = key_front cos(s) F_KU - M_k g cos s - F_KH key_back cos(s - q)``,
so the force the key pushes up on the finger is::

    F_KU = (J_k s'' + M_k g cos s + F_KH key_back cos(s - q)) / (key_front cos s)

**String strike.**  When the flying hammer reaches ``q_string`` its
angular velocity reverses (perfectly elastic, zero duration, as in seed 003)
and the block emits a note: ``strike`` carries the hammer's angular speed
(rad/s) for exactly one tick (wire it to a MidiSink or SoundSink),
``strike_time`` the located time.

Parameters.  Seed 003's parameter table did not survive; the defaults are
chosen so that its scenario (key held 0.3 s, hammer thrown and caught near
0.9 s, thrown harder, strikes the string, lands near 1.5 s, bounces) plays
out with seconds-long flights like those of its figure 6: a light,
counterweighted hammer (``M_h g / J_h = 2.9 rad/s^2``, the angular
acceleration of gravity on it when level).  Key and finger geometry are
those of a grand-piano key (230 mm front, 120 mm to the capstan).
"""
from __future__ import annotations

import math

import numpy as np

from hapflow import designs
from hapflow.block import Block
from hapflow.jit import njit
from hapflow.names import offsets
from hapflow.params import Live, between, nonnegative, positive
from hapflow.ports import In, Out

# integer state: mode, strikes
RIDING, FLYING, UNLOADED = 1, 2, 3

_GEOMETRY = {
    "key_front": Live(0.23, unit="m", check=positive, doc="key pivot to the finger"),
    "key_back": Live(0.12, unit="m", check=positive, doc="key pivot to the slider point S_K"),
    "pivot_x": Live(0.08, unit="m", doc="hammer pivot P2, x (toward the back)"),
    "pivot_y": Live(0.0, unit="m", doc="hammer pivot P2, y (up)"),
    "key_inertia": Live(5e-3, unit="kg m^2", check=positive, doc="key inertia about its pivot J_k"),
    "key_moment": Live(0.0, unit="kg m", doc="key first moment toward the back M_k"),
    "hammer_inertia": Live(4e-3, unit="kg m^2", check=positive,
                           doc="hammer inertia about its pivot J_h"),
    "hammer_moment": Live(1.2e-3, unit="kg m", doc="hammer first moment M_h = m_h l_c"),
    "gravity": Live(9.81, unit="m/s^2", check=nonnegative, doc="gravitational acceleration"),
    "q_string": Live(0.35, unit="rad", doc="hammer angle at which it strikes the string"),
}

GEOMETRY = offsets("PianoGeometry", [(name, 1) for name in _GEOMETRY])
"""Offsets of the geometry both models pack first (their ``P`` agree on these)."""

_EVENT_OUTPUTS = {
    "strike": Out(1, unit="rad/s", depends="state",
                  doc="hammer speed at a string strike, for the one tick after it; else 0"),
    "strike_time": Out(1, unit="s", depends="state", doc="time of the latest strike"),
    "release_time": Out(1, unit="s", depends="state", doc="time the hammer last left the key"),
    "catch_time": Out(1, unit="s", depends="state", doc="time the hammer last landed on the key"),
    "strikes": Out(1, dtype="i8", unit="count", depends="state", doc="string strikes so far"),
    "mode": Out(1, dtype="i8", unit="", depends="state",
                doc="1 riding on the key, 2 flying, 3 unloaded (model B)"),
}


@njit
def slider(s, p):
    """Constraint angle phi(s) (rad), dphi/ds, d2phi/ds2 and shank distance |r| (m)."""
    a = p[GEOMETRY.key_back]
    c, sn = math.cos(s), math.sin(s)
    rx, ry = a * c - p[GEOMETRY.pivot_x], a * sn - p[GEOMETRY.pivot_y]
    drx, dry = -a * sn, a * c
    dd = rx * rx + ry * ry
    num = rx * dry - ry * drx
    dnum = rx * (-a * sn) - ry * (-a * c)
    ddd = 2.0 * (rx * drx + ry * dry)
    return math.atan2(ry, rx), num / dd, (dnum * dd - num * ddd) / (dd * dd), math.sqrt(dd)


@njit
def shank_offset(s, q, p):
    """Signed distance (m) of S_K from the shank line, positive above it (S_K pushes the hammer)."""
    rx = p[GEOMETRY.key_back] * math.cos(s) - p[GEOMETRY.pivot_x]
    ry = p[GEOMETRY.key_back] * math.sin(s) - p[GEOMETRY.pivot_y]
    return -rx * math.sin(q) + ry * math.cos(q)


@njit
def finger_force(s, acc, fkh, q, p):
    """Force (N) the key pushes up on the finger, from the key's equation of motion."""
    torque = p[GEOMETRY.key_inertia] * acc + p[GEOMETRY.key_moment] * p[GEOMETRY.gravity] * math.cos(s) + fkh * p[GEOMETRY.key_back] * math.cos(s - q)
    return torque / (p[GEOMETRY.key_front] * math.cos(s))


@njit
def _hammer_outputs(x, d, m, hammer, hammer_vel, strike, strike_time, release_time, catch_time,
                    strikes, mode):
    """The outputs both models share: hammer state, strike pulse, event times and counts."""
    hammer[0] = x[2]
    hammer_vel[0] = x[3]
    strike[0] = d[ACTION_D.pulse]
    strike_time[0] = d[ACTION_D.strike_time]
    release_time[0] = d[ACTION_D.release_time]
    catch_time[0] = d[ACTION_D.catch_time]
    strikes[0] = m[1]
    mode[0] = m[0]


@njit
def _strike(t, x, d, m):
    """Elastic string strike: reverse the hammer's angular velocity, emit the note."""
    x[3] = -x[3]
    d[ACTION_D.pulse] = abs(x[3])
    d[ACTION_D.strike_time] = t
    m[1] += 1


# ---------------------------------------------------------------- model A
@njit
def _riding_force(s, v, a, p):
    """Model A1: hammer angle, speed, and the key-hammer force F_KH (N) the constraint needs."""
    phi, dphi, ddphi, dist = slider(s, p)
    acc = ddphi * v * v + dphi * a
    return phi, dphi * v, acc, (p[GEOMETRY.hammer_inertia] * acc + p[GEOMETRY.hammer_moment] * p[GEOMETRY.gravity] * math.cos(phi)) / dist


@njit
def _a_contact_force(x, m, s, v, a, p):
    return _riding_force(s, v, a, p)[3] if m[0] == RIDING else 0.0


@njit
def _a_release(t, x, d, m, s, v, a, p):
    phi, w, _, _ = _riding_force(s, v, a, p)
    x[2], x[3] = phi, w
    m[0] = FLYING
    d[ACTION_D.release_time] = t


@njit
def _a_land(t, x, d, m, s, v, a, p):
    """Hammer meets the key: bounce with restitution, or caught when the rebound is slow."""
    phi, w, _, fkh = _riding_force(s, v, a, p)
    rebound = p[PIANO_A.e_land] * (w - x[3])
    x[2] = phi
    if rebound < p[PIANO_A.w_catch]:
        x[3] = w
        m[0] = RIDING
        d[ACTION_D.catch_time] = t
    else:
        x[3] = w + rebound


class _PianoAction(Block):
    """State layout and start of both models: ``x = (q_k, q_k', q, q')``, riding, no events yet."""

    cstate = 4
    dstate = ("pulse", "strike_time", "release_time", "catch_time")
    istate = 2
    nguards = 3
    position_states = (0, 2)
    initial_depends = ()                  # riding, no events yet: the same for any values

    def initial_state(self):
        x, d, m = super().initial_state()
        m[0] = RIDING
        d[ACTION_D.strike_time] = d[ACTION_D.release_time] = d[ACTION_D.catch_time] = -1.0
        return x, d, m


class PianoActionA(_PianoAction):
    """Virtual piano action, model A (seed 003): rigid key and hammer with a slider constraint.

    Impedance operator: key angle, speed and acceleration in (the user's
    motion), finger force out.  Mode 1 (riding, model A1): the hammer is
    slaved to the key through the slider, ``q = phi(s)``, zero degrees of
    freedom; the force ``F_KH`` the constraint needs is the indicator: the
    hammer is thrown when it falls to zero (guard ``F_KH``).  Mode 2
    (flying, model A2): the hammer swings freely,
    ``J_h q'' = -M_h g cos q``; guards: interference with the key
    (``r x u``, landing) and the string (``q_string - q``).  Landing is an
    impact against the (prescribed, so infinitely heavy) key with
    restitution ``e_land``; a rebound slower than ``w_catch`` catches the
    hammer (back to mode 1) — this also ends the Zeno cascade of ever
    smaller bounces.  See the module docstring for geometry and equations.

    State ``x = (unused, unused, q, q')`` keeps the layout of model B.

    Ports
    -----
    key, key_vel, key_acc : in, (1,), rad, rad/s, rad/s^2   the user's key motion
    force        : out, (1,), N      force the key pushes up on the finger
    contact_force : out, (1,), N     key-hammer force F_KH (0 in flight)
    indicator    : out, (1,), 1      active guard: F_KH (N) riding, r x u (m) flying
    hammer, hammer_vel : out, (1,), rad, rad/s   hammer angle and angular velocity
    strike, strike_time, release_time, catch_time, strikes, mode : see the module docstring
    """

    inputs = {"key": In(1, unit="rad", doc="key angle s"),
              "key_vel": In(1, unit="rad/s", doc="key angular velocity"),
              "key_acc": In(1, unit="rad/s^2", doc="key angular acceleration")}
    outputs = {"force": Out(1, unit="N", doc="force the key pushes up on the finger"),
               "contact_force": Out(1, unit="N", doc="key-hammer force F_KH"),
               "indicator": Out(1, unit=None, doc="active guard value"),
               "hammer": Out(1, unit="rad", depends="state", doc="hammer angle"),
               "hammer_vel": Out(1, unit="rad/s", depends="state", doc="hammer angular velocity"),
               **_EVENT_OUTPUTS}
    params = {**_GEOMETRY,
              "e_land": Live(0.0, check=between(0.0, 1.0),
                             doc="restitution of the hammer on the key (0: caught, as in seed 003)"),
              "w_catch": Live(0.05, unit="rad/s", check=nonnegative,
                              doc="rebound speed below which the key catches the hammer")}

    @staticmethod
    @njit
    def output(t, x, d, m, p, key, key_vel, key_acc, force, contact_force, indicator, hammer,
               hammer_vel, strike, strike_time, release_time, catch_time, strikes, mode):
        s = key[0]
        fkh = _a_contact_force(x, m, s, key_vel[0], key_acc[0], p)
        force[0] = finger_force(s, key_acc[0], fkh, x[2], p)
        contact_force[0] = fkh
        indicator[0] = fkh if m[0] == RIDING else -shank_offset(s, x[2], p)
        _hammer_outputs(x, d, m, hammer, hammer_vel, strike, strike_time, release_time,
                        catch_time, strikes, mode)

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, key, key_vel, key_acc, dx):
        dx[0] = x[1]
        dx[1] = 0.0
        dx[2] = x[3]
        if m[0] == RIDING:
            dx[3] = _riding_force(key[0], key_vel[0], key_acc[0], p)[2]
        else:
            dx[3] = -p[GEOMETRY.hammer_moment] * p[GEOMETRY.gravity] * math.cos(x[2]) / p[GEOMETRY.hammer_inertia]

    @staticmethod
    @njit
    def guard(t, x, d, m, p, key, key_vel, key_acc, g):
        if m[0] == RIDING:
            g[0] = _riding_force(key[0], key_vel[0], key_acc[0], p)[3]
            g[1] = 1.0
            g[2] = 1.0
        else:
            g[0] = 1.0
            g[1] = -shank_offset(key[0], x[2], p)
            g[2] = p[GEOMETRY.q_string] - x[2]

    @staticmethod
    @njit
    def reset(t, x, d, m, p, key, key_vel, key_acc, k):
        if k == 0:
            _a_release(t, x, d, m, key[0], key_vel[0], key_acc[0], p)
        elif k == 1:
            _a_land(t, x, d, m, key[0], key_vel[0], key_acc[0], p)
        else:
            _strike(t, x, d, m)

    @staticmethod
    @njit
    def update(t, x, d, m, p, key, key_vel, key_acc):
        s, v, a = key[0], key_vel[0], key_acc[0]
        d[ACTION_D.pulse] = 0.0
        if m[0] == RIDING:
            phi, w, _, fkh = _riding_force(s, v, a, p)
            x[2], x[3] = phi, w                      # exactly on the constraint at each tick
            if fkh <= 0.0:
                _a_release(t, x, d, m, s, v, a, p)
        elif shank_offset(s, x[2], p) >= 0.0 and x[3] <= _riding_force(s, v, a, p)[1]:
            _a_land(t, x, d, m, s, v, a, p)          # met the key exactly at a tick
        elif x[2] >= p[GEOMETRY.q_string] and x[3] > 0.0:
            _strike(t, x, d, m)


# ---------------------------------------------------------------- model B
@njit
def _b_contact_force(x, p):
    """Model B1: spring-damper force F_KH (N) of the slider spring k2 (raw: may be < 0)."""
    qk, wk, q, w = x[0], x[1], x[2], x[3]
    a = p[GEOMETRY.key_back]
    rx, ry = a * math.cos(qk) - p[GEOMETRY.pivot_x], a * math.sin(qk) - p[GEOMETRY.pivot_y]
    sn, c = math.sin(q), math.cos(q)
    delta = -rx * sn + ry * c
    # d(delta)/dt: the key point moves with r' = a (-sin qk, cos qk) qk'; the normal turns with -q' u
    ddelta = (a * math.sin(qk) * sn + a * math.cos(qk) * c) * wk - (rx * c + ry * sn) * w
    return p[PIANO_B.k2] * delta + p[PIANO_B.c2] * ddelta, delta, rx * c + ry * sn


class PianoActionB(_PianoAction):
    """Virtual piano action, model B (seed 003): springs k1, k2 between user, key and hammer.

    The user prescribes the manipulandum angle ``s`` only (no velocity or
    acceleration: model B is robust to sensor noise).  The key is a body of
    its own (angle ``q_k``) tied to the manipulandum by the torsional spring
    ``k1`` (seed 003: ``F_KU = k1 (s - q_k)``), with a light damper ``c_k``
    to the frame; the slider point of the key pushes the hammer through the
    spring ``k2`` normal to the shank (``F_KH = k2 q4 + c2 q4'`` with
    ``q4`` the compression, never tensile).  Mode 1 (B1, contact):
    two degrees of freedom coupled through ``k2``; guards ``F_KH`` (the
    hammer leaves when the spring force reaches zero) and ``q4``.  Mode 2
    (B2, free): key and hammer move independently; guards: the key point
    reaching the shank (``q4`` back to zero) and the string.  Mode 3
    (unloaded): the spring is still compressed but the damper would make
    ``F_KH`` tensile, so the hammer is free; guards ``-F_KH`` (loads again),
    ``q4`` (separates) and the string.  Every switch is located, so the force
    law is smooth inside each step.  Softer springs give a smoother
    finger force ``F_KU = k1 (s - q_k) / (key_front cos s)`` and a spongier
    key.

    State ``x = (q_k, q_k', q, q')``.

    Ports
    -----
    key          : in, (1,), rad     manipulandum angle s
    force        : out, (1,), N      force the key pushes up on the finger
    contact_force : out, (1,), N     key-hammer spring force F_KH (0 in flight)
    indicator    : out, (1,), 1      active guard: F_KH (N) in contact, -q4 (m) free
    key_angle    : out, (1,), rad    key angle q_k
    hammer, hammer_vel : out, (1,), rad, rad/s   hammer angle and angular velocity
    strike, strike_time, release_time, catch_time, strikes, mode : see the module docstring
    """

    inputs = {"key": In(1, unit="rad", doc="manipulandum angle s")}
    outputs = {"force": Out(1, unit="N", doc="force the key pushes up on the finger"),
               "contact_force": Out(1, unit="N", depends="state", doc="key-hammer force F_KH"),
               "indicator": Out(1, unit=None, depends="state", doc="active guard value"),
               "key_angle": Out(1, unit="rad", depends="state", doc="key angle q_k"),
               "hammer": Out(1, unit="rad", depends="state", doc="hammer angle"),
               "hammer_vel": Out(1, unit="rad/s", depends="state", doc="hammer angular velocity"),
               **_EVENT_OUTPUTS}
    params = {**_GEOMETRY,
              "k1": Live(10.0, unit="N m/rad", check=positive, doc="manipulandum-key torsional spring"),
              "c_k": Live(0.3, unit="N m s/rad", check=nonnegative, doc="key-frame damper"),
              "k2": Live(5000.0, unit="N/m", check=positive, doc="slider spring, normal to the shank"),
              "c2": Live(10.0, unit="N s/m", check=nonnegative, doc="slider spring damping"),
              "key0": Live(0.0, unit="rad", doc="manipulandum angle at t = 0 (start at rest there)")}
    def initial_state(self):
        x, d, m = super().initial_state()
        x[:] = self.equilibrium()
        return x, d, m

    def equilibrium(self) -> np.ndarray:
        """Static state ``(q_k, 0, q, 0)`` with the hammer resting on the key at ``key = key0``.

        Solves the key and hammer torque balances (gravity, spring ``k1``,
        slider spring ``k2``) with scipy; the run then starts at rest.
        """
        p, s = self.packed(), self.key0

        def torques(z):
            x = np.array([z[0], 0.0, z[1], 0.0])
            fkh, _, dist = _b_contact_force(x, p)
            return [p[PIANO_B.k1] * (s - z[0]) - p[GEOMETRY.key_moment] * p[GEOMETRY.gravity] * math.cos(z[0])
                    - fkh * p[GEOMETRY.key_back] * math.cos(z[0] - z[1]),
                    -p[GEOMETRY.hammer_moment] * p[GEOMETRY.gravity] * math.cos(z[1]) + fkh * dist]

        def solve() -> np.ndarray:
            from scipy.optimize import fsolve      # design time only (and cached: 0.4 s import)
            qk, q = fsolve(torques, [s, slider(s, p)[0]], xtol=1e-12)
            return np.array([qk, 0.0, q, 0.0])
        return designs.cached("piano_b_equilibrium", (p.tolist(), s), solve)

    @staticmethod
    @njit
    def output(t, x, d, m, p, key, force, contact_force, indicator, key_angle, hammer,
               hammer_vel, strike, strike_time, release_time, catch_time, strikes, mode):
        fkh, delta, _ = _b_contact_force(x, p)
        force[0] = p[PIANO_B.k1] * (key[0] - x[0]) / (p[GEOMETRY.key_front] * math.cos(key[0]))
        contact_force[0] = max(fkh, 0.0) if m[0] == RIDING and delta > 0.0 else 0.0
        indicator[0] = fkh if m[0] == RIDING else -delta
        key_angle[0] = x[0]
        _hammer_outputs(x, d, m, hammer, hammer_vel, strike, strike_time, release_time,
                        catch_time, strikes, mode)

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, key, dx):
        fkh, delta, dist = _b_contact_force(x, p)
        if m[0] != RIDING or delta <= 0.0 or fkh < 0.0:   # (the last two only between events)
            fkh = 0.0
        dx[0] = x[1]
        dx[1] = (p[PIANO_B.k1] * (key[0] - x[0]) - p[PIANO_B.c_k] * x[1] - p[GEOMETRY.key_moment] * p[GEOMETRY.gravity] * math.cos(x[0])
                 - fkh * p[GEOMETRY.key_back] * math.cos(x[0] - x[2])) / p[GEOMETRY.key_inertia]
        dx[2] = x[3]
        dx[3] = (-p[GEOMETRY.hammer_moment] * p[GEOMETRY.gravity] * math.cos(x[2]) + fkh * dist) / p[GEOMETRY.hammer_inertia]

    @staticmethod
    @njit
    def guard(t, x, d, m, p, key, g):
        fkh, delta, _ = _b_contact_force(x, p)
        mode = m[0]
        if mode == RIDING:
            g[0], g[1] = fkh, delta
        elif mode == UNLOADED:
            g[0], g[1] = -fkh, delta
        else:
            g[0], g[1] = 1.0, -delta
        g[2] = p[GEOMETRY.q_string] - x[2] if mode != RIDING else 1.0

    @staticmethod
    @njit
    def reset(t, x, d, m, p, key, k):
        mode = m[0]
        if k == 0 and mode == RIDING:
            m[0] = UNLOADED
            d[ACTION_D.release_time] = t
        elif k == 0 or (k == 1 and mode == FLYING):
            m[0] = RIDING
            d[ACTION_D.catch_time] = t
        elif k == 1:
            if mode == RIDING:
                d[ACTION_D.release_time] = t
            m[0] = FLYING
        else:
            _strike(t, x, d, m)

    @staticmethod
    @njit
    def update(t, x, d, m, p, key):
        d[ACTION_D.pulse] = 0.0
        fkh, delta, _ = _b_contact_force(x, p)
        mode = m[0]
        if mode != FLYING and delta < 0.0:           # state changes between ticks
            if mode == RIDING:
                d[ACTION_D.release_time] = t
            m[0] = FLYING
        elif mode == RIDING and fkh < 0.0:
            m[0] = UNLOADED
            d[ACTION_D.release_time] = t
        elif mode != RIDING and delta > 0.0 and fkh > 0.0:
            m[0] = RIDING
            d[ACTION_D.catch_time] = t


# the offsets their kernels name
ACTION_D, PIANO_A, PIANO_B = _PianoAction.D, PianoActionA.P, PianoActionB.P
