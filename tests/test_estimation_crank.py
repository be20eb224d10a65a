"""The slider-crank observers of the torque-driven scenario against closed forms.

``slider_crank_force_slope`` is linear in its state ``[T, F, F']`` once the
KKF's motion ``u`` is given, so its EKF and its SS-UKF are both exactly the
linear Kalman filter written out here in numpy (``A`` from the lever ``xs'``,
the torque of the motion ``tau(u)`` as a known input, and the process noise
``Q + (M sa / max(|xs'|, lever))^2`` on ``T``): this checks the model, its
analytic Jacobian and the filters' input-dependent noise hook.  The
kinematic observer ``slider_crank_kkf_walk`` gets the same EKF with its
analytic state Jacobian as with finite differences.
"""
from __future__ import annotations

import numpy as np
import pytest

import hapflow
import hapflow.blocks  # noqa: F401
from hapflow.blocks.estimation import ExtendedKalmanFilter, UnscentedKalmanFilter
from hapflow.blocks.multibody import crank_position, crank_terms, crank_torque
from tests.helpers import table

RATE, N = 1000.0, 1500
PLANT = (0.3, 0.6, 0.05, 1.872, 3.744, 1.2, 9.81)
MODEL = (0.297, 0.612, 0.049, 1.8529, 3.594, 1.212, 9.81)
SA, LEVER = 3.0, 0.01
COEFFS = [*MODEL, SA, LEVER]
Q = np.diag([0.1, 0.0, 1000.0])
R = 0.0784
P0 = np.diag([100.0, 1e4, 1e4])


def _motion():
    t = np.arange(N) / RATE
    th = 6.0 * t + 0.05 * (1 - np.cos(4 * np.pi * t))
    om = 6.0 + 0.2 * np.pi * np.sin(4 * np.pi * t)
    al = 0.8 * np.pi ** 2 * np.cos(4 * np.pi * t)
    force = 40.0 * np.sin(2 * np.pi * 0.7 * t)
    torque = np.array([crank_torque(*x, *PLANT) for x in zip(th, om, al, force)])
    rng = np.random.default_rng(11)
    kin = np.column_stack([th, om, al]) + rng.normal(0.0, [0.003, 0.05, 1.0], (N, 3))
    return kin, torque + rng.normal(0.0, 0.28, N)


KIN, TORQUE = _motion()


def _numpy_force_observer(kin: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Kalman filter of eq. 3.5 with an integrated random-walk force, step by step."""
    dt = 1.0 / RATE
    x, p, out = np.zeros(3), P0.copy(), np.zeros((len(z), 3))
    for k, ((th, om, al), zk) in enumerate(zip(kin, z)):
        mass, cor, grav, dxs = crank_terms(th, *MODEL)
        a = np.array([[0.0, -dxs, 0.0], [0.0, 1.0, dt], [0.0, 0.0, 1.0]])
        xp = a @ x + [mass * al + cor * om * om + grav, 0.0, 0.0]
        lever_noise = (mass * SA / max(abs(dxs), LEVER)) ** 2
        pp = a @ p @ a.T + Q + np.diag([lever_noise, 0.0, 0.0])
        gain = pp[:, 0] / (pp[0, 0] + R)
        x = xp + gain * (zk - xp[0])
        p = pp - np.outer(gain, gain) * (pp[0, 0] + R)
        out[k] = x
    return out


def _run() -> dict[str, np.ndarray]:
    g = hapflow.Graph(name="test_estimation_crank", rate=RATE, duration=N / RATE)
    g.add("kin", table(KIN))
    g.add("tq", table(TORQUE[:, None]))
    force = dict(model="slider_crank_force_slope", coeffs=COEFFS, Q=Q.ravel().tolist(), R=[R],
                 x0=[0.0, 0.0, 0.0], P0=P0.ravel().tolist())
    g.add("fekf", ExtendedKalmanFilter(**force))
    g.add("fukf", UnscentedKalmanFilter(sigma="simplex", w0=0.5, **force))
    for name in ("fekf", "fukf"):
        g.wire(f"tq.y -> {name}.z")
        g.wire(f"kin.y -> {name}.u")
    slider = np.array([crank_position(th, *PLANT[:3])[5:] for th in KIN[:, 0]])
    acc = slider[:, 0] * KIN[:, 2] + slider[:, 1] * KIN[:, 1] ** 2
    g.add("meas", table(np.column_stack([KIN[:, 0], acc])))
    walk = dict(model="slider_crank_kkf_walk", coeffs=list(MODEL[:3]),
                Q=np.diag([1e-8, 1e-4, 0.1]).ravel().tolist(), R=[9e-6, 0.0, 0.0, 2.7e-3],
                x0=[0.0, 6.0, 0.0], P0=np.diag([1e-4, 1.0, 100.0]).ravel().tolist())
    g.add("kan", ExtendedKalmanFilter(**walk))
    g.add("knum", ExtendedKalmanFilter(jacobian="numeric", **walk))
    for name in ("kan", "knum"):
        g.wire(f"meas.y -> {name}.z")
    for name in ("fekf", "fukf", "kan", "knum"):
        g.record(f"{name}.x_hat")
    return {k.split(".")[0]: v for k, v in hapflow.Simulation(g).run().signals.items()}


@pytest.fixture(scope="module")
def signals() -> dict[str, np.ndarray]:
    return _run()


@pytest.fixture(scope="module")
def expected() -> np.ndarray:
    return _numpy_force_observer(KIN, TORQUE)


def test_force_slope_ekf_is_the_linear_kalman_filter(signals, expected):
    np.testing.assert_allclose(signals["fekf"], expected, rtol=1e-9, atol=1e-8)


def test_force_slope_ss_ukf_is_the_linear_kalman_filter(signals, expected):
    np.testing.assert_allclose(signals["fukf"], expected, rtol=1e-7, atol=1e-6)


def test_force_slope_tracks_the_force_it_is_fed(expected):
    # the closed form itself is an observer: it follows the 40 N force to a few newtons
    t = np.arange(N) / RATE
    error = expected[500:, 1] - 40.0 * np.sin(2 * np.pi * 0.7 * t[500:])
    assert np.sqrt(np.mean(error ** 2)) < 8.0


def test_kkf_walk_analytic_jacobian_matches_finite_differences(signals):
    np.testing.assert_allclose(signals["kan"], signals["knum"], rtol=1e-6, atol=1e-6)
