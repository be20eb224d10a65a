"""Simulated twins of the test-rig hardware: force-controlled linear motor, encoder."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from hapflow.block import Block
from hapflow.params import Live, positive
from hapflow.ports import In, Out


class LinearMotor(Block):
    """Force-controlled linear motor: force limit, then a first-order force lag.

    The motor's current loop is modelled by its closed-loop force bandwidth
    ``f`` and peak force ``F_max``::

        dF/dt = 2 pi f (clip(force_cmd, -F_max, F_max) - F),   F(0) = 0

    so a step of ``u`` (within the limit) gives ``F(t) = u (1 - exp(-2 pi f t))``.
    The output depends on the state only: the motor breaks algebraic loops.

    Ports
    -----
    force_cmd : in, (1,), N      commanded force
    force     : out, (1,), N     force applied to the load (state only)
    """

    inputs = {"force_cmd": In(1, unit="N", doc="commanded force")}
    outputs = {"force": Out(1, unit="N", depends="state", doc="force applied to the load")}
    params = {"bandwidth": Live(29.0, unit="Hz", check=positive,
                                doc="closed-loop force bandwidth (first-order lag corner)"),
              "peak_force": Live(60.0, unit="N", check=positive,
                                 doc="force command saturation")}
    cstate = 1

    def pack(self) -> np.ndarray:
        return np.array([2.0 * math.pi * self.bandwidth, self.peak_force])

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, force_cmd, dx):
        u = min(max(force_cmd[0], -p[1]), p[1])
        dx[0] = p[0] * (u - x[0])

    @staticmethod
    @njit
    def output(t, x, d, m, p, force_cmd, force):
        force[0] = x[0]


class Encoder(Block):
    """Incremental linear encoder: quantise a position to the count resolution.

    ``counts = floor(true_pos / resolution)`` (the double-precision quotient,
    rounded towards minus infinity, so a position just below a count edge
    reads the lower count, also for negative positions) and
    ``pos = counts * resolution``.  Memoryless; both outputs feed through
    from ``true_pos``.  The count origin is the position 0.

    Ports
    -----
    true_pos : in, (1,), m              position of the scale
    pos      : out, (1,), m             quantised position, counts * resolution
    counts   : out, (1,), i8, count     encoder counts
    """

    inputs = {"true_pos": In(1, unit="m", doc="position of the scale")}
    outputs = {"pos": Out(1, unit="m", doc="quantised position"),
               "counts": Out(1, dtype="i8", unit="count", doc="encoder counts")}
    params = {"resolution": Live(5e-6, unit="m", check=positive, doc="length of one count")}

    @staticmethod
    @njit
    def output(t, x, d, m, p, true_pos, pos, counts):
        c = math.floor(true_pos[0] / p[0])
        counts[0] = c
        pos[0] = c * p[0]
