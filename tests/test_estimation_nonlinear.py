"""EKF and spherical-simplex UKF (blocks/estimation.py) against filterpy and closed forms.

One graph (compiled once) holds: the EKF on the damped pendulum with its
analytic Jacobians and with finite differences (both against filterpy's
``ExtendedKalmanFilter``), the EKF and the SS-UKF on the linear
constant-velocity model with an acceleration input (both exact: equal to
the linear Kalman filter), and the EKF on the two-link arm KKF with
analytic and with finite-difference Jacobians.  A UKF whose measurement is
nonlinear (the slider-crank benchmark observer) against filterpy's UKF.  The data are those of
``tests/test_estimation.py``.
"""
from __future__ import annotations

import numpy as np
import pytest

filterpy_kalman = pytest.importorskip("filterpy.kalman")

import hapflow  # noqa: E402
import hapflow.blocks  # noqa: E402,F401
from hapflow.block import ParamError  # noqa: E402
from hapflow.blocks.estimation import (ExtendedKalmanFilter, UnscentedKalmanFilter,  # noqa: E402
                                       simplex_points)
from tests.helpers import table  # noqa: E402
from tests.test_estimation import (ACC, B, DURATION, KF_PARAMS, N, PEND, PP0, PQ, PR,  # noqa: E402
                                   PX0, RATE, SIGMA, TS, ZP, ZS, _check, _filterpy_kf,
                                   _pendulum_fx)

# two-link arm (seed 004 eq. 2.24): L1, d1, d2 and a smooth joint trajectory
ARM = (0.3, 0.2, 0.15)


def _arm_data():
    t = np.arange(N) * TS
    w1, w2 = 2 * np.pi * 1.3, 2 * np.pi * 0.7
    th1, om1, al1 = 0.8 * np.sin(w1 * t), 0.8 * w1 * np.cos(w1 * t), -0.8 * w1 ** 2 * np.sin(w1 * t)
    th2 = 0.5 + 0.6 * np.sin(w2 * t)
    om2, al2 = 0.6 * w2 * np.cos(w2 * t), -0.6 * w2 ** 2 * np.sin(w2 * t)
    l1, d1, d2 = ARM
    a1 = d1 * al1
    a2 = l1 * al1 * np.cos(th2) + l1 * om1 ** 2 * np.sin(th2) + d2 * (al1 + al2)
    rng = np.random.default_rng(7)
    z = np.column_stack([th1, th2]) + rng.normal(0.0, 0.003, (N, 2))
    u = np.column_stack([a1, a2]) + rng.normal(0.0, 0.05, (N, 2))
    return z, u, np.column_stack([th1, th2, om1, om2, al1, al2])


ARM_Z, ARM_U, ARM_TRUE = _arm_data()
ARM_Q = np.diag([1e-8, 1e-8, 1e-5, 1e-5, 1.0, 1.0]).ravel().tolist()
ARM_P0 = np.diag([1e-4, 1e-4, 1e-2, 1e-2, 10.0, 10.0]).ravel().tolist()
ARM_X0 = ARM_TRUE[0].tolist()
PEND_PARAMS = dict(model="pendulum", Q=PQ, R=PR, x0=PX0, P0=PP0, **PEND)


