"""Kinematic Kalman filter of a 1-DOF linear probe (seed 004 chapter 2, the rig's velocity source).

The probe of the identification rig carries an encoder (position, the
filter's measurement) and the impedance head's accelerometer (the filter's
input).  A kinematic Kalman filter fuses the two without any dynamic model
of the device: the state ``[x, v, a]`` is propagated by kinematics alone,
with the measured acceleration ``u`` as input and the acceleration
augmented as a random walk driven by ``u`` (seed 004 section 2.2.1.1).
Over one sample ``dt`` the acceleration is taken linear between the
previous state ``a`` and the current reading ``u``::

    x[k] = x + dt v + dt^2 (2 a + u) / 6
    v[k] = v + dt (a + u) / 2
    a[k] = u + w                    (w: accelerometer noise)

so ``A = [[1, dt, dt^2/3], [0, 1, dt/2], [0, 0, 0]]``,
``B = [dt^2/6, dt/2, 1]``, ``H = [1, 0, 0]``, ``Q = sigma_a^2 B B'``,
``R = q^2/12`` for an encoder of resolution ``q``.  The filter itself is
the linear :class:`~hapflow.blocks.estimation.KalmanFilter` (Joseph form).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

import numpy as np

from hapflow.block import Block
from hapflow.errors import GraphError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, positive
from hapflow.ports import In, Out

from .estimation import (PACKED, KalmanFilter, Layout, commit_posterior, filter_steps,
                         fixed_ops, init_from)


def probe_matrices(dt: float, accel_noise: float, resolution: float) -> dict[str, list[float]]:
    """``A``, ``B``, ``H``, ``Q``, ``R`` of the probe KKF (flat row-major lists).

    Parameters
    ----------
    dt : float
        Sample time (s).
    accel_noise : float
        Standard deviation of the acceleration input (m/s^2).
    resolution : float
        Encoder count length (m); its quantisation variance is ``q^2 / 12``.
    """
    b = np.array([dt * dt / 6.0, dt / 2.0, 1.0])
    a = np.array([[1.0, dt, dt * dt / 3.0], [0.0, 1.0, dt / 2.0], [0.0, 0.0, 0.0]])
    return {"A": a.ravel().tolist(), "B": b.tolist(), "H": [1.0, 0.0, 0.0],
            "Q": (accel_noise ** 2 * np.outer(b, b)).ravel().tolist(),
            "R": [resolution ** 2 / 12.0]}


class ProbeKKF(Block):
    """Kinematic Kalman filter of the 1-DOF probe: encoder + accelerometer -> x, v, a.

    See the module docstring for the model.  Runs at its block rate (the
    rig's 4 kHz loop by default); the estimate at sample ``k`` already uses
    ``pos[k]`` and ``accel[k]`` (direct feedthrough).  ``P0`` starts wide
    (``pos_std0``, ``vel_std0``, ``acc_std0``) around ``x = pos0``,
    ``v = a = 0``, so the filter locks on within a few samples.

    Ports
    -----
    pos   : in, (1,), m          encoder position
    accel : in, (1,), m/s^2      measured acceleration (impedance head)
    pos_hat : out, (1,), m       position estimate
    vel_hat : out, (1,), m/s     velocity estimate
    acc_hat : out, (1,), m/s^2   acceleration estimate
    """

    inputs = {"pos": In(1, unit="m", doc="encoder position"),
              "accel": In(1, unit="m/s^2", doc="measured acceleration")}
    outputs = {"pos_hat": Out(1, unit="m", doc="position estimate"),
               "vel_hat": Out(1, unit="m/s", doc="velocity estimate"),
               "acc_hat": Out(1, unit="m/s^2", doc="acceleration estimate")}
    params = {"accel_noise": Live(0.05, unit="m/s^2", check=positive,
                                  doc="std of the acceleration input (noise and model error)"),
              "resolution": Live(5e-6, unit="m", check=positive, doc="encoder count length q"),
              "pos0": Live(0.0, unit="m", doc="initial position estimate"),
              "pos_std0": Live(1e-3, unit="m", check=positive, doc="initial position std"),
              "vel_std0": Live(1.0, unit="m/s", check=positive, doc="initial velocity std"),
              "acc_std0": Live(100.0, unit="m/s^2", check=positive,
                               doc="initial acceleration std")}

    derived = {name: Derived(lambda b, name=name: b.matrices()[name], size=size, doc=doc)
               for name, size, doc in (("A", 9, "state transition, flat"),
                                       ("B", 3, "input matrix"), ("H", 3, "measurement matrix"),
                                       ("Q", 9, "process noise covariance, flat"),
                                       ("R", 1, "encoder noise variance"),
                                       ("x0", 3, "initial state estimate"),
                                       ("P0", 9, "initial covariance, flat"))}

    def configure(self) -> None:
        self.dstate = self.filter(1.0).dstate

    def filter(self, dt: float) -> KalmanFilter:
        """The equivalent :class:`KalmanFilter` at sample time ``dt`` (s)."""
        matrices = self.matrices(dt)
        return KalmanFilter(states=3, measurements=1, controls=1,
                            **{name: value.tolist() for name, value in matrices.items()})

    def matrices(self, dt: float | None = None) -> dict[str, np.ndarray]:
        """``A``, ``B``, ``H``, ``Q``, ``R``, ``x0``, ``P0`` flat at sample time ``dt`` (s;
        default: the block's)."""
        if dt is None:
            if self.sample_time is None:
                raise GraphError("ProbeKKF: the sample time is not known until the block is "
                                 "added to a graph")
            dt = self.sample_time
        p0 = np.diag([self.pos_std0, self.vel_std0, self.acc_std0]) ** 2
        model = probe_matrices(dt, self.accel_noise, self.resolution)
        return {**{name: np.asarray(value) for name, value in model.items()},
                "x0": np.array([self.pos0, 0.0, 0.0]), "P0": p0.ravel()}

    @staticmethod
    @njit
    def init(x, d, m, p):
        init_from(d, p, PROBE.x0, PROBE.P0, 3)

    def kernels(self) -> dict[str, Callable]:
        return {"output": _probe_output(), **super().kernels()}

    @staticmethod
    @njit
    def update(t, x, d, m, p, pos, accel):
        commit_posterior(d, p, 3)


PROBE = ProbeKKF.P
PROBE_LAYOUT = Layout(n=3, m=1, l=1, bu=1, numjac=0, ns=0, simplex=0,
                      **{name: getattr(PROBE, name, -1) for name in PACKED})
"""The probe's filter step's layout: its sizes and where its values lie in ``p``."""


@lru_cache(maxsize=None)
def _probe_output() -> Callable:
    """The probe's ``output`` kernel over the Kalman step with its sizes fixed at compile time
    (3 states, 1 input, 1 output).

    Built on first use, not at import: building a step writes and imports its generated
    modules (:func:`hapflow.closures.frozen`), which every process importing the block
    library would otherwise pay, whether or not its graph holds a probe.
    """
    step = filter_steps(fixed_ops(3, 1, 1, 0, False)).kf

    @njit
    def output(t, x, d, m, p, pos, accel, pos_hat, vel_hat, acc_hat):
        xn = step(d, p, pos, accel, PROBE_LAYOUT)[0]
        pos_hat[0] = d[xn]
        vel_hat[0] = d[xn + 1]
        acc_hat[0] = d[xn + 2]
    return output
