"""Newton observer on the impact map: the coefficient of restitution of a bouncing ball (seed 001).

Patoglu & Gillespie identify the parameters of a hybrid system from its
discrete dynamics: the *impact map* takes the state at one impact to the
state at the next.  For a ball on a driven paddle (rigid contact, ball mass
``m`` known) the state just after impact ``j`` is ``(t_j, v_j)`` — impact
time and ball velocity — and the map is

1. free flight from the paddle surface: ``y(t) = y_p(t_j) + v_j (t - t_j) - g (t - t_j)^2 / 2``;
2. the next impact ``t_{j+1}``: first root of ``y(t) - y_p(t)``;
3. the restitution law: with ``v- = v_j - g (t_{j+1} - t_j)`` and the paddle
   velocity ``vp``, ``v_{j+1} = vp + e (vp - v-)`` and the impulse
   ``J_{j+1} = m (1 + e)(vp - v-)``.

The parameter is appended to the state (``e' = e``) and the measured
outputs are the impact times and impulses (what a force sensor under the
paddle gives: the time and the integral of each force spike).  The Newton
observer of Moraal & Grizzle inverts the N-lifted map — the last N impacts
predicted from the state at the window's first — with Newton steps on the
stacked output errors.  Lifting one chaotic map over N flights makes that
inversion ill-conditioned as soon as the data are noisy (an error in the
first state grows flight after flight), so the lifted window is solved by
multiple shooting: every impact ``j`` of the window carries its own node
``v_j`` (started each time from the measured impulse,
``v_j = vp + e J_j / (m (1 + e))``), and with ``e`` the unknowns are fitted to

    (J^_0 - J_0) / sigma_J,  and per flight j -> j+1:
    (t^_{j+1} - t_{j+1}) / sigma_t,  (J^_{j+1} - J_{j+1}) / sigma_J,  (v^_{j+1} - v_{j+1}) / sigma_v

(the last row is the map's continuity, nearly a constraint).  ``d``
Levenberg-damped Gauss-Newton steps run at each new impact, starting from
the current ``e``; the Jacobian comes from forward differences of the map
itself, i.e. the sensitivities of the impact map.

The paddle's measured motion (position and velocity every tick) is kept in a
ring buffer and interpolated between ticks with cubic Hermite polynomials,
so the observer needs no model of the paddle drive.
"""
from __future__ import annotations

import math

from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived, offsets
from hapflow.params import Live, Structural, at_least, between, positive
from hapflow.ports import In, Out

from .estimation import chol, right_solve

# discrete state: a header, then rings: paddle pos[B], paddle vel[B], impact t[W+1], J[W+1]
# (one more than the window: the impact before it carries the estimate forward);
# then Newton work space: three residual vectors of 2W - 1 (sizes from structural parameters)
HEADER = offsets("ObserverHeader", [("now", 1), ("last_t", 1), ("v", 1), ("e", 1), ("res", 1),
                                    ("ring", None)])


@njit
def _paddle(d, p, s):
    """Measured paddle position (m) and velocity (m/s) at time ``s``: cubic Hermite between ticks."""
    b, rate = int(p[OBSERVER.buffer_size]), p[OBSERVER.sample_rate]
    now = int(d[HEADER.now])
    j = min(max(int(math.floor(s * rate)), now - b + 1), now - 1)
    h = 1.0 / rate
    u = s * rate - j
    k0, k1 = j % b, (j + 1) % b
    p0, p1 = d[HEADER.ring + k0], d[HEADER.ring + k1]
    m0, m1 = d[HEADER.ring + b + k0] * h, d[HEADER.ring + b + k1] * h
    u2, u3 = u * u, u * u * u
    pos = (2 * u3 - 3 * u2 + 1) * p0 + (u3 - 2 * u2 + u) * m0 + (3 * u2 - 2 * u3) * p1 + (u3 - u2) * m1
    vel = ((6 * u2 - 6 * u) * p0 + (3 * u2 - 4 * u + 1) * m0 + (6 * u - 6 * u2) * p1
           + (3 * u2 - 2 * u) * m1) / h
    return pos, vel


@njit
def _gap(d, p, ta, ya, va, s):
    """Ball height above the paddle (m) at ``s`` on the flight from ``(ta, ya, va)``."""
    tau = s - ta
    return ya + va * tau - 0.5 * p[OBSERVER.gravity] * tau * tau - _paddle(d, p, s)[0]


