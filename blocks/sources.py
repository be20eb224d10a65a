"""Signal sources: functions of time only (no inputs)."""
from __future__ import annotations

import math

import numpy as np

from hapflow import kmath
from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, Structural, nonnegative, one_of, positive
from hapflow.ports import Out
from hapflow.rng import normal

_UNIT = Structural(None, kind="str", doc="unit of the output (default: any)")


def _unit_outputs(block: Block, derivatives: bool) -> None:
    """Set the output unit(s) from the block's ``unit`` parameter."""
    unit = block.values["unit"]
    block.outputs = {"y": Out(1, unit=unit, depends="state", doc="value")}
    if derivatives:
        block.outputs["dy"] = Out(1, unit=None if unit is None else f"{unit}/s",
                                  depends="state", doc="first time derivative")
        block.outputs["ddy"] = Out(1, unit=None if unit is None else f"{unit}/s^2",
                                   depends="state", doc="second time derivative")


# inlined (LLVM): with kmath's code inside, past LLVM's own size limit for inlining
@njit(forceinline=True)
def sweep(t, f0, f1, T, log):
    """Phase (rad), frequency (Hz) and its rate (Hz/s) of a sweep from ``f0`` to ``f1``.

    The frequency rises linearly (``log`` False) or exponentially over ``T``
    seconds, then stays at ``f1`` with continuous phase.
    """
    tau = min(t, T)
    if not log:
        k = (f1 - f0) / T
        phase = 2.0 * math.pi * (f0 * tau + 0.5 * k * tau * tau)
        f = f0 + k * tau
        df = k
    else:
        r = kmath.log(f1 / f0) / T
        if r != 0.0:
            phase = 2.0 * math.pi * f0 * kmath.expm1(r * tau) / r
        else:
            phase = 2.0 * math.pi * f0 * tau
        f = f0 * kmath.exp(r * tau)
        df = f * r
    if t > T:
        phase += 2.0 * math.pi * f1 * (t - T)
        f = f1
        df = 0.0
    return phase, f, df


class Constant(Block):
    """Constant value.

    Ports
    -----
    y : out, (n,), unit    the value (n = number of values)
    """

    params = {"value": Live((0.0,), kind="floats", doc="value(s)"), "unit": _UNIT}

    def configure(self) -> None:
        self.outputs = {"y": Out(len(self.value), unit=self.unit, depends="state", doc="the value")}

    def validate(self, changed: str | None) -> None:
        size = self.outputs["y"].size
        if len(self.value) != size:
            raise ParamError("value", f"parameter 'value' must keep its {size} element(s), got "
                                      f"{len(self.value)}: the output size is fixed when the "
                                      "block is built, so rebuild the graph to change it")

    @staticmethod
    @njit
    def output(t, x, d, m, p, y):
        for j in range(y.size):
            y[j] = p[CONSTANT.value + j]


class Step(Block):
    """Step from ``initial`` to ``final`` at ``time``.

    Ports
    -----
    y : out, (1,), unit    ``initial`` for t < time, ``final`` for t >= time
    """

    params = {"time": Live(0.0, unit="s", check=nonnegative, doc="step time"),
              "initial": Live(0.0, doc="value before the step"),
              "final": Live(1.0, doc="value from the step on"),
              "unit": _UNIT}

    def configure(self) -> None:
        _unit_outputs(self, derivatives=False)

    @staticmethod
    @njit
    def output(t, x, d, m, p, y):
        y[0] = p[STEP.final] if t >= p[STEP.time] else p[STEP.initial]


class Sine(Block):
    """Sinusoid ``y = offset + amplitude sin(2 pi f t + phase)`` with analytic derivatives.

    Ports
    -----
    y   : out, (1,), unit        value
    dy  : out, (1,), unit/s      first derivative (for feed-forward)
    ddy : out, (1,), unit/s^2    second derivative
    """

    params = {"amplitude": Live(1.0, doc="amplitude, in the output unit"),
              "frequency": Live(1.0, unit="Hz", check=nonnegative, doc="frequency"),
              "phase": Live(0.0, unit="rad", doc="phase at t = 0"),
              "offset": Live(0.0, doc="constant added, in the output unit"),
              "unit": _UNIT}

    derived = {"omega": Derived(lambda b: 2.0 * math.pi * b.frequency, unit="rad/s",
                                doc="angular frequency")}

    def configure(self) -> None:
        _unit_outputs(self, derivatives=True)

    @staticmethod
    @njit
    def output(t, x, d, m, p, y, dy, ddy):
        a, w = p[SINE.amplitude], p[SINE.omega]
        s = kmath.sin(w * t + p[SINE.phase])
        c = kmath.cos(w * t + p[SINE.phase])
        y[0] = p[SINE.offset] + a * s
        dy[0] = a * w * c
        ddy[0] = -a * w * w * s


