"""Parameter adaptation for seed 001's switching first-order system: two observers of ``tau``.

Seed 001 (Patoglu & Gillespie) identifies hybrid-system parameters by feedback
in two ways, both gradient methods driven by sensitivities:

- **continuous time** (its section 3): an adjustable model runs beside the
  system, the trajectory sensitivity ``lambda = dx^/dtau^`` runs with it (with
  its jumps at switches, eq. 12), and ``tau^`` follows the gradient of the
  squared output error - "as long as the modes of the nominal and the
  perturbed systems agree";
- **discrete time** (its section 4): a Newton observer on the impact map,
  here the map from one switching surface to the next, whose measured output
  is the time between switches.

:class:`SwitchingGradientObserver` and :class:`SwitchingNewtonObserver` are
those two for :class:`~hapflow.blocks.SwitchingFirstOrder` (``x' = -tau x +
u_i``, switching at ``s1`` rising and ``s2`` falling), with ``u1``, ``u2``,
``s1``, ``s2`` known and ``tau`` unknown; ``tests/evals/test_adaptation.py``
runs them side by side.
"""
from __future__ import annotations

import math

from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, Structural, nonnegative, one_of, positive
from hapflow.ports import In, Out


class TauObserver:
    """What the two observers share: the initial estimate ``tau0`` and the system's known
    inputs and switching levels, which must switch at ``tau0``."""

    params = {"tau0": Live(0.5, unit="1/s", check=positive, doc="initial estimate of tau"),
              "u1": Live(2.0, unit="1/s", doc="input in mode 1 (known)"),
              "u2": Live(0.0, unit="1/s", doc="input in mode 2 (known)"),
              "s1": Live(1.5, doc="switching level 1 -> 2, x rising (known)"),
              "s2": Live(0.5, doc="switching level 2 -> 1, x falling (known)")}

    def validate(self, changed: str | None) -> None:
        """Switching needs ``u1/tau > s1 > s2 > u2/tau`` (the rule of SwitchingFirstOrder)."""
        u1, u2, s1, s2, tau = (self.values[k] for k in ("u1", "u2", "s1", "s2", "tau0"))
        if not u1 / tau > s1 > s2 > u2 / tau:
            raise ParamError(changed or "s1", f"switching needs u1/tau > s1 > s2 > u2/tau at "
                                              f"the initial estimate (got u1/tau = "
                                              f"{u1 / tau:g}, s1 = {s1:g}, s2 = {s2:g}, "
                                              f"u2/tau = {u2 / tau:g})")


