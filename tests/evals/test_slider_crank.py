"""Seed 004 section 3.2.1: two-stage force observer vs the single-stage benchmark on a slider-crank.

graphs/slider_crank_two_stage.yaml runs the SliderCrank plant (crank 300 mm,
rod 600 mm, offset 50 mm, masses of table 3.1, 12.56 rad/s + 2 Hz ripple of
1.256 rad/s, 1 ms step, sensor noise of the seed) with three SS-UKFs: the
kinematic Kalman filter and the force observer of the two-stage approach,
and the benchmark dynamic observer, both dynamic models carrying the
parameter errors of table 3.1.  RMS errors over the 5 s run are compared
with table 3.4 (two-stage SS-UKF: 0.0846 rad/s, 1.8112 rad/s^2, 4.2988 N).

Measured here (seed 1): two-stage 0.022 rad/s, 2.22 rad/s^2, 9.3 N;
benchmark 0.215 rad/s, 7.2 rad/s^2, 7.9 N.  Speed meets table 3.4 and both
kinematic errors beat the benchmark; the acceleration misses the table by
~20 % and the force misses it (and the benchmark) - those two are marked
``xfail(strict=True)`` so that a fix shows up as an unexpected pass.

The plant's dynamics are checked independently by the power balance of
its three bodies, computed here with plain numpy.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hapflow
import hapflow.blocks  # noqa: F401
from hapflow.blocks.multibody import crank_kinematics, crank_torque

ROOT = Path(__file__).resolve().parents[2]
TABLE_3_4 = {"omega": 0.0846, "alpha": 1.8112, "force": 4.2988}   # two-stage SS-UKF


@pytest.fixture(scope="module")
def errors() -> dict[str, dict[str, float]]:
    graph = hapflow.load(ROOT / "graphs" / "slider_crank_two_stage.yaml")
    run = hapflow.Simulation(graph).run()
    assert run.time.size == 5000
    om, al, force = (run.signals[k][:, 0] for k in ("plant.omega", "plant.alpha", "force.y"))
    kkf, fobs, bench = (run.signals[f"{b}.x_hat"] for b in ("kkf", "fobs", "bench"))

    def rms(e):
        return float(np.sqrt(np.mean(e ** 2)))
    return {"two_stage": {"omega": rms(kkf[:, 1] - om), "alpha": rms(kkf[:, 2] - al),
                          "force": rms(fobs[:, 1] - force)},
            "benchmark": {"omega": rms(bench[:, 1] - om), "alpha": rms(bench[:, 2] - al),
                          "force": rms(bench[:, 3] - force)}}


def test_two_stage_speed_within_table_3_4(errors):
    assert errors["two_stage"]["omega"] <= TABLE_3_4["omega"], errors


@pytest.mark.parametrize("what", ["omega", "alpha"])
def test_two_stage_beats_the_benchmark_on_kinematics(errors, what):
    assert errors["two_stage"][what] < 0.5 * errors["benchmark"][what], errors


@pytest.mark.xfail(strict=True, reason="measured 2.22 rad/s^2: near the dead centres the "
                                       "random-walk acceleration cannot follow the ripple")
def test_two_stage_acceleration_within_table_3_4(errors):
    assert errors["two_stage"]["alpha"] <= TABLE_3_4["alpha"], errors


@pytest.mark.xfail(strict=True, reason="measured 9.3 N vs benchmark 7.9 N: the force is "
                                       "unobservable near the dead centres and the table 3.1 "
                                       "mass errors bias the torque model")
def test_two_stage_force_within_table_3_4_and_better_than_benchmark(errors):
    assert errors["two_stage"]["force"] <= TABLE_3_4["force"], errors
    assert errors["two_stage"]["force"] < errors["benchmark"]["force"], errors


# ------------------------------------------------------------------ plant checks (no graph)
C, R, H, MC, MR, MS, G = 0.3, 0.6, 0.05, 1.872, 3.744, 1.2, 9.81


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
