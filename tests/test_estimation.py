"""Kalman filters (blocks/estimation.py) against filterpy on the same models and data.

One graph holds every filter (so it is compiled once): a linear KF on a
constant-velocity model with noisy position measurements (without and with
an acceleration input), the UKF with the linear model and a control input,
and the UKF on the damped pendulum.  Measurements and inputs come from a
seeded numpy RNG through ``tests.helpers.table``; filterpy runs
``predict`` then ``update`` on the same rows.
"""
from __future__ import annotations

import numpy as np
import pytest

filterpy_kalman = pytest.importorskip("filterpy.kalman")

import hapflow  # noqa: E402
import hapflow.blocks  # noqa: E402,F401  (registers the library blocks)
from hapflow.block import ParamError  # noqa: E402
from hapflow.blocks.estimation import KalmanFilter, UnscentedKalmanFilter  # noqa: E402
from hapflow.errors import GraphError  # noqa: E402
from tests.helpers import table  # noqa: E402

RATE = 100.0
TS = 1.0 / RATE
N = 250
DURATION = N * TS

# constant-velocity model: x = [position (m), velocity (m/s)], u = acceleration (m/s^2)
A = [1.0, TS, 0.0, 1.0]
B = [0.5 * TS * TS, TS]
H = [1.0, 0.0]
Q = [1e-4, 2e-5, 2e-5, 4e-3]
R = [0.05 ** 2]
X0 = [0.1, -0.2]
P0 = [1.0, 0.0, 0.0, 2.0]
KF_PARAMS = dict(states=2, measurements=1, A=A, H=H, Q=Q, R=R, x0=X0, P0=P0)

# pendulum
PEND = dict(g=9.81, L=0.5, c=0.4)
SIGMA = dict(alpha=0.3, beta=2.0, kappa=1.0)
PQ = [1e-6, 0.0, 0.0, 1e-4]
PR = [0.02 ** 2]
PX0 = [0.5, 0.0]
PP0 = [0.1, 0.0, 0.0, 0.5]


def _data():
    rng = np.random.default_rng(20240611)
    acc = rng.normal(0.0, 1.0, N)
    pos, vel, zs = 0.0, 0.3, np.empty(N)
    for k in range(N):
        pos, vel = pos + TS * vel + 0.5 * TS * TS * acc[k], vel + TS * acc[k]
        zs[k] = pos + rng.normal(0.0, 0.05)
    th, om, zp = 0.8, 0.0, np.empty(N)
    for k in range(N):                      # the "true" pendulum, finer steps
        for _ in range(10):
            th, om = th + 0.1 * TS * om, om + 0.1 * TS * (-PEND["g"] / PEND["L"] * np.sin(th)
                                                          - PEND["c"] * om)
        zp[k] = th + rng.normal(0.0, 0.02)
    return zs, acc, zp


ZS, ACC, ZP = _data()


def _graph() -> hapflow.Graph:
    g = hapflow.Graph(name="test_estimation", rate=RATE, duration=DURATION)
    g.add("z", table(ZS[:, None]))
    g.add("acc", table(ACC[:, None]))
    g.add("zp", table(ZP[:, None]))
    g.add("kf", KalmanFilter(**KF_PARAMS))
    g.wire("z.y -> kf.z")
    g.add("kfu", KalmanFilter(controls=1, B=B, **KF_PARAMS))
    g.wire("z.y -> kfu.z")
    g.wire("acc.y -> kfu.u")
    g.add("ukl", UnscentedKalmanFilter(controls=1, B=B, **SIGMA, **KF_PARAMS))
    g.wire("z.y -> ukl.z")
    g.wire("acc.y -> ukl.u")
    g.add("ukp", UnscentedKalmanFilter(model="pendulum", Q=PQ, R=PR, x0=PX0, P0=PP0,
                                       **SIGMA, **PEND))
    g.wire("zp.y -> ukp.z")
    for name in ("kf", "kfu", "ukl", "ukp"):
        g.record(f"{name}.x_hat", f"{name}.P_diag", f"{name}.innovation")
    return g


@pytest.fixture(scope="module")
def graph():
    return _graph()


@pytest.fixture(scope="module")
def run(graph):
    return hapflow.Simulation(graph).run(DURATION)


def _filterpy_kf(control: bool):
    kf = filterpy_kalman.KalmanFilter(dim_x=2, dim_z=1, dim_u=1 if control else 0)
    kf.F = np.reshape(A, (2, 2))
    kf.B = np.reshape(B, (2, 1)) if control else None
    kf.H = np.reshape(H, (1, 2))
    kf.Q = np.reshape(Q, (2, 2))
    kf.R = np.reshape(R, (1, 1))
    kf.x = np.reshape(X0, (2, 1))
    kf.P = np.reshape(P0, (2, 2))
    xs, ps, ys = [], [], []
    for k in range(N):
        kf.predict(u=np.array([[ACC[k]]]) if control else None)
        kf.update(np.array([[ZS[k]]]))
        xs.append(kf.x.ravel().copy())
        ps.append(np.diag(kf.P).copy())
        ys.append(kf.y.ravel().copy())
    return np.array(xs), np.array(ps), np.array(ys)


