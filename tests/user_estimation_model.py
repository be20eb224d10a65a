"""Damped pendulum [theta, omega] by explicit Euler, z = theta: a model defined outside hapflow.

A plain module, as a user writes one for the nonlinear Kalman filters (see
``hapflow.blocks.estimation_models.register``): the same equations as the
library's ``pendulum``, with g, L, c as its coefficients.
"""
import math

from hapflow.jit import njit_noalloc

STATES, MEASUREMENTS, CONTROLS = 2, 1, 0
COEFFS = (("g", "m/s^2", 9.81), ("L", "m", 1.0), ("c", "1/s", 0.0))


@njit_noalloc(inline="always")
def f(s, so, out, oo, p, pc, u, dt, mode, w):
    th, om = s[so], s[so + 1]
    out[oo] = th + dt * om
    out[oo + 1] = om + dt * (-p[pc] / p[pc + 1] * math.sin(th) - p[pc + 2] * om)


def check(coeffs):
    return None if coeffs[1] > 0.0 else f"L must be > 0 m, got {coeffs[1]:g}"