@njit
def impact_map(d, p, ta, va, e):
    """Next impact ``(t_b, v_b, J_b)`` from the state just after one.

    Where the flight does not come down within the buffered motion the
    impact is put at the latest sample (and right away if the ball does not
    leave the paddle), so that trial states far from the truth still give
    finite residuals that point the Newton steps back.
    """
    ya = _paddle(d, p, ta)[0]
    h = 1.0 / p[OBSERVER.sample_rate]
    tmax = d[HEADER.now] * h
    lo = ta + 1e-9
    tb = lo
    if _gap(d, p, ta, ya, va, lo) > 0.0:
        tb = tmax
        while lo < tmax:
            hi = min(max((math.floor(lo * p[OBSERVER.sample_rate]) + 1.0) * h, lo + 0.5 * h), tmax)
            if _gap(d, p, ta, ya, va, hi) <= 0.0:
                tb = _root(d, p, ta, ya, va, lo, hi)
                break
            lo = hi
    vp = _paddle(d, p, tb)[1]
    vminus = va - p[OBSERVER.gravity] * (tb - ta)
    return tb, vp + e * (vp - vminus), p[OBSERVER.mass] * (1.0 + e) * (vp - vminus)


@njit
def _root(d, p, ta, ya, va, lo, hi):
    """Touch-down time in ``[lo, hi]`` (gap > 0 at lo, <= 0 at hi): Illinois regula falsi."""
    glo, ghi = _gap(d, p, ta, ya, va, lo), _gap(d, p, ta, ya, va, hi)
    for _ in range(100):
        s = (lo * ghi - hi * glo) / (ghi - glo)
        gs = _gap(d, p, ta, ya, va, s)
        if gs > 0.0:
            lo, glo = s, gs
            ghi *= 0.5
        else:
            hi, ghi = s, gs
            glo *= 0.5
        if hi - lo < 1e-13:
            break
    return hi


@njit
def _impact(d, p, k):
    """Index in ``d`` of the time of impact ``k`` (its impulse follows ``W + 1`` later)."""
    return HEADER.ring + 2 * int(p[OBSERVER.buffer_size]) + k % (int(p[OBSERVER.window_size]) + 1)


@njit
def _work(p):
    """Start of the Newton work space: nodes v[W], trial nodes[W], A[(W+1)^2], g[W+1], step[W+1]."""
    return HEADER.ring + 2 * int(p[OBSERVER.buffer_size]) + 2 * (int(p[OBSERVER.window_size]) + 1)


@njit
def _cost(d, p, first, n, nodes, e):
    """Sum of squared weighted residuals of the window for shooting nodes ``d[nodes:nodes+n]``."""
    lag = int(p[OBSERVER.window_size]) + 1
    k0 = _impact(d, p, first)
    vp0 = _paddle(d, p, d[k0])[1]
    r = (p[OBSERVER.mass] * (1.0 + e) * (d[nodes] - vp0) / e - d[k0 + lag]) / p[OBSERVER.sigma_j]
    cost = r * r
    for j in range(n - 1):
        kb = _impact(d, p, first + j + 1)
        tb, vb, jb = impact_map(d, p, d[_impact(d, p, first + j)], d[nodes + j], e)
        rt, rj = (tb - d[kb]) / p[OBSERVER.sigma_t], (jb - d[kb + lag]) / p[OBSERVER.sigma_j]
        rv = (vb - d[nodes + j + 1]) / p[OBSERVER.sigma_v]
        cost += rt * rt + rj * rj + rv * rv
    return cost


