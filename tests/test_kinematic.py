"""The probe's kinematic Kalman filter (blocks/kinematic.py).

- Its discretisation is exact for a piecewise-linear acceleration: fed the
  samples of a constant-jerk motion it predicts every encoder sample exactly,
  so the innovation vanishes and the estimate equals the closed form.
- On the identification rig (graphs/kkf_probe.yaml: encoder quantisation,
  charge-amplifier lag, ADC, noise) its velocity error is at least 5x smaller
  than a backward difference of the encoder, with at most one tick of lag.

The slider-crank KKF model (blocks/estimation_models.py): its dead centres
are where the slider lever vanishes; its switching rule has a hysteresis
band and switches early only while the crank approaches a dead centre, where
the speed-error growth rate (checked against the slope of the acceleration
constraint) exceeds its limit; one step from the true state reproduces the
exact motion.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hapflow
import hapflow.blocks  # noqa: F401
from hapflow.blocks.kinematic import ProbeKKF, probe_matrices
from tests.helpers import table

ROOT = Path(__file__).resolve().parents[1]
RIG_SECONDS = 6.0
SETTLE = 4000            # ticks (1 s) left out: the fade-in and the filter's lock-on


def test_probe_model_is_exact_for_constant_jerk():
    rate, jerk, n = 1000.0, 37.0, 400
    tau = (np.arange(n) + 1) / rate          # the filter starts at tau = 0 with x = v = a = 0
    pos, vel, acc = jerk * tau ** 3 / 6, jerk * tau ** 2 / 2, jerk * tau
    g = hapflow.Graph(name="test_probe_exact", rate=rate, duration=n / rate)
    g.add("pos", table(pos[:, None]))
    g.add("acc", table(acc[:, None]))
    g.add("kkf", ProbeKKF(resolution=1e-6, accel_noise=0.01))
    g.wire("pos.y -> kkf.pos")
    g.wire("acc.y -> kkf.accel")
    g.record("kkf.pos_hat", "kkf.vel_hat", "kkf.acc_hat")
    run = hapflow.Simulation(g).run()
    np.testing.assert_allclose(run.signals["kkf.pos_hat"][:, 0], pos, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.signals["kkf.vel_hat"][:, 0], vel, rtol=0, atol=1e-10)
    np.testing.assert_allclose(run.signals["kkf.acc_hat"][:, 0], acc, rtol=0, atol=1e-10)


def test_probe_matrices_integrate_a_linear_acceleration():
    dt = 0.01
    m = probe_matrices(dt, 1.0, 1e-6)
    a, b = np.reshape(m["A"], (3, 3)), np.asarray(m["B"])
    # from x = v = 0, a = 2 to a = 5 linearly over dt: exact trapezoid / cubic values
    x = a @ np.array([0.0, 0.0, 2.0]) + b * 5.0
    np.testing.assert_allclose(x, [dt ** 2 * (2 * 2 + 5) / 6, dt * (2 + 5) / 2, 5.0], rtol=1e-15)
    np.testing.assert_allclose(m["R"], [1e-12 / 12])
    np.testing.assert_allclose(np.reshape(m["Q"], (3, 3)), np.outer(b, b))


@pytest.fixture(scope="module")
def rig():
    graph = hapflow.load(ROOT / "graphs" / "kkf_probe.yaml")
    return hapflow.Simulation(graph).run(RIG_SECONDS)


def _rms_at_lag(estimate: np.ndarray, truth: np.ndarray, lag: int) -> float:
    """RMS of ``estimate[k] - truth[k - lag]`` after the settling time."""
    e = estimate[SETTLE:] - truth[SETTLE - lag:truth.size - lag]
    return float(np.sqrt(np.mean(e ** 2)))


def test_probe_velocity_beats_backward_difference_by_5x(rig):
    truth = rig.signals["dev.vel"][:, 0]
    kkf = rig.signals["kkf.vel_hat"][:, 0]
    diff = rig.signals["vel_diff.y"][:, 0]
    assert np.max(np.abs(truth)) > 0.1             # a real excitation (m/s)
    # the backward difference, even at its best lag, against the KKF at zero lag
    diff_best = min(_rms_at_lag(diff, truth, k) for k in range(3))
    kkf_rms = _rms_at_lag(kkf, truth, 0)
    assert kkf_rms * 5.0 <= diff_best, (kkf_rms, diff_best)


def test_probe_velocity_lags_at_most_one_tick(rig):
    truth = rig.signals["dev.vel"][:, 0]
    kkf = rig.signals["kkf.vel_hat"][:, 0]
    errors = [_rms_at_lag(kkf, truth, k) for k in range(6)]
    assert int(np.argmin(errors)) <= 1, errors


# ------------------------------------------------------------------ slider-crank KKF model
CRANK = (0.3, 0.6, 0.05)


def _angle_at(dist: float) -> float:
    """Crank angle past the outer dead centre at which ``|theta - phi| = dist``."""
    from scipy.optimize import brentq
    from hapflow.blocks.multibody import crank_kinematics
    return brentq(lambda th: th - crank_kinematics(th, *CRANK)[0] - dist, -0.5, 1.5, xtol=1e-14)


def test_dead_centre_is_where_the_slider_lever_vanishes():
    from hapflow.blocks.multibody import crank_kinematics, crank_singularity
    th = _angle_at(0.0)
    assert abs(crank_kinematics(th, *CRANK)[4]) < 1e-12
    assert crank_singularity(th, *CRANK) < 1e-12
    assert abs(crank_kinematics(th + np.pi, *CRANK)[4]) > 0.01     # not the inner one


def test_slider_crank_switching_has_a_hysteresis_band():
    from hapflow.blocks.estimation_models import MODELS
    model_mode = MODELS["slider_crank_kkf"].mode
    p = np.array([*CRANK, 0.3, 0.05, 1e9])          # enter at <= 0.3 rad, leave at > 0.35 rad
    mode = 0
    seen = []
    for dist in (0.5, 0.31, 0.29, 0.1, 0.33, 0.349, 0.36, 0.32, 0.3):
        mode = model_mode(np.array([_angle_at(dist), 12.56]), 0, p, 0, mode)
        seen.append(mode)
    assert seen == [0, 0, 1, 1, 1, 1, 0, 0, 1]


def test_speed_error_growth_is_the_sensitivity_of_the_kinematic_acceleration():
    # alpha = (a - xs'' omega^2) / xs' solved at the same angle and slider acceleration for
    # two speeds: its slope in omega is the growth rate; positive approaching a dead centre
    from hapflow.blocks.multibody import crank_kinematics, crank_speed_growth
    eps = 1e-4
    for dist in (0.05, 0.2, 0.6, 1.2):
        th = _angle_at(dist)                         # past the outer dead centre
        kin = crank_kinematics(th, *CRANK)
        for om in (12.56, -12.56):
            slope = -kin[5] * ((om + eps) ** 2 - (om - eps) ** 2) / (2 * eps * kin[4])
            rate = crank_speed_growth(th, om, *CRANK)
            assert rate == pytest.approx(slope, rel=1e-9)
            assert (rate > 0) == (om < 0)            # turning back towards the dead centre
    assert crank_speed_growth(_angle_at(0.05), 12.56, *CRANK) < -100.0


def test_slider_crank_switches_early_only_when_approaching_a_dead_centre():
    # 0.15 rad past the outer dead centre, outside the 0.08 rad band: leaving it (omega > 0)
    # speed errors decay and the constraint is kept; turning back towards it (omega < 0)
    # they grow faster than 60 1/s and the acceleration becomes a random walk
    from hapflow.blocks.estimation_models import MODELS
    model_mode = MODELS["slider_crank_kkf"].mode
    from hapflow.blocks.multibody import crank_speed_growth
    p = np.array([*CRANK, 0.08, 0.02, 60.0])
    th = _angle_at(0.15)
    assert crank_speed_growth(th, -12.56, *CRANK) > 60.0
    assert model_mode(np.array([th, 12.56]), 0, p, 0, 0) == 0
    assert model_mode(np.array([th, -12.56]), 0, p, 0, 0) == 1
    assert model_mode(np.array([th, -12.56]), 0, p, 0, 1) == 1
    # inside the band both ways; leaving, back to the constraint beyond band + hysteresis
    assert model_mode(np.array([_angle_at(0.07), 12.56]), 0, p, 0, 0) == 1
    assert model_mode(np.array([_angle_at(0.09), 12.56]), 0, p, 0, 1) == 1
    assert model_mode(np.array([_angle_at(0.11), 12.56]), 0, p, 0, 1) == 0


def test_slider_crank_kkf_model_predicts_the_exact_motion():
    # one step of the model from the true state with the true slider acceleration
    from hapflow.blocks.estimation_models import MODELS
    model_f = MODELS["slider_crank_kkf"].f
    from hapflow.blocks.multibody import crank_kinematics, crank_singularity
    p = np.array([*CRANK, 0.3, 0.05, 60.0])
    dt, w = 1e-3, 4 * np.pi
    t = np.arange(3000) * dt
    th = 12.56 * t + 1.256 * (1 - np.cos(w * t)) / w
    om, al = 12.56 + 1.256 * np.sin(w * t), 1.256 * w * np.cos(w * t)
    kin = np.array([crank_kinematics(a, *CRANK) for a in th])
    acc = kin[:, 4] * al + kin[:, 5] * om ** 2
    out = np.zeros(3)
    err = {0: [], 1: []}
    for k in range(1, t.size):
        mode = int(crank_singularity(th[k - 1], *CRANK) <= 0.3)
        model_f(np.array([th[k - 1], om[k - 1], al[k - 1]]), 0, out, 0, p, 0,
                acc[k:k + 1], dt, mode, 0)
        err[mode].append(out - [th[k], om[k], al[k]])
    normal, singular = np.abs(err[0]), np.abs(err[1])
    assert len(singular) > 100 and len(normal) > 1000
    # normal mode: trapezoid in speed, exact acceleration constraint
    assert normal[:, 0].max() < 1e-7 and normal[:, 1].max() < 1e-4 and normal[:, 2].max() < 0.1
    # near dead centres: held acceleration, speed from the accelerometer constraint
    assert singular[:, 0].max() < 1e-7 and singular[:, 1].max() < 0.05
    assert singular[:, 2].max() <= 1.256 * w * w * dt       # held: off by one step's jerk