def _graph() -> hapflow.Graph:
    g = hapflow.Graph(name="test_estimation_nonlinear", rate=RATE, duration=DURATION)
    g.add("z", table(ZS[:, None]))
    g.add("acc", table(ACC[:, None]))
    g.add("zp", table(ZP[:, None]))
    g.add("az", table(ARM_Z))
    g.add("au", table(ARM_U))
    g.add("ekp", ExtendedKalmanFilter(**PEND_PARAMS))
    g.add("ekn", ExtendedKalmanFilter(jacobian="numeric", **PEND_PARAMS))
    g.add("ssp", UnscentedKalmanFilter(sigma="simplex", w0=0.3, **PEND_PARAMS))
    g.add("ukp", UnscentedKalmanFilter(**SIGMA, **PEND_PARAMS))
    for name in ("ekp", "ekn", "ssp", "ukp"):
        g.wire(f"zp.y -> {name}.z")
    g.add("ekl", ExtendedKalmanFilter(controls=1, B=B, **KF_PARAMS))
    g.add("ssl", UnscentedKalmanFilter(sigma="simplex", w0=0.2, controls=1, B=B, **KF_PARAMS))
    for name in ("ekl", "ssl"):
        g.wire(f"z.y -> {name}.z")
        g.wire(f"acc.y -> {name}.u")
    arm = dict(model="two_link_kkf", coeffs=list(ARM), Q=ARM_Q, R=[1e-5, 0.0, 0.0, 1e-5],
               x0=ARM_X0, P0=ARM_P0)
    g.add("eka", ExtendedKalmanFilter(**arm))
    g.add("ekan", ExtendedKalmanFilter(jacobian="numeric", **arm))
    g.add("ssa", UnscentedKalmanFilter(sigma="simplex", **arm))
    for name in ("eka", "ekan", "ssa"):
        g.wire(f"az.y -> {name}.z")
        g.wire(f"au.y -> {name}.u")
    for name in ("ekp", "ekn", "ssp", "ukp", "ekl", "ssl", "eka", "ekan", "ssa"):
        g.record(f"{name}.x_hat", f"{name}.P_diag", f"{name}.innovation")
    return g


@pytest.fixture(scope="module")
def graph():
    return _graph()


@pytest.fixture(scope="module")
def run(graph):
    return hapflow.Simulation(graph).run(DURATION)


def _pendulum_jacobian(x, dt):
    return np.array([[1.0, dt],
                     [-dt * PEND["g"] / PEND["L"] * np.cos(x[0]), 1.0 - dt * PEND["c"]]])


class _PendulumEKF(filterpy_kalman.ExtendedKalmanFilter):
    """filterpy's EKF with the nonlinear pendulum prediction."""

    def predict_x(self, u=0):
        self.x = _pendulum_fx(self.x.ravel(), TS).reshape(2, 1)


def _filterpy_ekf():
    ekf = _PendulumEKF(dim_x=2, dim_z=1)
    ekf.x = np.reshape(PX0, (2, 1))
    ekf.P = np.reshape(PP0, (2, 2))
    ekf.Q = np.reshape(PQ, (2, 2))
    ekf.R = np.reshape(PR, (1, 1))
    hjac = np.array([[1.0, 0.0]])
    xs, ps, ys = [], [], []
    for k in range(N):
        ekf.F = _pendulum_jacobian(ekf.x.ravel(), TS)
        ekf.predict()
        ekf.update(np.array([[ZP[k]]]), lambda x: hjac, lambda x: x[:1])
        xs.append(ekf.x.ravel().copy())
        ps.append(np.diag(ekf.P).copy())
        ys.append(np.ravel(ekf.y).copy())
    return np.array(xs), np.array(ps), np.array(ys)


def test_ekf_pendulum_matches_filterpy(run):
    _check(run, "ekp", _filterpy_ekf(), 1e-9, 1e-12)


def test_ekf_with_finite_differences_matches_filterpy(run):
    # central differences: truncation ~ (6e-6)^2 relative; rounding ~ eps / 6e-6
    _check(run, "ekn", _filterpy_ekf(), 1e-7, 1e-9)


def test_ekf_and_ss_ukf_on_a_linear_model_equal_the_kalman_filter(run):
    xs, ps, ys = _filterpy_kf(control=True)
    for name in ("ekl", "ssl"):
        np.testing.assert_allclose(run.signals[f"{name}.x_hat"], xs, rtol=0.0, atol=1e-9)
        np.testing.assert_allclose(run.signals[f"{name}.P_diag"], ps, rtol=0.0, atol=1e-9)
        np.testing.assert_allclose(run.signals[f"{name}.innovation"], ys, rtol=0.0, atol=1e-9)


def test_ss_ukf_tracks_the_pendulum_like_the_merwe_ukf(run):
    ss, mw = run.signals["ssp.x_hat"], run.signals["ukp.x_hat"]
    # both unscented filters see the same data; on this mildly nonlinear model
    # their estimates differ by a small fraction of the angle range
    assert np.max(np.abs(ss[:, 0] - mw[:, 0])) < 0.01 * np.ptp(ZP)
    assert abs(ss[-1, 0] - ZP[-1]) < 0.1