def _pendulum_fx(x, dt):
    th, om = x
    return np.array([th + dt * om, om + dt * (-PEND["g"] / PEND["L"] * np.sin(th) - PEND["c"] * om)])


def _filterpy_ukf(model: str):
    points = filterpy_kalman.MerweScaledSigmaPoints(2, **SIGMA)
    if model == "pendulum":
        fx, hx, q, r, x0, p0, zs = _pendulum_fx, (lambda x: x[:1]), PQ, PR, PX0, PP0, ZP
    else:
        a, b = np.reshape(A, (2, 2)), np.asarray(B)

        def fx(x, dt, u=0.0):
            return a @ x + b * u
        hx, q, r, x0, p0, zs = (lambda x: x[:1]), Q, R, X0, P0, ZS
    ukf = filterpy_kalman.UnscentedKalmanFilter(dim_x=2, dim_z=1, dt=TS, hx=hx, fx=fx,
                                                points=points)
    ukf.x = np.array(x0)
    ukf.P = np.reshape(p0, (2, 2))
    ukf.Q = np.reshape(q, (2, 2))
    ukf.R = np.reshape(r, (1, 1))
    xs, ps, ys = [], [], []
    for k in range(N):
        if model == "pendulum":
            ukf.predict()
        else:
            ukf.predict(u=ACC[k])
        ukf.update(np.array([zs[k]]))
        xs.append(ukf.x.copy())
        ps.append(np.diag(ukf.P).copy())
        ys.append(np.atleast_1d(ukf.y).copy())
    return np.array(xs), np.array(ps), np.array(ys)


def _check(run, name, ref, rtol, atol):
    xs, ps, ys = ref
    assert run.signals[f"{name}.x_hat"].shape == (N, 2)
    np.testing.assert_allclose(run.signals[f"{name}.x_hat"], xs, rtol=rtol, atol=atol)
    np.testing.assert_allclose(run.signals[f"{name}.P_diag"], ps, rtol=rtol, atol=atol)
    np.testing.assert_allclose(run.signals[f"{name}.innovation"], ys, rtol=rtol, atol=atol)


def test_kalman_filter_matches_filterpy(run):
    assert run.time.size == N >= 200
    _check(run, "kf", _filterpy_kf(control=False), 0.0, 1e-9)


def test_kalman_filter_with_control_matches_filterpy(run):
    _check(run, "kfu", _filterpy_kf(control=True), 0.0, 1e-9)


def test_ukf_pendulum_matches_filterpy(run):
    _check(run, "ukp", _filterpy_ukf("pendulum"), 1e-9, 1e-12)
    # and it tracks the pendulum: final estimate within a few noise sigmas of the data
    assert abs(run.signals["ukp.x_hat"][-1, 0] - ZP[-1]) < 0.1


def test_ukf_linear_with_control_matches_filterpy(run):
    _check(run, "ukl", _filterpy_ukf("linear"), 1e-9, 1e-12)


def test_ukf_on_linear_model_equals_the_kalman_filter(run):
    # the unscented transform is exact for a linear model
    for sig in ("x_hat", "P_diag"):
        np.testing.assert_allclose(run.signals[f"ukl.{sig}"], run.signals[f"kfu.{sig}"],
                                   rtol=1e-7, atol=1e-10)


def test_compiled_and_interpreted_are_bit_identical(graph, run):
    short = hapflow.Simulation(graph, interpret=True).run(0.3)
    n = short.time.size
    assert n == 30
    for key, values in short.signals.items():
        assert np.array_equal(values, run.signals[key][:n]), key


@pytest.mark.parametrize("cls, bad, param, text", [
    (KalmanFilter, dict(A=[1.0, 0.0, 1.0]), "A", "n x n = 4"),
    (KalmanFilter, dict(H=[1.0]), "H", "m x n"),
    (KalmanFilter, dict(controls=1, B=[1.0]), "B", "n x l"),
    (KalmanFilter, dict(controls=1), "B", "required"),
    (KalmanFilter, dict(x0=[0.0]), "x0", "n = 2"),
    (KalmanFilter, dict(R=[0.0]), "R", "positive definite"),
    (KalmanFilter, dict(Q=[1.0, 0.5, 0.0, 1.0]), "Q", "symmetric"),
    (UnscentedKalmanFilter, dict(P0=[1.0, 0.0, 0.0]), "P0", "n x n"),
    (UnscentedKalmanFilter, dict(model="pendulum", states=3), "states", "pendulum"),
])
def test_bad_matrix_is_a_param_error_naming_it(cls, bad, param, text):
    values = {**KF_PARAMS, **bad}
    with pytest.raises(ParamError) as err:
        cls(**values)
    assert err.value.param == param
    assert f"'{param}'" in str(err.value)
    assert text in str(err.value)


def test_setting_a_wrong_size_is_refused(graph):
    sim = hapflow.Simulation(graph)
    with pytest.raises(GraphError, match="'A'"):
        sim.set("kf.A", [1.0, 2.0])
