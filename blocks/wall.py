"""Virtual wall: a sampled spring-damper with one-sided contact and passivity control.

A wall rendered at a finite rate from a quantised position is not passive:
the zero-order hold delays the spring force by about half a sample, which
acts as the negative damping ``-k T / 2`` (Colgate & Schenkel), so a stiff
wall returns more energy than it took and a light finger bounces ever higher.

The passivity layer accounts the energy exactly as the hold delivers it.
The force ``F_k`` acts unchanged from sample ``k`` to ``k+1`` while the
finger moves by ``x_{k+1} - x_k``, so the work the wall does on the finger
is ``W = sum F_k (x_{k+1} - x_k)``.  With measured positions
``x^_k = x_k + e_k`` (``|e_k| <= r``, the ``resolution``) summation by parts
gives ``W <= W^ + r sum |F_k - F_{k-1}|``, so the wall's *observed* energy::

    E_n = - sum_{k<n} F_k (x^_{k+1} - x^_k) - r sum_{k<n} |F_k - F_{k-1}|

is a lower bound of the energy it has absorbed: the wall is passive while
``E >= 0``.  The controller (``passivity: tdpa``, a time-domain passivity
observer with an energy-reservoir controller) keeps it there: a push that
would return more than ``E`` over the coming sample is scaled down to return
at most ``E``.  The coming displacement is predicted by extrapolating the
last two, ``x^_{n+1} - x^_n ~ 2 x^_n - 3 x^_{n-1} + x^_{n-2}``: a finger
thrown out by the wall accelerates, and the plain backward difference would
under-predict its step.  The wall therefore softens on the way out only as
much as its energy balance requires, never pulls (one-sided contact), and
never adds force (no unbounded damping gains, unlike the classic
``alpha = -E / (v^2 T)`` controller, which a quantised velocity near zero
drives to huge forces).
"""
from __future__ import annotations

from hapflow.block import Block
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, Structural, nonnegative, one_of, positive
from hapflow.ports import In, Out

@njit
def _wall_force(x, v, p):
    """Desired spring-damper force on the finger (N, along +x), never pulling."""
    pen = p[WALL.direction] * (x - p[WALL.wall])
    if pen <= 0.0:
        return 0.0
    push = p[WALL.stiffness] * pen + p[WALL.damping] * p[WALL.direction] * v
    return -p[WALL.direction] * push if push > 0.0 else 0.0


@njit
def _passive_force(force, step, energy):
    """Scale ``force`` so it returns at most ``energy`` (J) over a predicted ``step`` (m)."""
    returned = force * step
    if returned > 0.0 and returned > energy:
        force *= max(energy, 0.0) / returned
    return force


class VirtualWall(Block):
    """Stiff virtual wall rendered from a sampled, quantised position, with passivity control.

    The wall fills ``direction (x - wall) > 0``.  Inside it the force on the
    finger is ``-direction (k pen + b direction v^)`` with ``pen`` the
    penetration and ``v^`` the backward difference of the measured position,
    clipped so the wall never pulls; outside it is zero.  The block runs at
    its sample rate and holds its force in between (zero-order hold), like a
    haptic servo.  ``passivity: tdpa`` adds the energy observer and
    controller of the module docstring; ``energy`` reports the observed
    energy (J, >= 0 means passive so far) in both settings.

    Ports
    -----
    pos    : in, (1,), m      measured position (e.g. an Encoder's output)
    force  : out, (1,), N     force on the finger along +x (held between samples)
    energy : out, (1,), J     observed energy absorbed by the wall up to this sample
    """

    inputs = {"pos": In(1, unit="m", doc="measured position")}
    outputs = {"force": Out(1, unit="N", doc="force on the finger along +x"),
               "energy": Out(1, unit="J", depends="state", doc="observed energy absorbed so far")}
    params = {"stiffness": Live(20e3, unit="N/m", check=positive, doc="wall spring rate k"),
              "damping": Live(0.0, unit="N s/m", check=nonnegative, doc="wall damping b"),
              "wall": Live(0.0, unit="m", doc="surface position"),
              "direction": Live(1.0, check=one_of(1.0, -1.0),
                                doc="+1: the wall fills x > wall; -1: x < wall"),
              "resolution": Live(0.0, unit="m", check=nonnegative,
                                 doc="bound of the position measurement error (encoder count)"),
              "passivity": Structural("tdpa", kind="str", check=one_of("off", "tdpa"),
                                      doc="energy observer and controller, or none")}
    derived = {"period": Derived(lambda b: b.sample_time, unit="s", doc="sample time T"),
               "tdpa": Derived(lambda b: b.passivity == "tdpa", doc="1: passivity control on")}
    # previous two samples and force, observed energy, samples seen; the work entries carry
    # what output computed to update (see hapflow/block.py)
    dstate = ("x_prev", "x_prev2", "f_prev", "energy", "seen", "work_force", "work_energy")

    @staticmethod
    @njit
    def output(t, x, d, m, p, pos, force, energy):
        xn, x_prev, f_prev, seen = pos[0], d[WALL_D.x_prev], d[WALL_D.f_prev], d[WALL_D.seen]
        period, r = p[WALL.period], p[WALL.resolution]
        v = (xn - x_prev) / period if seen >= 1.0 else 0.0
        e = d[WALL_D.energy] - f_prev * (xn - x_prev) if seen >= 1.0 else 0.0
        f = _wall_force(xn, v, p)
        if p[WALL.tdpa] != 0.0:
            # next displacement, extrapolated with the last second difference
            step = 2.0 * xn - 3.0 * x_prev + d[WALL_D.x_prev2] if seen >= 2.0 else v * period
            f = _passive_force(f, step, e - r * abs(f - f_prev))
        e -= r * abs(f - f_prev)
        force[0] = f
        energy[0] = d[WALL_D.energy]
        d[WALL_D.work_force] = f
        d[WALL_D.work_energy] = e

    @staticmethod
    @njit
    def update(t, x, d, m, p, pos):
        d[WALL_D.x_prev2] = d[WALL_D.x_prev]
        d[WALL_D.x_prev] = pos[0]
        d[WALL_D.f_prev] = d[WALL_D.work_force]
        d[WALL_D.energy] = d[WALL_D.work_energy]
        d[WALL_D.seen] += 1.0


WALL, WALL_D = VirtualWall.P, VirtualWall.D       # offsets by name