class SwitchingGradientObserver(TauObserver, Block):
    """Continuous-time gradient adaptation of ``tau`` (seed 001 section 3).

    An adjustable copy of the switching system, pulled towards the measured
    state by output injection ``L``, with its sensitivity to ``tau^`` and
    the gradient law on ``e = x^ - x``::

        x^'      = -tau^ x^ + u_i^ + L (x - x^)
        lambda'  = -(tau^ + L) lambda - x^                   (lambda = dx^/dtau^)
        tau^'    = -gain e lambda      while the model's mode i^ is the system's

    With ``modes: measured`` (default) the model's mode is the system's,
    read from its ``mode`` output (a thermostat knows whether it heats), so
    the two always agree; the switching times are the system's and do not
    depend on ``tau^``, so ``lambda`` does not jump.  With ``modes: own``
    the model switches on its own state (guards ``s1 - x^``, ``x^ - s2``),
    its sensitivity jumps as in seed 001 eq. 12 with an identity reset
    (``t_tau = -lambda- / f-``, ``lambda+ = lambda- - (f+ - f-) t_tau``),
    and ``tau^`` adapts only while its mode is the system's - the setting
    the seed warns about: a model whose switches drift from the system's
    sees the error of the other mode's flow, and output injection cannot
    pull it back (it keeps the model's state from reaching its own
    switching level).

    Ports
    -----
    x        : in, (1,), 1          measured state of the system
    mode     : in, (1,), i8         the system's mode (1 or 2)
    tau      : out, (1,), 1/s       estimate of tau (state only)
    x_hat    : out, (1,), 1         the model's state (state only)
    sens     : out, (1,), s         dx^/dtau^ (state only)
    agree    : out, (1,), i8        1 while the model's mode is the system's
    """

    inputs = {"x": In(1, unit="", doc="measured state"),
              "mode": In(1, dtype="i8", unit="", doc="the system's mode")}
    outputs = {"tau": Out(1, unit="1/s", depends="state", doc="estimate of tau"),
               "x_hat": Out(1, unit="", depends="state", doc="the model's state"),
               "sens": Out(1, unit="s", depends="state", doc="dx^/dtau^"),
               "agree": Out(1, dtype="i8", unit="", depends=("mode",),
                            doc="1 while the modes agree")}
    params = {**TauObserver.params,
              "x0": Live(0.0, doc="initial model state (mode 1)"),
              "gain": Live(2.0, check=positive, doc="adaptation gain"),
              "injection": Live(1.0, unit="1/s", check=nonnegative, doc="output injection L"),
              "modes": Structural("measured", kind="str", check=one_of("measured", "own"),
                                  doc="the model switches with the system (its measured mode) "
                                      "or on its own state")}
    derived = {"own_modes": Derived(lambda b: b.modes == "own",
                                    doc="1: the model switches on its own state")}
    cstate = ("x_hat", "sens", "tau")
    initial_from = {"x_hat": "x0", "tau": "tau0"}
    initial_depends = ("x0", "s1")
    istate = 1
    nguards = 1

    def initial_state(self):
        x, d, m = super().initial_state()
        m[0] = 1 if self.x0 < self.s1 else 2        # the model's mode at its initial state
        return x, d, m

    @staticmethod
    @njit
    def output(t, x, d, m, p, x_meas, mode, tau, x_hat, sens, agree):
        tau[0] = x[GRADIENT_X.tau]
        x_hat[0] = x[GRADIENT_X.x_hat]
        sens[0] = x[GRADIENT_X.sens]
        agree[0] = 1 if p[GRADIENT.own_modes] == 0.0 or m[0] == mode[0] else 0

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, x_meas, mode, dx):
        xh, lam, tau = x[GRADIENT_X.x_hat], x[GRADIENT_X.sens], x[GRADIENT_X.tau]
        own = p[GRADIENT.own_modes] != 0.0
        model_mode = m[0] if own else mode[0]
        u = p[GRADIENT.u1] if model_mode == 1 else p[GRADIENT.u2]
        inj = p[GRADIENT.injection]
        dx[GRADIENT_X.x_hat] = -tau * xh + u + inj * (x_meas[0] - xh)
        dx[GRADIENT_X.sens] = -(tau + inj) * lam - xh
        adapt = model_mode == mode[0]
        dx[GRADIENT_X.tau] = -p[GRADIENT.gain] * (xh - x_meas[0]) * lam if adapt else 0.0

    @staticmethod
    @njit
    def guard(t, x, d, m, p, x_meas, mode, g):
        xh = x[GRADIENT_X.x_hat]
        if p[GRADIENT.own_modes] == 0.0:
            g[0] = 1.0                              # switches with the system: no event of its own
        else:
            g[0] = p[GRADIENT.s1] - xh if m[0] == 1 else xh - p[GRADIENT.s2]

    @staticmethod
    @njit
    def reset(t, x, d, m, p, x_meas, mode, k):
        xh, tau = x[GRADIENT_X.x_hat], x[GRADIENT_X.tau]
        u_before = p[GRADIENT.u1] if m[0] == 1 else p[GRADIENT.u2]
        u_after = p[GRADIENT.u2] if m[0] == 1 else p[GRADIENT.u1]
        f_before = -tau * xh + u_before + p[GRADIENT.injection] * (x_meas[0] - xh)
        t_tau = -x[GRADIENT_X.sens] / f_before
        x[GRADIENT_X.sens] -= (u_after - u_before) * t_tau
        m[0] = 3 - m[0]


