"""Segmented least squares and automatic segmentation (hapflow/ident/segmented.py) on known truth."""
import numpy as np
import pytest

from hapflow.ident import IdentError, identify
from hapflow.ident import synthetic as syn
from hapflow.ident.prep import Motion, direction_labels, from_arrays, group
from hapflow.ident.segmented import (PARAMS, auto_segments, fit_segments, fit_slice,
                                     parse_regressors)

RATE = 2000.0
EDGES = np.array([-0.025, -0.015, -0.005, 0.005, 0.015, 0.025])


def exact_motion(truth, duration=40.0, noise=0.05, seed=1, f=(1.0, 4.0)):
    """Exact x, v, a (no estimation error) and white force noise: the OLS assumptions hold."""
    t, x, v, a = syn.swept_sine(duration, RATE, 0.025, *f)
    rng = np.random.default_rng(seed)
    force = truth.predict(x, v, a) + noise * rng.standard_normal(x.size)
    return Motion(x, force, v, a, direction_labels(v, 5e-3), time=t, rate=RATE)


@pytest.fixture(scope="module")
def truth():
    return syn.piecewise_model()


def test_recovers_every_segment_and_standard_errors_are_consistent(truth):
    motion = exact_motion(truth)
    z = []
    for d, g in group(motion).items():
        fit = fit_segments(g, EDGES)
        assert fit.segments == 5 and fit.n.sum() == len(g)
        centres = 0.5 * (EDGES[:-1] + EDGES[1:])
        true = truth.direction(d).at(centres)
        for j, p in enumerate(PARAMS):
            est, se = fit.theta[:, j], fit.stderr[:, j]
            rel = np.abs(est - true[p]) / np.abs(true[p])
            assert np.all(rel < {"m": 0.01, "b": 0.01, "k": 0.001, "F0": 0.02}[p]), (p, est, true[p])
            z.extend((est - true[p]) / se)
    z = np.asarray(z)                                   # 2 directions x 5 segments x 4 = 40
    assert z.size == 40
    assert np.all(np.abs(z) < 4.0), z                   # truth within 4 sigma everywhere
    assert np.mean(np.abs(z) < 3.0) >= 0.95             # and within 3 sigma almost everywhere
    assert 0.6 < np.sqrt(np.mean(z ** 2)) < 1.5, z      # standard errors neither too small nor too large


def test_recovers_through_the_rig_like_pipeline(truth):
    """Encoder 5 um, biased noisy accelerometer, force noise: fusion prep then OLS."""
    t, x, v, a = syn.swept_sine(40.0, 4000.0, 0.025, 1.0, 4.0)
    meas = syn.measure(truth, t, x, v, a, 4000.0)
    motion = from_arrays(meas.enc, meas.force, 4000.0, meas.accel)
    model = identify(motion, "segmented", edges=EDGES)
    centres = 0.5 * (EDGES[:-1] + EDGES[1:])
    for d in (1, -1):
        est, true = model.direction(d).at(centres), truth.direction(d).at(centres)
        np.testing.assert_allclose(est["m"], true["m"], rtol=0.01)
        np.testing.assert_allclose(est["b"], true["b"], rtol=0.02)
        np.testing.assert_allclose(est["k"], true["k"], rtol=0.001)
        np.testing.assert_allclose(est["F0"], true["F0"], atol=0.05)
    assert model.fit["nrmse_percent"] < 0.05


def test_equal_segments_by_default_and_small_segments_merge(truth):
    g = group(exact_motion(truth, duration=10.0))[1]
    fit = fit_segments(g, segments=8)
    assert fit.segments == 8
    np.testing.assert_allclose(fit.edges, np.linspace(g.x[0], g.x[-1], 9))
    # an edge list with an (almost) empty sliver: merged into a neighbour
    edges = np.array([g.x[0], -0.01, -0.01 + 1e-9, 0.01, g.x[-1]])
    fit = fit_segments(g, edges)
    assert fit.segments == 3 and np.all(fit.n >= 20)


