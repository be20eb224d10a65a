"""Seed 004 section 3.2.1: two-stage force observer vs the single-stage benchmark on a slider-crank.

graphs/slider_crank_two_stage.yaml runs the SliderCrank plant (crank 300 mm,
rod 600 mm, offset 50 mm, masses of table 3.1, 12.56 rad/s + 2 Hz ripple of
1.256 rad/s, 1 ms step, sensor noise of the seed) with three SS-UKFs: the
kinematic Kalman filter and the force observer of the two-stage approach,
and the benchmark dynamic observer, both dynamic models carrying the
parameter errors of table 3.1.  RMS errors over the 5 s run, on each of
four noise seeds (the worst counts), are compared with table 3.4 (two-stage
SS-UKF: 0.0846 rad/s, 1.8112 rad/s^2, 4.2988 N).

The KKF has the true lengths (with table 3.1's it could not reach the
table's 1.81 rad/s^2: see the graph's header), the benchmark has table
3.1's - the seed's setting, as its benchmark numbers show, and the source
of the two-stage kinematic advantage below.

Measured (seeds 1-4): two-stage 0.010-0.011 rad/s, 1.13-1.25 rad/s^2,
8.7-9.0 N; benchmark 0.215-0.216 rad/s, 7.20-7.29 rad/s^2, 7.8-8.1 N.  Speed
and acceleration meet table 3.4 and beat the benchmark by far.  The force
misses table 3.4 and the benchmark - ``xfail(strict=True)``, so that a fix
shows up as an unexpected pass - and
:func:`test_table_3_1_errors_bound_any_two_stage_force_estimate` shows why
the table's 4.30 N is out of reach at this crank speed.

The plant's dynamics are checked independently by the power balance of
its three bodies, computed here with plain numpy.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hapflow
import hapflow.blocks  # noqa: F401
from hapflow.blocks.multibody import (crank_kinematics, crank_singularity, crank_terms,
                                      crank_torque)

ROOT = Path(__file__).resolve().parents[2]
TABLE_3_4 = {"omega": 0.0846, "alpha": 1.8112, "force": 4.2988}   # two-stage SS-UKF
SEEDS = (1, 2, 3, 4)
#: the plant (nominal values of table 3.1)
C, R, H, MC, MR, MS, G = 0.3, 0.6, 0.05, 1.872, 3.744, 1.2, 9.81
#: the dynamic model of fobs and bench: nominal values plus table 3.1's errors
MODEL = (0.297, 0.612, 0.049, 1.8529, 3.594, 1.212, 9.81)


def _rms(e: np.ndarray) -> float:
    return float(np.sqrt(np.mean(e ** 2)))


@pytest.fixture(scope="module")
def errors() -> dict[str, dict[str, float]]:
    """Worst RMS error over ``SEEDS`` of each estimate, two-stage and benchmark."""
    sim = hapflow.Simulation(hapflow.load(ROOT / "graphs" / "slider_crank_two_stage.yaml"))
    worst: dict[str, dict[str, float]] = {"two_stage": {}, "benchmark": {}}
    for seed in SEEDS:
        sim.reset(seed=seed)
        run = sim.run()
        assert run.time.size == 5000
        truth = {k: run.signals[s][:, 0] for k, s in
                 (("omega", "plant.omega"), ("alpha", "plant.alpha"), ("force", "force.y"))}
        kkf, fobs, bench = (run.signals[f"{b}.x_hat"] for b in ("kkf", "fobs", "bench"))
        found = {"two_stage": {"omega": kkf[:, 1], "alpha": kkf[:, 2], "force": fobs[:, 1]},
                 "benchmark": {"omega": bench[:, 1], "alpha": bench[:, 2],
                               "force": bench[:, 3]}}
        for how, estimates in found.items():
            for what, est in estimates.items():
                e = _rms(est - truth[what])
                worst[how][what] = max(worst[how].get(what, 0.0), e)
    return worst


def test_two_stage_speed_within_table_3_4(errors):
    assert errors["two_stage"]["omega"] <= TABLE_3_4["omega"], errors


def test_two_stage_acceleration_within_table_3_4(errors):
    assert errors["two_stage"]["alpha"] <= TABLE_3_4["alpha"], errors


@pytest.mark.parametrize("what", ["omega", "alpha"])
def test_two_stage_beats_the_benchmark_on_kinematics(errors, what):
    assert errors["two_stage"][what] < 0.5 * errors["benchmark"][what], errors


@pytest.mark.xfail(strict=True, reason="measured 8.7-9.0 N (seeds 1-4): the table 3.1 model "
                                       "is 7.2 N RMS off at the exact motion away from the dead "
                                       "centres (see the bound test below)")
def test_two_stage_force_within_table_3_4(errors):
    assert errors["two_stage"]["force"] <= TABLE_3_4["force"], errors


@pytest.mark.xfail(strict=True, reason="measured 8.7-9.0 N vs benchmark 7.8-8.1 N: the "
                                       "benchmark's acceleration state (7.2 rad/s^2 off) takes up "
                                       "part of the model error, which the force observer, fed "
                                       "the accurate KKF kinematics, must put into F")
def test_two_stage_force_better_than_benchmark(errors):
    assert errors["two_stage"]["force"] < errors["benchmark"]["force"], errors


def test_table_3_1_errors_bound_any_two_stage_force_estimate():
    # The force observer's model T = M alpha + C omega^2 + G - F xs' with table 3.1's errors,
    # solved for F at the exact motion and the noise-free torque (what a force observer fed a
    # perfect KKF and a perfect torque sensor converges to where the lever xs' is not small),
    # is off by more than table 3.4's 4.30 N: the velocity term C omega^2 at 12.56 rad/s.
    t = np.arange(5000) * 1e-3
    w = 4 * np.pi
    th = 12.56 * t + 1.256 * (1 - np.cos(w * t)) / w
    om, al = 12.56 + 1.256 * np.sin(w * t), 1.256 * w * np.cos(w * t)
    force = 50.0 * np.sin(2 * np.pi * t)
    torque = np.array([crank_torque(*x, C, R, H, MC, MR, MS, G)
                       for x in zip(th, om, al, force)])
    terms = np.array([crank_terms(x, *MODEL) for x in th])
    inverse = (terms[:, 0] * al + terms[:, 1] * om ** 2 + terms[:, 2] - torque) / terms[:, 3]
    far = np.array([crank_singularity(x, C, R, H) for x in th]) > 0.3
    assert far.mean() > 0.7
    assert _rms((inverse - force)[far]) > 1.5 * TABLE_3_4["force"]
    # with the exact model the same inversion is exact: the bound is the model's, not the code's
    exact = np.array([crank_terms(x, C, R, H, MC, MR, MS, G) for x in th])
    inverse = (exact[:, 0] * al + exact[:, 1] * om ** 2 + exact[:, 2] - torque) / exact[:, 3]
    np.testing.assert_allclose(inverse[far], force[far], atol=1e-9)


# ------------------------------------------------------------------ plant checks (no graph)


def _bodies(th):
    """Centres of mass (crank, rod, slider) and the rod angle, from the geometry alone."""
    phi = np.arcsin((H - C * np.sin(th)) / R)
    pin = np.stack([C * np.cos(th), C * np.sin(th)])
    rod = pin + 0.5 * R * np.stack([np.cos(phi), np.sin(phi)])
    slider = np.stack([pin[0] + R * np.cos(phi), np.full_like(th, H)])
    return 0.5 * pin, rod, slider, phi


def _energy(th, om):
    """Kinetic + potential energy (J) at crank angle/speed arrays, by numerical differentiation."""
    eps = 1e-6
    (cp, rp, sp, php), (cm, rm, sm, phm) = _bodies(th + eps), _bodies(th - eps)
    def speed2(p, m):
        return np.sum(((p - m) / (2 * eps)) ** 2, axis=0) * om ** 2
    wrod = (php - phm) / (2 * eps) * om
    kin = 0.5 * (MC * speed2(cp, cm) + MR * speed2(rp, rm) + MS * speed2(sp, sm)
                 + MC * C ** 2 / 12 * om ** 2 + MR * R ** 2 / 12 * wrod ** 2)
    crank, rod, _, _ = _bodies(th)
    return kin + G * (MC * crank[1] + MR * rod[1])


def test_crank_torque_satisfies_the_power_balance():
    # T omega + F xs_dot = dE/dt along a prescribed motion, with an arbitrary slider force
    dt = 1e-5
    t = np.arange(0.0, 0.6, 0.01)
    def motion(t):
        w = 4 * np.pi
        return (0.3 + 12.56 * t + 1.256 * (1 - np.cos(w * t)) / w,
                12.56 + 1.256 * np.sin(w * t), 1.256 * w * np.cos(w * t))
    th, om, al = motion(t)
    force = 40.0 * np.cos(3.0 * t) - 15.0
    torque = np.array([crank_torque(a, b, c, f, C, R, H, MC, MR, MS, G)
                       for a, b, c, f in zip(th, om, al, force)])
    dxs = np.array([crank_kinematics(a, C, R, H)[4] for a in th])
    de = (_energy(*motion(t + dt)[:2]) - _energy(*motion(t - dt)[:2])) / (2 * dt)
    power = torque * om + force * dxs * om
    np.testing.assert_allclose(power, de, rtol=0, atol=1e-4 * np.max(np.abs(de)))


def test_crank_kinematics_match_finite_differences():
    th = np.linspace(-np.pi, np.pi, 37)
    eps = 1e-5
    for a in th:
        phi, dphi, ddphi, xs, dxs, ddxs = crank_kinematics(a, C, R, H)
        p, m = crank_kinematics(a + eps, C, R, H), crank_kinematics(a - eps, C, R, H)
        assert np.isclose(xs, C * np.cos(a) + R * np.cos(phi))
        assert np.isclose(R * np.sin(phi), H - C * np.sin(a))
        assert np.isclose(dxs, (p[3] - m[3]) / (2 * eps), atol=1e-8)
        assert np.isclose(ddxs, (p[3] - 2 * xs + m[3]) / eps ** 2, atol=1e-4)
        assert np.isclose(dphi, (p[0] - m[0]) / (2 * eps), atol=1e-8)
        assert np.isclose(ddphi, (p[1] - m[1]) / (2 * eps), atol=1e-7)