class Chirp(Block):
    """Swept sine of constant amplitude from ``f_start`` to ``f_end`` over ``sweep_time``.

    The instantaneous frequency rises linearly or logarithmically; after
    ``sweep_time`` the sine continues at ``f_end`` with continuous phase.
    Derivatives are analytic.

    Ports
    -----
    y   : out, (1,), unit        value
    dy  : out, (1,), unit/s      first derivative
    ddy : out, (1,), unit/s^2    second derivative
    """

    params = {"amplitude": Live(1.0, doc="amplitude, in the output unit"),
              "f_start": Live(1.0, unit="Hz", check=positive, doc="start frequency"),
              "f_end": Live(10.0, unit="Hz", check=positive, doc="end frequency"),
              "sweep_time": Live(10.0, unit="s", check=positive, doc="duration of the sweep"),
              "method": Structural("linear", kind="str", check=one_of("linear", "log"),
                                   doc="frequency law: linear or log"),
              "unit": _UNIT}

    def configure(self) -> None:
        _unit_outputs(self, derivatives=True)

    derived = {"log": Derived(lambda b: b.method == "log", doc="1: logarithmic sweep")}

    @staticmethod
    @njit
    def output(t, x, d, m, p, y, dy, ddy):
        a = p[CHIRP.amplitude]
        phase, f, df = sweep(t, p[CHIRP.f_start], p[CHIRP.f_end], p[CHIRP.sweep_time],
                             p[CHIRP.log] != 0.0)
        w = 2.0 * math.pi * f
        s = kmath.sin(phase)
        c = kmath.cos(phase)
        y[0] = a * s
        dy[0] = a * w * c
        ddy[0] = -a * w * w * s + a * 2.0 * math.pi * df * c


# inlined (LLVM): with kmath's code inside, past LLVM's own size limit for inlining
@njit(forceinline=True)
def _fade_envelope(t, fade, t_end):
    """Raised-cosine envelope ``w`` and its derivatives ``w', w''`` at time ``t``.

    ``w`` rises from 0 to 1 over ``[0, fade]`` as ``(1 - cos(pi t / fade)) / 2``
    and, when ``t_end > 0``, falls back to 0 over ``[t_end - fade, t_end]``
    mirror-symmetrically; it is 0 from ``t_end`` on.  ``fade = 0`` gives
    ``w = 1`` for every ``t`` (no envelope, and no end).
    """
    if fade <= 0.0:
        return 1.0, 0.0, 0.0
    if t <= 0.0 or (t_end > 0.0 and t >= t_end):
        return 0.0, 0.0, 0.0
    c = math.pi / fade
    w, dw, ddw = 1.0, 0.0, 0.0
    if t < fade:
        w = 0.5 * (1.0 - kmath.cos(c * t))
        dw = 0.5 * c * kmath.sin(c * t)
        ddw = 0.5 * c * c * kmath.cos(c * t)
    if t_end > 0.0 and t_end - t < fade:
        u = t_end - t
        wo = 0.5 * (1.0 - kmath.cos(c * u))
        dwo = -0.5 * c * kmath.sin(c * u)
        ddwo = 0.5 * c * c * kmath.cos(c * u)
        ddw = ddw * wo + 2.0 * dw * dwo + w * ddwo      # product rule (fade-in x fade-out)
        dw = dw * wo + w * dwo
        w = w * wo
    return w, dw, ddw


_MOTION_OUTPUTS = {"pos": Out(1, unit="m", depends="state", doc="position reference"),
                   "vel": Out(1, unit="m/s", depends="state", doc="analytic velocity"),
                   "acc": Out(1, unit="m/s^2", depends="state", doc="analytic acceleration")}