@njit
def _normal_equations(d, p, first, n, e, a, g):
    """Gauss-Newton normal equations ``A = J'J``, ``g = J'r`` over (v_0..v_{n-1}, e) into d."""
    lag, q = int(p[OBSERVER.window_size]) + 1, n + 1
    nodes = _work(p)
    for i in range(q * q):
        d[a + i] = 0.0
    for i in range(q):
        d[g + i] = 0.0
    k0 = _impact(d, p, first)
    vp0 = _paddle(d, p, d[k0])[1]
    # impulse of the first impact from its node: J = m (1 + e)(v - vp) / e
    r = (p[OBSERVER.mass] * (1.0 + e) * (d[nodes] - vp0) / e - d[k0 + lag]) / p[OBSERVER.sigma_j]
    jv = p[OBSERVER.mass] * (1.0 + e) / e / p[OBSERVER.sigma_j]
    je = -p[OBSERVER.mass] * (d[nodes] - vp0) / (e * e) / p[OBSERVER.sigma_j]
    _accumulate(d, a, g, q, 0, jv, n, je, -1, 0.0, r)
    he = 1e-7
    for j in range(n - 1):
        kb = _impact(d, p, first + j + 1)
        ta, v = d[_impact(d, p, first + j)], d[nodes + j]
        hv = 1e-7 * max(1.0, abs(v))
        t0, v0, j0 = impact_map(d, p, ta, v, e)            # the impact map and its sensitivities
        t1, v1, j1 = impact_map(d, p, ta, v + hv, e)
        t2, v2, j2 = impact_map(d, p, ta, v, e + he)
        for pred, dpv, dpe, meas, sig, nxt in ((t0, (t1 - t0) / hv, (t2 - t0) / he, d[kb], p[OBSERVER.sigma_t], 0.0),
                                               (j0, (j1 - j0) / hv, (j2 - j0) / he, d[kb + lag], p[OBSERVER.sigma_j], 0.0),
                                               (v0, (v1 - v0) / hv, (v2 - v0) / he, d[nodes + j + 1], p[OBSERVER.sigma_v], 1.0)):
            _accumulate(d, a, g, q, j, dpv / sig, n, dpe / sig, j + 1 if nxt else -1, -nxt / sig,
                        (pred - meas) / sig)


@njit
def _accumulate(d, a, g, q, i1, c1, i2, c2, i3, c3, r):
    """Add one residual row (up to three nonzero columns) to ``A`` and ``g``."""
    cols = (i1, i2, i3)
    vals = (c1, c2, c3)
    for s in range(3):
        if cols[s] < 0:
            continue
        d[g + cols[s]] += vals[s] * r
        for t in range(3):
            if cols[t] >= 0:
                d[a + cols[s] * q + cols[t]] += vals[s] * vals[t]


@njit
def _newton(d, p, first, n):
    """Levenberg-damped Gauss-Newton steps on the window; returns the RMS weighted residual."""
    q = n + 1
    nodes = _work(p)
    trial = nodes + int(p[OBSERVER.window_size])
    a = trial + int(p[OBSERVER.window_size])
    g = a + q * q
    step = g + q
    fac = step + q                                       # Cholesky factor of the damped A
    for _ in range(int(p[OBSERVER.newton_steps])):
        e = d[HEADER.e]
        cost = _cost(d, p, first, n, nodes, e)
        _normal_equations(d, p, first, n, e, a, g)
        lam = 0.0
        for _try in range(30):                        # raise the damping until the cost falls
            for i in range(q):
                d[a + i * q + i] *= 1.0 + lam
            chol(d, a, 1.0, d, fac, q)
            for i in range(q):
                d[a + i * q + i] /= 1.0 + lam
                d[step + i] = d[g + i]
            right_solve(d, fac, q, d, step, 1)
            for i in range(n):
                d[trial + i] = d[nodes + i] - d[step + i]
            en = min(max(e - d[step + n], 1e-3), 1.0)
            if math.isfinite(en) and _cost(d, p, first, n, trial, en) < cost:
                for i in range(n):
                    d[nodes + i] = d[trial + i]
                d[HEADER.e] = en
                break
            lam = 1e-4 if lam == 0.0 else 10.0 * lam
    return math.sqrt(_cost(d, p, first, n, nodes, d[HEADER.e]) / (3 * n - 2))