@njit
def _interval(tau, u, start, end):
    """Time for ``x' = -tau x + u`` to go from ``start`` to ``end``, and its derivative in tau."""
    a = u / tau
    span = math.log((start - a) / (end - a)) / tau
    slope = -span / tau + a / (tau * tau) * (1.0 / (start - a) - 1.0 / (end - a))
    return span, slope


class SwitchingNewtonObserver(TauObserver, Block):
    """Newton observer of ``tau`` on the switching system's impact map (seed 001 section 4).

    The impact map takes the system from one switching surface to the next:
    in mode 1 from ``s2`` up to ``s1``, in mode 2 from ``s1`` down to
    ``s2``; its measured output is the time between the switches,
    ``T_i(tau) = ln((x_a - u_i/tau) / (x_b - u_i/tau)) / tau``.  At every
    switch after the second (the first interval starts from ``x0``, not from
    a surface) the observer takes ``iterations`` Newton steps
    ``tau <- tau - (T_i(tau) - T_meas) / T_i'(tau)`` (Moraal & Grizzle with a
    one-step lifting: one unknown, one measurement per switch), halving a
    step that would leave the range where both modes switch.

    Ports
    -----
    switch_time : in, (1,), s        time of the system's latest switch
    mode        : in, (1,), i8       the system's mode (1 or 2)
    tau         : out, (1,), 1/s     estimate of tau (state only)
    updates     : out, (1,), i8      Newton updates so far (state only)
    """

    inputs = {"switch_time": In(1, unit="s", doc="time of the system's latest switch"),
              "mode": In(1, dtype="i8", unit="", doc="the system's mode")}
    outputs = {"tau": Out(1, unit="1/s", depends="state", doc="estimate of tau"),
               "updates": Out(1, dtype="i8", unit="count", depends="state",
                              doc="Newton updates so far")}
    params = {**TauObserver.params,
              "iterations": Live(1, check=positive, doc="Newton steps per switch")}
    dstate = ("tau", "last", "seen")
    initial_from = {"tau": "tau0"}
    istate = 2

    @staticmethod
    @njit
    def output(t, x, d, m, p, switch_time, mode, tau, updates):
        tau[0] = d[NEWTON_D.tau]
        updates[0] = m[0]

    @staticmethod
    @njit
    def update(t, x, d, m, p, switch_time, mode):
        ts = switch_time[0]
        if ts == d[NEWTON_D.seen]:
            return                                  # no new switch
        d[NEWTON_D.seen] = ts
        last = d[NEWTON_D.last]
        d[NEWTON_D.last] = ts
        m[1] += 1
        if m[1] == 1:
            return                                  # the first switch ends the run-in from x0
        measured = ts - last
        s1, s2 = p[NEWTON.s1], p[NEWTON.s2]
        heating = mode[0] == 2                      # the interval just ended was mode 1
        u = p[NEWTON.u1] if heating else p[NEWTON.u2]
        start, end = (s2, s1) if heating else (s1, s2)
        tau = d[NEWTON_D.tau]
        for _ in range(int(p[NEWTON.iterations])):
            span, slope = _interval(tau, u, start, end)
            step = (span - measured) / slope
            if not math.isfinite(step):
                break                               # no switching at tau: keep the estimate
            for _ in range(60):                     # stay where both modes switch
                if tau - step > 0.0 and p[NEWTON.u1] / (tau - step) > s1 \
                        and p[NEWTON.u2] / (tau - step) < s2:
                    break
                step *= 0.5
            else:
                step = 0.0
            tau -= step
        d[NEWTON_D.tau] = tau
        m[0] += 1


GRADIENT, GRADIENT_X = SwitchingGradientObserver.P, SwitchingGradientObserver.X
NEWTON, NEWTON_D = SwitchingNewtonObserver.P, SwitchingNewtonObserver.D