class SweptSine(Block):
    """Constant-amplitude swept sine position trajectory with analytic velocity and acceleration.

    The probe trajectory of Colton & Hollerbach 2005 (seed 002): a sine of
    constant amplitude whose frequency sweeps from ``f_start`` to ``f_end``
    over ``sweep_time`` (defaults: 25 mm, 1 -> 4 Hz, 90 s, i.e. a 50 mm range).
    With ``f_start == f_end`` it is a plain sine (the 1.5 Hz and 2 Hz tests of
    seeds 000 and 002)::

        pos(t) = center + A w(t) sin(phi(t) + phase)
        phi(t) = 2 pi (f0 t + (f1 - f0) t^2 / (2 T))             method 'linear'
               = 2 pi f0 T (exp(r t) - 1) / (T r),  r = ln(f1/f0)/T   method 'log'
        f(t)   = phi'(t) / (2 pi)  = f0 + (f1 - f0) t / T  or  f0 exp(r t)

    for ``0 <= t <= T`` (``T = sweep_time``).  The envelope ``w`` is a raised
    cosine over ``fade`` seconds at both ends of the sweep,
    ``w = (1 - cos(pi t / fade)) / 2`` rising from ``t = 0`` and its mirror
    image falling to 0 at ``t = T``, and 1 in between; so with ``fade > 0``
    position, velocity and acceleration all start at ``center``, 0, 0 (no
    feed-forward kick) and the motion stops at ``T`` (output ``center``, 0, 0
    afterwards).  With ``fade = 0`` the envelope is 1 and after ``T`` the sine
    continues at ``f_end`` with continuous phase.  ``2 fade <= T`` is required.
    The raised cosine is continuous with its first derivative, not its
    second: where the sine is not at a zero crossing when a fade starts or
    ends, ``acc`` steps by up to ``A (pi / fade)^2 / 2`` (0.1 m/s^2 for
    20 mm and 1 s) - a small feed-forward step, where no fade gives a
    velocity step.

    Velocity and acceleration are the exact time derivatives, including the
    envelope's::

        vel = A (w' s + w phi' c)
        acc = A (w'' s + 2 w' phi' c + w (phi'' c - phi'^2 s)),
        s = sin(phi + phase), c = cos(phi + phase)

    Ports
    -----
    pos : out, (1,), m        position reference
    vel : out, (1,), m/s      its time derivative (for feed-forward)
    acc : out, (1,), m/s^2    its second time derivative (inertia feed-forward)
    """

    outputs = _MOTION_OUTPUTS
    params = {"amplitude": Live(0.025, unit="m", doc="amplitude (seed 002: 50 mm range -> 25 mm)"),
              "f_start": Live(1.0, unit="Hz", check=positive, doc="frequency at t = 0"),
              "f_end": Live(4.0, unit="Hz", check=positive, doc="frequency at t = sweep_time"),
              "sweep_time": Live(90.0, unit="s", check=positive, doc="duration of the sweep"),
              "method": Structural("linear", kind="str", check=one_of("linear", "log"),
                                   doc="frequency law: linear or log (exponential)"),
              "fade": Live(0.0, unit="s", check=nonnegative,
                           doc="raised-cosine fade-in/out length at both ends (0 = none)"),
              "phase": Live(0.0, unit="rad", doc="phase added to phi"),
              "center": Live(0.0, unit="m", doc="centre position")}

    def validate(self, changed: str | None) -> None:
        if 2.0 * self.fade > self.sweep_time:
            raise ParamError(changed or "fade", f"parameter 'fade' ({self.fade} s) must be at "
                                                f"most half of 'sweep_time' ({self.sweep_time} "
                                                "s): it fades in and out")

    derived = {"log": Derived(lambda b: b.method == "log", doc="1: logarithmic sweep")}

    @staticmethod
    @njit
    def output(t, x, d, m, p, pos, vel, acc):
        a, T, fade = p[SWEPT.amplitude], p[SWEPT.sweep_time], p[SWEPT.fade]
        phi, f, df = sweep(t, p[SWEPT.f_start], p[SWEPT.f_end], T, p[SWEPT.log] != 0.0)
        w, dw, ddw = _fade_envelope(t, fade, T)
        wp = 2.0 * math.pi * f
        wpp = 2.0 * math.pi * df
        s = kmath.sin(phi + p[SWEPT.phase])
        c = kmath.cos(phi + p[SWEPT.phase])
        pos[0] = p[SWEPT.center] + a * w * s
        vel[0] = a * (dw * s + w * wp * c)
        acc[0] = a * (ddw * s + 2.0 * dw * wp * c + w * (wpp * c - wp * wp * s))


def schroeder_phases(amplitudes) -> np.ndarray:
    """Schroeder (1970) phases giving a low crest factor for a multisine.

    ``phi_k = -2 pi sum_{l<k} (k - l) p_l`` with power shares
    ``p_l = A_l^2 / sum A^2``; for equal amplitudes this is
    ``-pi k (k - 1) / N`` (k = 1..N).
    """
    a = np.asarray(amplitudes, dtype=np.float64)
    share = a * a / np.sum(a * a)
    n = a.size
    phases = np.zeros(n)
    for k in range(1, n + 1):
        phases[k - 1] = -2.0 * math.pi * sum((k - l) * share[l - 1] for l in range(1, k))
    return phases