class RestitutionObserver(Block):
    """Newton observer of a ball's coefficient of restitution from paddle motion and impacts.

    Inputs are what a rig measures: the paddle's position and velocity every
    tick, and for each impact its time and impulse (the force spike's time
    and integral; a new impact is an ``impact_time`` different from the
    previous tick's, the value at the first tick being the baseline).  From
    the second impact on, every impact runs the Newton observer of the
    module docstring (``iterations`` Gauss-Newton steps) on the impacts so
    far, up to the last ``window``: the first single-flight windows are
    nearly linear, so Newton converges from a rough ``e0``, and the longer
    windows average the noise.  ``buffer`` ticks of paddle motion are kept:
    it must cover the window (a few flights).  Resting contact (a ball that
    stops bouncing) is not an impact and must not be reported as one.

    Ports
    -----
    paddle_pos   : in, (1,), m       measured paddle position
    paddle_vel   : in, (1,), m/s     measured paddle velocity
    impact_time  : in, (1,), s       time of the latest impact
    impulse      : in, (1,), N s     impulse of the latest impact
    restitution  : out, (1,), 1      estimate of e (``e0`` until the second impact)
    velocity     : out, (1,), m/s    estimated ball velocity after the window's first impact
    residual     : out, (1,), 1      RMS weighted prediction error of the last update
    impacts      : out, (1,), i8     impacts seen
    """

    inputs = {"paddle_pos": In(1, unit="m", doc="measured paddle position"),
              "paddle_vel": In(1, unit="m/s", doc="measured paddle velocity"),
              "impact_time": In(1, unit="s", doc="time of the latest impact"),
              "impulse": In(1, unit="N s", doc="impulse of the latest impact")}
    outputs = {"restitution": Out(1, unit="", depends="state", doc="estimated e"),
               "velocity": Out(1, unit="m/s", depends="state", doc="estimated ball velocity"),
               "residual": Out(1, unit="", depends="state", doc="RMS weighted residual"),
               "impacts": Out(1, dtype="i8", unit="count", depends="state", doc="impacts seen")}
    params = {"mass": Live(0.05, unit="kg", check=positive, doc="ball mass (known)"),
              "gravity": Live(9.81, unit="m/s^2", check=positive, doc="gravitational acceleration"),
              "e0": Live(0.5, check=between(0.01, 1.0), doc="initial guess of e"),
              "sigma_t": Live(1e-5, unit="s", check=positive, doc="impact-time measurement scale"),
              "sigma_j": Live(1e-4, unit="N s", check=positive, doc="impulse measurement scale"),
              "sigma_v": Live(1e-5, unit="m/s", check=positive,
                              doc="continuity scale between a flight's end and the next node"),
              "window": Structural(4, kind="int", check=at_least(2), doc="impacts per Newton window N"),
              "iterations": Structural(3, kind="int", check=at_least(1),
                                       doc="Newton steps per impact d"),
              "buffer": Structural(4096, kind="int", check=at_least(16),
                                   doc="ticks of paddle motion kept")}
    derived = {"sample_rate": Derived(lambda b: _rate(b), unit="Hz", doc="sample rate 1/T"),
               "buffer_size": Derived(lambda b: b.buffer, doc="ring length B"),
               "window_size": Derived(lambda b: b.window, doc="impacts per window N"),
               "newton_steps": Derived(lambda b: b.iterations, doc="Newton steps per impact")}
    istate = 1
    D = HEADER                      # the discrete state's header, by name (rings sized below)
    initial_from = {"e": "e0"}

    def configure(self) -> None:
        q = self.window + 1
        self.dstate = HEADER.ring + 2 * self.buffer + 2 * q + 2 * self.window + 2 * q * q + 2 * q

    @staticmethod
    @njit
    def output(t, x, d, m, p, paddle_pos, paddle_vel, impact_time, impulse,
               restitution, velocity, residual, impacts):
        restitution[0] = d[HEADER.e]
        velocity[0] = d[HEADER.v]
        residual[0] = d[HEADER.res]
        impacts[0] = m[0]

    @staticmethod
    @njit
    def update(t, x, d, m, p, paddle_pos, paddle_vel, impact_time, impulse):
        b, w = int(p[OBSERVER.buffer_size]), int(p[OBSERVER.window_size])
        i = int(round(t * p[OBSERVER.sample_rate]))
        d[HEADER.now] = i
        d[HEADER.ring + i % b] = paddle_pos[0]
        d[HEADER.ring + b + i % b] = paddle_vel[0]
        if i == 0 or impact_time[0] == d[HEADER.last_t]:     # the first sample is the baseline
            d[HEADER.last_t] = impact_time[0]
            return
        d[HEADER.last_t] = impact_time[0]
        k = m[0]
        d[_impact(d, p, k)] = impact_time[0]
        d[_impact(d, p, k) + w + 1] = impulse[0]
        m[0] = k + 1
        n = k + 1
        if n < 2:
            return
        first = max(0, n - w)                   # the window grows to N impacts, then slides
        e, nodes = d[HEADER.e], _work(p)
        for j in range(n - first):              # shooting nodes from the measured impulses
            kj = _impact(d, p, first + j)
            d[nodes + j] = _paddle(d, p, d[kj])[1] + e * d[kj + w + 1] / (p[OBSERVER.mass] * (1.0 + e))
        d[HEADER.res] = _newton(d, p, first, n - first)
        d[HEADER.v] = d[nodes]


def _rate(block: Block) -> float:
    """The observer's sample rate (it interpolates the paddle between ticks)."""
    if block.sample_time is None:
        raise ParamError("buffer", "the observer needs the graph's rate (add it to a graph)")
    return 1.0 / block.sample_time


OBSERVER = RestitutionObserver.P       # the offsets its kernels name
