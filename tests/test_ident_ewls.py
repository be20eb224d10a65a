"""Exponentially weighted RLS (hapflow/ident/ewls.py): closed forms, grid values, tracking k(x)."""
import numpy as np
import pytest

from hapflow.ident import IdentError, identify
from hapflow.ident import ewls
from hapflow.ident import synthetic as syn
from hapflow.ident.prep import Motion, direction_labels, group


def weighted_ls(phi, y, lam, p0):
    """argmin sum lam^(N-i) (y_i - phi_i theta)^2 + lam^N theta^T theta / p0 (theta0 = 0)."""
    N, n = phi.shape
    w = lam ** (N - 1 - np.arange(N))
    A = (phi * w[:, None]).T @ phi + lam ** N * np.eye(n) / p0
    return np.linalg.solve(A, (phi * w[:, None]).T @ y)


@pytest.mark.parametrize("lam", [1.0, 0.999, 0.98])
def test_update_equals_the_closed_form_weighted_least_squares(lam):
    rng = np.random.default_rng(4)
    phi = np.column_stack([rng.normal(0, 3, 3000), rng.normal(0, 0.5, 3000),
                           rng.uniform(-1, 1, 3000), np.ones(3000)])
    y = phi @ np.array([0.6, 11.0, 300.0, 2.0]) + rng.normal(0, 0.1, 3000)
    marks = np.array([99, 999, 2999])
    theta, P, state = ewls.run(phi, y, lam, 1e4, marks=marks)
    for k, m in enumerate(marks):
        np.testing.assert_allclose(theta[k], weighted_ls(phi[:m + 1], y[:m + 1], lam, 1e4),
                                   rtol=1e-8, atol=1e-10)
    assert state.shape == (ewls.state_size(4),)


def test_scales_change_the_coordinates_not_the_estimate():
    rng = np.random.default_rng(5)
    phi = np.column_stack([rng.normal(0, 10, 2000), rng.uniform(-0.02, 0.02, 2000), np.ones(2000)])
    y = phi @ np.array([0.5, 4000.0, 1.5]) + rng.normal(0, 0.01, 2000)
    plain, _, _ = ewls.run(phi, y, 0.999, 1e12)
    scaled, _, _ = ewls.run(phi, y, 0.999, 1e4, scales=ewls.default_scales(phi))
    np.testing.assert_allclose(scaled, plain, rtol=1e-6)
    np.testing.assert_allclose(scaled[0], [0.5, 4000.0, 1.5], rtol=1e-3)


def test_windup_guard_bounds_the_covariance():
    """A regressor that stops varying: P would grow like lambda^-k without the guard."""
    phi = np.column_stack([np.ones(20000), np.r_[np.linspace(-1, 1, 100), np.zeros(19900)]])
    y = phi @ np.array([2.0, 3.0])
    theta, P, _ = ewls.run(phi, y, 0.99, 100.0)
    assert np.trace(P[-1]) <= 2 * 100.0 * (1 + 1e-12)
    np.testing.assert_allclose(theta[-1], [2.0, 3.0], rtol=1e-3)   # and the estimate holds


def smooth_motion(duration=60.0, rate=4000.0, seed=2):
    truth = syn.smooth_model()
    t, x, v, a = syn.swept_sine(duration, rate, 0.025, 1.0, 4.0)
    rng = np.random.default_rng(seed)
    force = truth.predict(x, v, a) + 0.02 * rng.standard_normal(x.size)
    return truth, Motion(x, force, v, a, direction_labels(v, 5e-3), time=t, rate=rate)


def test_grid_value_is_the_estimate_after_passing_the_grid_point():
    _, motion = smooth_motion(duration=10.0, rate=2000.0)
    g = group(motion)[1]
    fit = ewls.fit_ewls(g, grid=2e-3)
    assert np.all(np.abs(fit.x / 2e-3 - np.round(fit.x / 2e-3)) < 1e-9)     # multiples of 2 mm
    assert fit.x[0] >= g.x[0] and fit.x[-1] <= g.x[-1]
    phi = np.column_stack([g.acc, g.vel, g.x, np.ones(len(g))])
    k = 7
    last = int(np.flatnonzero(g.x <= fit.x[k])[-1])
    theta, _, _ = ewls.run(phi[:last + 1], g.force[:last + 1], 0.999, 1e6, fit.scales)
    np.testing.assert_array_equal(fit.theta[k], theta[-1])


def test_tracks_stiffness_on_a_1mm_grid():
    """k(x) = 2000 + 4000 (x/A)^2 N/m; 60 s swept sine at 4 kHz (~2400 samples/mm per direction)."""
    truth, motion = smooth_motion()
    one = identify(motion, "ewls", forgetting=0.999)
    two = identify(motion, "ewls", forgetting=0.999, two_sided=True)
    xs = np.arange(-0.022, 0.0221, 1e-3)
    for d in (1, -1):
        k_true = truth.direction(d).at(xs)["k"]
        err_one = np.abs(one.direction(d).at(xs)["k"] - k_true) / k_true
        err_two = np.abs(two.direction(d).at(xs)["k"] - k_true) / k_true
        assert np.max(err_one) < 0.08                      # one-sided window: lag bias
        assert np.max(err_two) < 0.015                     # centred window: no lag
        assert np.sqrt(np.mean(err_two ** 2)) < 0.3 * np.sqrt(np.mean(err_one ** 2))
        m = two.direction(d).at(xs)["m"]
        assert np.max(np.abs(m - 0.581)) < 0.02
    assert two.fit["nrmse_percent"] < 0.05


def test_window_sets_the_forgetting_factor_from_the_density():
    _, motion = smooth_motion(duration=10.0, rate=2000.0)
    g = group(motion)[1]
    density = len(g) / (g.x[-1] - g.x[0])
    lam = ewls.forgetting_for_window(g, 5e-4)
    assert lam == pytest.approx(1 - 1 / (density * 5e-4))
    fit = ewls.fit_ewls(g, window=5e-4)
    assert fit.info["forgetting"] == lam


def test_bad_settings_are_reported():
    _, motion = smooth_motion(duration=4.0, rate=1000.0)
    for bad in (0.0, 1.5, -1):
        with pytest.raises(IdentError, match="forgetting factor"):
            identify(motion, "ewls", forgetting=bad)
    with pytest.raises(IdentError, match="grid spacing"):
        identify(motion, "ewls", grid=0.0)