class Multisine(Block):
    """Sum of sines (position trajectory) with analytic velocity and acceleration.

    ::

        pos(t) = center + w(t) sum_k A_k sin(2 pi f_k t + phi_k)

    ``frequencies``, ``amplitudes`` (one value for all, or one per frequency)
    and ``phases`` are structural lists.  ``schroeder: true`` sets the phases
    to Schroeder's low-crest-factor law (see :func:`schroeder_phases`)
    instead of ``phases`` (default all 0).  ``w`` is an optional raised-cosine
    fade-in over ``fade`` s (as :class:`SweptSine`, but without a fade-out);
    velocity and acceleration are exact derivatives, including the
    envelope's.

    Ports
    -----
    pos : out, (1,), m        position reference
    vel : out, (1,), m/s      its time derivative
    acc : out, (1,), m/s^2    its second time derivative
    """

    outputs = _MOTION_OUTPUTS
    params = {"frequencies": Structural((1.0, 2.0, 3.0), kind="floats", unit="Hz",
                                        check=positive, doc="frequency of each sine"),
              "amplitudes": Structural((0.005,), kind="floats", unit="m",
                                       doc="amplitude of each sine (or one for all)"),
              "phases": Structural(None, kind="floats", unit="rad",
                                   doc="phase of each sine (default 0; not with schroeder)"),
              "schroeder": Structural(False, kind="bool",
                                      doc="use Schroeder phases (low crest factor)"),
              "fade": Live(0.0, unit="s", check=nonnegative, doc="raised-cosine fade-in length"),
              "center": Live(0.0, unit="m", doc="centre position")}

    def configure(self) -> None:
        n = len(self.frequencies)
        if len(self.amplitudes) not in (1, n):
            raise ParamError("amplitudes", f"parameter 'amplitudes' must have 1 or {n} values "
                                           f"(one per frequency), got {len(self.amplitudes)}")
        if self.phases is not None:
            if self.schroeder:
                raise ParamError("phases", "give either 'phases' or 'schroeder: true', not both")
            if len(self.phases) != n:
                raise ParamError("phases", f"parameter 'phases' must have {n} values (one per "
                                           f"frequency), got {len(self.phases)}")

    def component_phases(self) -> np.ndarray:
        """The phase (rad) of each sine as used by the kernel."""
        n = len(self.frequencies)
        if self.schroeder:
            return schroeder_phases(np.broadcast_to(self.amplitudes, (n,)))
        return np.zeros(n) if self.phases is None else np.asarray(self.phases, dtype=np.float64)

    derived = {"sines": Derived(lambda b: b.sines(), size=None,
                                doc="amplitude, angular frequency, phase of each sine, each "
                                    "for all sines in turn")}

    def sines(self) -> np.ndarray:
        """``[a_1 .. a_n, w_1 .. w_n, phi_1 .. phi_n]``: the values the kernel sums."""
        n = len(self.frequencies)
        amps = np.broadcast_to(np.asarray(self.amplitudes, dtype=np.float64), (n,))
        omega = 2.0 * math.pi * np.asarray(self.frequencies)
        return np.concatenate([amps, omega, self.component_phases()])

    @staticmethod
    @njit
    def output(t, x, d, m, p, pos, vel, acc):
        n = (p.size - MULTISINE.sines) // 3
        amp, omega, phase = MULTISINE.sines, MULTISINE.sines + n, MULTISINE.sines + 2 * n
        y = 0.0
        dy = 0.0
        ddy = 0.0
        for k in range(n):
            a, w = p[amp + k], p[omega + k]
            s = kmath.sin(w * t + p[phase + k])
            c = kmath.cos(w * t + p[phase + k])
            y += a * s
            dy += a * w * c
            ddy -= a * w * w * s
        e, de, dde = _fade_envelope(t, p[MULTISINE.fade], 0.0)
        pos[0] = p[MULTISINE.center] + e * y
        vel[0] = de * y + e * dy
        acc[0] = dde * y + 2.0 * de * dy + e * ddy


@njit
def min_jerk(tau):
    """Minimum-jerk blend 10 tau^3 - 15 tau^4 + 6 tau^5 and its first two derivatives in tau."""
    t2 = tau * tau
    return (t2 * tau * (10.0 - 15.0 * tau + 6.0 * t2),
            30.0 * t2 * (1.0 - 2.0 * tau + t2),
            60.0 * tau * (1.0 - 3.0 * tau + 2.0 * t2))