def test_two_link_analytic_jacobian_matches_finite_differences(run):
    np.testing.assert_allclose(run.signals["eka.x_hat"], run.signals["ekan.x_hat"],
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(run.signals["eka.P_diag"], run.signals["ekan.P_diag"],
                               rtol=1e-5, atol=1e-12)


def test_two_link_kkf_estimates_joint_speeds(run):
    # after the initial transient, speeds within a few percent of their amplitude
    for name in ("eka", "ssa"):
        err = run.signals[f"{name}.x_hat"][50:, 2:4] - ARM_TRUE[50:, 2:4]
        amp = np.max(np.abs(ARM_TRUE[:, 2:4]), axis=0)
        assert np.all(np.sqrt(np.mean(err ** 2, axis=0)) < 0.05 * amp), name


@pytest.mark.parametrize("n", [1, 2, 3, 6, 9])
@pytest.mark.parametrize("w0", [0.0, 0.3, 0.9])
def test_simplex_points_reproduce_mean_and_covariance(n, w0):
    chi, w = simplex_points(n, w0)
    assert chi.shape == (n, n + 2) and w.shape == (n + 2,)
    assert w[0] == w0 and np.isclose(w.sum(), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(chi @ w, np.zeros(n), atol=1e-12)
    np.testing.assert_allclose((chi * w) @ chi.T, np.eye(n), atol=1e-12)
    # the points x + L chi_i of a random (x, P) have weighted mean x and covariance P
    rng = np.random.default_rng(n)
    a = rng.normal(size=(n, n))
    cov = a @ a.T + n * np.eye(n)
    x = rng.normal(size=n)
    pts = x[:, None] + np.linalg.cholesky(cov) @ chi
    mean = pts @ w
    np.testing.assert_allclose(mean, x, atol=1e-12)
    np.testing.assert_allclose(((pts - mean[:, None]) * w) @ (pts - mean[:, None]).T, cov,
                               rtol=1e-12, atol=1e-12)
    # all but the centre lie on one sphere (radius^2 = n / (1 - w0) after whitening)
    np.testing.assert_allclose(np.sum(chi[:, 1:] ** 2, axis=0), n / (1.0 - w0), rtol=1e-12)


def test_simplex_ukf_uses_n_plus_2_points():
    ukf = UnscentedKalmanFilter(sigma="simplex", w0=0.25, model="two_link_kkf", Q=ARM_Q,
                                R=[1e-5, 0.0, 0.0, 1e-5])
    assert ukf.sigma_count() == 8
    wm, wc = ukf.weights()
    np.testing.assert_array_equal(wm, wc)
    np.testing.assert_allclose(wm, [0.25] + [0.75 / 7] * 7)


@pytest.mark.parametrize("cls, values, param, text", [
    (UnscentedKalmanFilter, dict(sigma="simplex", w0=1.0), "w0", "0 <= w0 < 1"),
    (ExtendedKalmanFilter, dict(model="two_link_kkf", coeffs=[0.3]), "coeffs", "L1 (m), d1 (m)"),
    (ExtendedKalmanFilter, dict(model="slider_crank_kkf", states=2), "states", "must be 3"),
    (ExtendedKalmanFilter, dict(model="linear", A=[1.0]), "states", "required"),
    (UnscentedKalmanFilter, dict(model="kinematic"), "model", "slider_crank_kkf"),
    (UnscentedKalmanFilter, dict(model="slider_crank_kkf", coeffs=[0.3, 0.6, 0.05, 2.0, 0.02, 60]),
     "coeffs", "band must be in (0, pi/2)"),
    (UnscentedKalmanFilter, dict(model="slider_crank_kkf", coeffs=[0.3, 0.6, 0.05, 0.1, 0.02, 0]),
     "coeffs", "growth > 0"),
    (UnscentedKalmanFilter, dict(model="slider_crank_force",
                                 coeffs=[0.3, 0.3, 0.05, 1.8, 3.6, 1.2, 9.81]),
     "coeffs", "must exceed crank"),
    (ExtendedKalmanFilter, dict(model="slider_crank_benchmark",
                                coeffs=[0.3, 0.6, 0.05, 1.8, -3.6, 1.2, 9.81]),
     "coeffs", "must be >= 0"),
    (ExtendedKalmanFilter, dict(model="two_link_kkf", coeffs=[0.3, 0.0, 0.15]), "coeffs",
     "must be > 0 m"),
])
def test_bad_model_settings_are_param_errors(cls, values, param, text):
    with pytest.raises(ParamError) as err:
        cls(**values)
    assert err.value.param == param
    assert text in str(err.value)


def test_compiled_and_interpreted_are_bit_identical(graph, run):
    short = hapflow.Simulation(graph, interpret=True).run(0.05)
    n = short.time.size
    assert n == 5
    for key, values in short.signals.items():
        assert np.array_equal(values, run.signals[key][:n]), key


def test_ukf_with_a_nonlinear_measurement_matches_filterpy():
    # the slider-crank benchmark observer measures the slider acceleration xs' alpha +
    # xs'' omega^2: its update runs through sigma points (a z = H x model's does not)
    from hapflow.blocks.estimation_models import MODELS
    from hapflow.blocks.multibody import crank_kinematics, crank_torque
    spec, n, dim = MODELS["slider_crank_benchmark"], 200, 4
    geo = (0.3, 0.6, 0.05)
    coeffs = np.array([*geo, 1.872, 3.744, 1.2, 9.81])
    t = np.arange(n) * TS
    th, om, al = 12.0 * t + 0.3 * np.sin(9 * t), 12.0 + 2.7 * np.cos(9 * t), -24.3 * np.sin(9 * t)
    rng = np.random.default_rng(3)
    acc = np.array([crank_kinematics(a, *geo)[4] * b + crank_kinematics(a, *geo)[5] * w * w
                    for a, w, b in zip(th, om, al)])
    z = np.column_stack([th + rng.normal(0, 0.003, n), acc + rng.normal(0, 0.05, n)])
    u = np.array([crank_torque(a, w, b, 20.0, *coeffs) for a, w, b in zip(th, om, al)])[:, None]
    q, r = np.diag([1e-8, 1e-6, 10.0, 1.0]), np.diag([9e-6, 2.5e-3])
    x0, p0 = np.array([0.0, 12.0, 0.0, 0.0]), np.diag([1e-4, 1.0, 100.0, 1e4])
    g = hapflow.Graph(name="test_ukf_nonlinear_h", rate=RATE, duration=n * TS)
    g.add("z", table(z))
    g.add("u", table(u))
    g.add("ukf", UnscentedKalmanFilter(model="slider_crank_benchmark", coeffs=coeffs.tolist(),
                                       Q=q.ravel().tolist(), R=r.ravel().tolist(),
                                       x0=x0.tolist(), P0=p0.ravel().tolist(), **SIGMA))
    g.wire("z.y -> ukf.z")
    g.wire("u.y -> ukf.u")
    g.record("ukf.x_hat", "ukf.P_diag")
    ours = hapflow.Simulation(g).run(n * TS)

    def fx(x, dt, uk):
        out = np.empty(dim)
        spec.f(np.asarray(x, dtype=float), 0, out, 0, coeffs, 0, uk, dt, 0, 0)
        return out

    def hx(x):
        out = np.empty(2)
        spec.h(np.asarray(x, dtype=float), 0, out, 0, coeffs, 0)
        return out
    ref = filterpy_kalman.UnscentedKalmanFilter(
        dim_x=dim, dim_z=2, dt=TS, hx=hx, fx=fx,
        points=filterpy_kalman.MerweScaledSigmaPoints(dim, **SIGMA))
    ref.x, ref.P, ref.Q, ref.R = x0.copy(), p0.copy(), q, r
    xs = []
    for k in range(n):
        ref.predict(uk=u[k])
        ref.update(z[k])
        xs.append(ref.x.copy())
    np.testing.assert_allclose(ours.signals["ukf.x_hat"], np.array(xs), rtol=1e-9, atol=1e-9)
    assert abs(ours.signals["ukf.x_hat"][-1, 1] - om[-1]) < 0.5      # and it tracks the speed