def test_condition_number_exposes_single_sine_excitation(truth):
    """Under one sinusoid a = -w^2 x and v is a function of x per direction (seed 000's damping
    problem): the segment designs are nearly singular and b is poorly determined."""
    sine = exact_motion(truth, duration=20.0, f=(1.5, 1.5), noise=0.05)
    sweep = exact_motion(truth, duration=20.0, f=(1.0, 4.0), noise=0.05)
    c_sine = fit_segments(group(sine)[1], EDGES)
    c_sweep = fit_segments(group(sweep)[1], EDGES)
    assert np.median(c_sine.cond) > 100 * np.median(c_sweep.cond)
    assert np.median(c_sweep.cond) < 10
    assert np.median(c_sine.stderr[:, 1]) > 10 * np.median(c_sweep.stderr[:, 1])


def test_dropping_regressors_for_quasi_static_data():
    """Force-position data only: fit [x 1]; m and b stay 0."""
    x = np.concatenate([np.linspace(0, 4e-3, 800), np.linspace(4e-3, 0, 800)])
    d = np.where(np.arange(x.size) < 800, 1, -1)
    kx = np.where(x < 2e-3, 500.0 * x, 1.0 + 300.0 * (x - 2e-3))
    force = kx + 0.05 * d + np.random.default_rng(3).normal(0, 1e-3, x.size)
    motion = from_arrays(x, force, direction=d)
    assert motion.quasi_static and parse_regressors(None, True) == ("x", "1")
    model = identify(motion, "segmented", edges=np.array([0.0, 2e-3, 4e-3]))
    up = model.positive.at(np.array([1e-3, 3e-3]))
    np.testing.assert_allclose(up["k"], [500.0, 300.0], rtol=0.01)
    np.testing.assert_allclose(up["F0"], [0.05, 1.0 - 0.6 + 0.05], atol=2e-3)
    assert not np.any(model.positive.m) and not np.any(model.negative.b)
    with pytest.raises(IdentError, match="quasi-static"):
        identify(motion, regressors="avx1")


def test_bad_regressors_are_rejected():
    for bad in ("", "q", "xx", "avx2"):
        with pytest.raises(IdentError, match="subset"):
            parse_regressors(bad)
    assert parse_regressors("1x") == ("x", "1")


def test_fit_slice_is_accurate_far_from_the_origin():
    """Centring and scaling: a narrow segment far from x = 0 is still solved to ~1e-10."""
    rng = np.random.default_rng(0)
    x = 1.0 + 1e-4 * rng.random(500)                     # 0.1 mm wide, 1 m from the origin
    a, v = rng.normal(0, 10, 500), rng.normal(0, 0.3, 500)
    theta = np.array([0.6, 12.0, 5000.0, -4990.0])
    y = np.column_stack([a, v, x, np.ones(500)]) @ theta
    fit = fit_slice(np.column_stack([a, v, x, np.ones(500)]), y, ("a", "v", "x", "1"))
    np.testing.assert_allclose(fit.theta, theta, rtol=1e-8)
    assert fit.cond < 10


def test_auto_segmentation_finds_the_true_breakpoints(truth):
    motion = exact_motion(truth, duration=40.0)
    for d, g in group(motion).items():
        res = 2.5e-4
        fit = auto_segments(g, resolution=res)
        assert fit.segments == 5, fit.edges
        np.testing.assert_allclose(fit.edges[1:-1], EDGES[1:-1], atol=2 * res)
        assert fit.info["bic"] < np.inf


def test_auto_segmentation_prefers_one_segment_for_a_linear_device():
    truth = syn.piecewise_model(edges=(-0.025, 0.025), k=(2000.0,))
    motion = exact_motion(truth, duration=20.0)
    for g in group(motion).values():
        assert auto_segments(g).segments == 1