class Waypoints(Block):
    """Point-to-point trajectory: minimum-jerk moves between waypoints, holding at each.

    Between waypoints ``(t_k, y_k)`` and ``(t_{k+1}, y_{k+1})`` the output is
    the minimum-jerk (quintic) move ``y_k + (y_{k+1} - y_k) b(tau)``,
    ``tau = (t - t_k) / (t_{k+1} - t_k)``, ``b = 10 tau^3 - 15 tau^4 + 6 tau^5``,
    whose velocity and acceleration are zero at both ends: position, velocity
    and acceleration are continuous everywhere.  Before ``t_0`` it holds
    ``y_0``, after the last waypoint the last value.  A hold is two waypoints
    with the same value.  The peak speed of a move is ``1.875 dy / dt`` and
    its peak acceleration ``5.77 dy / dt^2``.  (A user's keystrokes in the
    piano-action graphs.)

    The number of waypoints is fixed once built (their values are live).

    Ports
    -----
    y   : out, (1,), unit        value
    dy  : out, (1,), unit/s      first derivative
    ddy : out, (1,), unit/s^2    second derivative
    """

    params = {"times": Live([0.0, 1.0], unit="s", kind="floats", doc="waypoint times, increasing"),
              "points": Live([0.0, 1.0], kind="floats", doc="waypoint values, in the output unit"),
              "unit": _UNIT}

    def configure(self) -> None:
        self.count = len(self.times)           # fixed once built: the outputs' code reads it
        _unit_outputs(self, derivatives=True)

    def validate(self, changed: str | None) -> None:
        for name in ("times", "points"):
            if len(self.values[name]) != self.count:
                raise ParamError(changed or "points",
                                 f"'times' and 'points' need the same length >= 1, fixed once "
                                 f"built (got {len(self.times)} and {len(self.points)}, built "
                                 f"with {self.count})")
        if np.any(np.diff(self.times) <= 0.0):
            raise ParamError("times", f"waypoint 'times' must increase strictly "
                                      f"(got {list(self.times)})")

    @staticmethod
    @njit
    def output(t, x, d, m, p, y, dy, ddy):
        # times then points, n of each (the points have no constant: they follow an array)
        n = (p.size - WAYPOINTS.times) // 2
        tk, yk = WAYPOINTS.times, WAYPOINTS.times + n
        if t <= p[tk] or n == 1:
            y[0], dy[0], ddy[0] = p[yk], 0.0, 0.0
            return
        k = 0
        while k < n - 1 and t > p[tk + k + 1]:
            k += 1
        if k == n - 1:
            y[0], dy[0], ddy[0] = p[yk + n - 1], 0.0, 0.0
            return
        span = p[tk + k + 1] - p[tk + k]
        rise = p[yk + k + 1] - p[yk + k]
        b, db, ddb = min_jerk((t - p[tk + k]) / span)
        y[0] = p[yk + k] + rise * b
        dy[0] = rise * db / span
        ddy[0] = rise * ddb / (span * span)


class WhiteNoise(Block):
    """Gaussian white noise sequence, one independent sample per tick, held in between.

    ``y[k] = std * n[k]`` with ``n[k]`` standard normal from the block's own
    random stream (derived from the graph seed and the block name, so runs
    repeat exactly).  Add it to a signal with a ``Sum`` to model sensor noise.

    Ports
    -----
    y : out, (1,), unit    noise sample
    """

    params = {"std": Live(1.0, check=nonnegative, doc="standard deviation, in the output unit"),
              "unit": _UNIT}
    dstate = ("sample",)
    random_streams = 1

    def configure(self) -> None:
        _unit_outputs(self, derivatives=False)

    @staticmethod
    @njit
    def init(x, d, m, p):
        d[NOISE_D.sample] = p[NOISE.std] * normal(m, 0)

    @staticmethod
    @njit
    def output(t, x, d, m, p, y):
        y[0] = d[NOISE_D.sample]

    @staticmethod
    @njit
    def update(t, x, d, m, p):
        d[NOISE_D.sample] = p[NOISE.std] * normal(m, 0)


# the offsets their kernels name
STEP, SINE, CHIRP, SWEPT = Step.P, Sine.P, Chirp.P, SweptSine.P
NOISE, NOISE_D = WhiteNoise.P, WhiteNoise.D
CONSTANT, MULTISINE, WAYPOINTS = Constant.P, Multisine.P, Waypoints.P
