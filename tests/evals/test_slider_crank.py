"""Seed 004 section 3.2.1: two-stage force observer vs the single-stage benchmark on a slider-crank.

Torque-driven scenario (graphs/slider_crank_torque.yaml, the thesis's set-up
reconstructed: see the graph's header): a servo drives the TorqueSliderCrank
plant in the vertical plane at 5.4-7.2 rad/s against an unknown 50 N, 0.7 Hz
slider force; the sensors of section 3.2.1 (encoder 0.003 rad, accelerometer
0.05 m/s^2 into a 16-bit converter, torque sensor 0.28 N m); every observer
(kinematic, force, benchmark) carries table 3.1's errors in geometry and
masses.  Each observer runs as an SS-UKF and as an EKF.  RMS errors over the
5 s run, worst of four noise seeds, against table 3.4.

Measured (seeds 1-4, worst): two-stage SS-UKF 0.059 rad/s, 1.17 rad/s^2,
4.13 N; two-stage EKF 0.059, 1.17, 4.13; benchmark SS-UKF 0.064, 2.50, 5.39;
benchmark EKF 0.064, 2.45, 5.22 (table 3.4: two-stage 0.0846, 1.81, 4.30;
benchmark 0.66-0.72, 7.05-7.45, 10.8-11.5).  With the plant's own parameters
in every observer (exact models) the two-stage force is 2.36 N with either
filter against the benchmark's 2.79 N (SS-UKF) and 2.48 N (EKF); seeds 5-8:
2.48 against 3.03 and 2.53.

Why the kinematic stage models the jerk (slider_crank_kkf_jerk) rather than
the acceleration (slider_crank_kkf_walk) as a random walk: with exact models
the force error sits where the lever xs' is small (0.1-0.3 rad from a dead
centre: 6.9 N there against the benchmark's 3.6 N with the random-walk
stage), and it is the kinematic acceleration error times the inertia over the
lever; the constant-jerk model, matching a crank acceleration that changes
smoothly, halves that error (0.86 -> 0.56 rad/s^2 with exact models) and so
the force error (3.22 -> 2.36 N).  bench/estimation.py prints the variants.

Speed-profile scenario (graphs/slider_crank_two_stage.yaml: chapter 2's
12.56 rad/s + 2 Hz ripple imposed on the crank, KKF with the true lengths):
the kinematic figures meet table 3.4; its two-stage force (8.7-9.0 N) is not
tested against the table, because table 3.1's errors alone put the dynamic
model 7.2 N RMS off the force at that speed
(:func:`test_table_3_1_errors_alone_put_the_force_model_over_table_3_4_at_12_56_rad_s_not_at_6_28`).

The plants' dynamics are checked independently: the power balance of the
three bodies computed here with plain numpy, and the energy of the
torque-driven plant along its own simulated motion.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

import hapflow
import hapflow.blocks  # noqa: F401
from hapflow.blocks.multibody import (TorqueSliderCrank, crank_acceleration, crank_kinematics,
                                      crank_singularity, crank_terms, crank_torque)
from hapflow.blocks.estimation_models import MODELS
from hapflow.blocks.sources import Constant

ROOT = Path(__file__).resolve().parents[2]
TORQUE_GRAPH = ROOT / "graphs" / "slider_crank_torque.yaml"
#: seed 004 table 3.4: (speed rad/s, acceleration rad/s^2, force N) per observer
TABLE_3_4 = {"two-stage SS-UKF": (0.0846, 1.8112, 4.2988), "two-stage EKF": (0.0842, 1.8226, 4.4267),
             "benchmark SS-UKF": (0.6558, 7.0533, 10.8249), "benchmark EKF": (0.7215, 7.4521, 11.5015)}
FIGURES = ("speed", "acceleration", "force")
SEEDS = (1, 2, 3, 4)
#: the plant (nominal values of table 3.1)
C, R, H, MC, MR, MS, G = 0.3, 0.6, 0.05, 1.872, 3.744, 1.2, 9.81
#: the dynamic model of the observers: nominal values plus table 3.1's errors
MODEL = (0.297, 0.612, 0.049, 1.8529, 3.594, 1.212, 9.81)
#: the torque scenario's observers: (kinematic estimate, force estimate, force column)
OBSERVERS = {"two-stage SS-UKF": ("kkf", "fobs", 1), "two-stage EKF": ("kkf_ekf", "fobs_ekf", 1),
             "benchmark SS-UKF": ("bench", "bench", 3), "benchmark EKF": ("bench_ekf", "bench_ekf", 3)}


def _rms(e: np.ndarray) -> float:
    return float(np.sqrt(np.mean(e ** 2)))


def worst_errors(sim: hapflow.Simulation, observers: dict[str, tuple[str, str, int]],
                 truth_force: str = "force.y") -> dict[str, tuple[float, float, float]]:
    """Worst RMS (speed, acceleration, force) error over ``SEEDS`` of each observer
    (``observers``: name -> kinematic estimate block, force estimate block, force column)."""
    worst: dict[str, np.ndarray] = {name: np.zeros(3) for name in observers}
    for seed in SEEDS:
        sim.reset(seed=seed)
        run = sim.run()
        assert run.time.size == 5000
        om, al = run.signals["plant.omega"][:, 0], run.signals["plant.alpha"][:, 0]
        force = run.signals[truth_force][:, 0]
        for name, (kin, dyn, col) in observers.items():
            x, f = run.signals[f"{kin}.x_hat"], run.signals[f"{dyn}.x_hat"][:, col]
            worst[name] = np.maximum(worst[name], [_rms(x[:, 1] - om), _rms(x[:, 2] - al),
                                                   _rms(f - force)])
    return {name: tuple(v) for name, v in worst.items()}


# ------------------------------------------------------------------ torque-driven scenario
@pytest.fixture(scope="module")
def torque_sim() -> hapflow.Simulation:
    return hapflow.Simulation(hapflow.load(TORQUE_GRAPH))


@pytest.fixture(scope="module")
def torque_errors(torque_sim) -> dict[str, tuple[float, float, float]]:
    return worst_errors(torque_sim, OBSERVERS)


@pytest.fixture(scope="module")
def exact_errors(torque_sim, torque_errors) -> dict[str, tuple[float, float, float]]:
    """:func:`worst_errors` with the plant's own parameters in every observer (after
    ``torque_errors``, which runs the graph as it is; the graph's values are put back)."""
    blocks = yaml.safe_load(TORQUE_GRAPH.read_text())["blocks"]
    graph = {name: blocks[name]["coeffs"]
             for kin, dyn, _ in OBSERVERS.values() for name in (kin, dyn)}
    try:
        for name, coeffs in graph.items():
            torque_sim.set(f"{name}.coeffs", [C, R, H, MC, MR, MS, G][:min(len(coeffs), 7)]
                           + list(coeffs[7:]))
        return worst_errors(torque_sim, OBSERVERS)
    finally:
        for name, coeffs in graph.items():
            torque_sim.set(f"{name}.coeffs", list(coeffs))


@pytest.mark.parametrize("sigma", ["SS-UKF", "EKF"])
def test_with_exact_models_the_two_stage_force_beats_the_benchmark(exact_errors, sigma):
    # without table 3.1's errors the benchmark's dynamic model is right, and near the dead
    # centres it gets the crank acceleration from the torque, which the two-stage observer's
    # force stage does not estimate: the kinematic stage must carry it (see the module doc)
    two, bench = exact_errors[f"two-stage {sigma}"], exact_errors[f"benchmark {sigma}"]
    assert two[2] < bench[2], exact_errors


@pytest.mark.parametrize("figure", range(3), ids=FIGURES)
def test_torque_driven_two_stage_ss_ukf_within_table_3_4(torque_errors, figure):
    name = "two-stage SS-UKF"
    assert torque_errors[name][figure] <= TABLE_3_4[name][figure], torque_errors


@pytest.mark.parametrize("figure", range(3), ids=FIGURES)
@pytest.mark.parametrize("sigma", ["SS-UKF", "EKF"])
def test_torque_driven_two_stage_beats_the_benchmark_with_the_same_filter(torque_errors, sigma,
                                                                          figure):
    two, bench = torque_errors[f"two-stage {sigma}"], torque_errors[f"benchmark {sigma}"]
    assert two[figure] < bench[figure], torque_errors


def test_torque_driven_crank_stays_within_the_sensor_scale_and_its_speed_range(torque_sim):
    torque_sim.reset(seed=1)
    signals = torque_sim.run().signals
    torque, omega = signals["drive.torque"][:, 0], signals["plant.omega"][:, 0]
    assert np.max(np.abs(torque)) < 0.5 * 80.0          # the 80 N m sensor's full scale
    assert 5.3 < omega.min() and omega.max() < 7.3      # the range the graph documents
    # the crank turns: about five revolutions in 5 s, through ten dead centres
    assert 4.5 < (signals["plant.theta"][-1, 0] - signals["plant.theta"][0, 0]) / (2 * np.pi) < 5.5


def test_torque_driven_accelerometer_reads_through_the_16_bit_converter(torque_sim):
    # 6 mV per m/s^2 into +-10 V over 16 bits: readings are multiples of 0.0509 m/s^2, and
    # they differ from the true slider acceleration by the 0.05 m/s^2 noise and the rounding
    torque_sim.reset(seed=2)
    signals = torque_sim.run().signals
    step = TorqueSliderCrank().acc_resolution()
    assert step == pytest.approx(20.0 / 2 ** 16 / 6e-3)
    codes = signals["plant.acc_meas"][:, 0] / step
    np.testing.assert_allclose(codes, np.round(codes), atol=1e-6)
    error = signals["plant.acc_meas"][:, 0] - signals["plant.slider_acc"][:, 0]
    assert np.std(error) == pytest.approx(np.sqrt(0.05 ** 2 + step ** 2 / 12), rel=0.05)


def test_torque_driven_plant_energy_grows_by_the_work_of_torque_and_force():
    # released at 6 rad/s under a constant torque and slider force: E(t) - E(0) equals the work
    # T (theta - theta0) + F (xs - xs0), with E from the bodies' geometry computed here
    g = hapflow.Graph(name="torque_slider_crank_energy", rate=1000.0, duration=2.0)
    g.add("tq", Constant(value=[1.5]))
    g.add("f", Constant(value=[-20.0]))
    g.add("plant", TorqueSliderCrank(theta0=0.3, omega0=6.0))
    g.wire("tq.y -> plant.torque")
    g.wire("f.y -> plant.force")
    g.record("plant.theta", "plant.omega", "plant.slider_pos")
    run = hapflow.Simulation(g).run()
    th, om = run.signals["plant.theta"][:, 0], run.signals["plant.omega"][:, 0]
    xs = run.signals["plant.slider_pos"][:, 0]
    energy = _energy(th, om)
    work = 1.5 * (th - th[0]) - 20.0 * (xs - xs[0])
    assert np.ptp(energy) > 10.0                        # gravity and the torque move energy
    np.testing.assert_allclose(energy - energy[0], work, rtol=0, atol=1e-6 * np.ptp(energy))


def test_forward_dynamics_inverts_the_torque_of_a_motion():
    rng = np.random.default_rng(5)
    for th, om, al, force in rng.uniform([-np.pi, -15, -80, -60], [np.pi, 15, 80, 60], (50, 4)):
        torque = crank_torque(th, om, al, force, C, R, H, MC, MR, MS, G)
        assert crank_acceleration(th, om, torque, force, C, R, H, MC, MR, MS, G) == \
            pytest.approx(al, abs=1e-9)


# ------------------------------------------------------------------ speed-profile scenario
@pytest.fixture(scope="module")
def errors() -> dict[str, tuple[float, float, float]]:
    """Worst RMS error over ``SEEDS`` of each estimate, two-stage and benchmark (SS-UKF)."""
    sim = hapflow.Simulation(hapflow.load(ROOT / "graphs" / "slider_crank_two_stage.yaml"))
    return worst_errors(sim, {"two_stage": ("kkf", "fobs", 1),
                              "benchmark": ("bench", "bench", 3)})


@pytest.mark.parametrize("figure", range(2), ids=FIGURES[:2])
def test_speed_profile_two_stage_kinematics_within_table_3_4(errors, figure):
    assert errors["two_stage"][figure] <= TABLE_3_4["two-stage SS-UKF"][figure], errors


@pytest.mark.parametrize("figure", range(2), ids=FIGURES[:2])
def test_speed_profile_two_stage_beats_the_benchmark_on_kinematics(errors, figure):
    assert errors["two_stage"][figure] < 0.5 * errors["benchmark"][figure], errors


def _force_model_error(speed: float) -> float:
    """RMS error, away from the dead centres, of the force solved from table 3.1's dynamic
    model at the exact motion ``speed + 10 % ripple at 2 Hz`` (rad/s) and the noise-free
    torque: what a force observer fed a perfect KKF and a perfect torque sensor converges to
    where the lever ``xs'`` is not small."""
    t = np.arange(5000) * 1e-3
    w, ripple = 4 * np.pi, 0.1 * speed
    th = speed * t + ripple * (1 - np.cos(w * t)) / w
    om, al = speed + ripple * np.sin(w * t), ripple * w * np.cos(w * t)
    force = 50.0 * np.sin(2 * np.pi * t)
    torque = np.array([crank_torque(*x, C, R, H, MC, MR, MS, G) for x in zip(th, om, al, force)])
    terms = np.array([crank_terms(x, *MODEL) for x in th])
    inverse = (terms[:, 0] * al + terms[:, 1] * om ** 2 + terms[:, 2] - torque) / terms[:, 3]
    far = np.array([crank_singularity(x, C, R, H) for x in th]) > 0.3
    return _rms((inverse - force)[far])


def test_table_3_1_errors_alone_put_the_force_model_over_table_3_4_at_12_56_rad_s_not_at_6_28():
    # the velocity term C omega^2 with table 3.1's c and mr errors: the model's force error
    # grows with the square of the crank speed, so table 3.4's 4.30 N is out of reach for any
    # observer at chapter 2's 12.56 rad/s and within reach at the torque scenario's 6.28
    fast, slow = _force_model_error(12.56), _force_model_error(6.28)
    assert fast > 1.5 * TABLE_3_4["two-stage SS-UKF"][2]
    assert slow < 0.6 * TABLE_3_4["two-stage SS-UKF"][2]
    assert 2.5 < fast / slow < 4.0                      # omega^2 plus a speed-free part


def test_the_force_model_is_exact_without_table_3_1_errors():
    # the same inversion with the plant's own parameters: the bound above is the model's
    t = np.arange(0, 2, 1e-3)
    th, om, al = 12.56 * t, np.full_like(t, 12.56), np.zeros_like(t)
    force = 50.0 * np.sin(2 * np.pi * t)
    torque = np.array([crank_torque(*x, C, R, H, MC, MR, MS, G) for x in zip(th, om, al, force)])
    exact = np.array([crank_terms(x, C, R, H, MC, MR, MS, G) for x in th])
    inverse = (exact[:, 0] * al + exact[:, 1] * om ** 2 + exact[:, 2] - torque) / exact[:, 3]
    far = np.array([crank_singularity(x, C, R, H) for x in th]) > 0.3
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


def test_jerk_kinematic_model_is_exact_for_a_cubic_motion_and_its_jacobian_is_its_own():
    # slider_crank_kkf_jerk propagates [theta, omega, alpha, jerk] at constant jerk: exact for
    # theta(t) a cubic; its analytic Jacobian is the transition matrix (f is linear)
    model = MODELS["slider_crank_kkf_jerk"]
    dt, p, w = 1e-3, np.array([C, R, H]), 0
    def motion(t):
        return np.array([0.3 + 6.0 * t + 2.0 * t ** 2 - 5.0 * t ** 3, 6.0 + 4.0 * t - 15.0 * t ** 2,
                         4.0 - 30.0 * t, -30.0])
    out, jac = np.zeros(4), np.zeros(16)
    for t in (0.0, 0.37, 1.2):
        model.f(motion(t), 0, out, 0, p, 0, np.zeros(0), dt, 0, w)
        np.testing.assert_allclose(out, motion(t + dt), rtol=0, atol=1e-12)
    model.fjac(motion(0.2), 0, p, 0, np.zeros(0), dt, 0, jac, 0, w)
    columns = []
    for i in range(4):
        step = np.zeros(4)
        step[i] = 1.0
        hi, lo = np.zeros(4), np.zeros(4)
        model.f(motion(0.2) + step, 0, hi, 0, p, 0, np.zeros(0), dt, 0, w)
        model.f(motion(0.2) - step, 0, lo, 0, p, 0, np.zeros(0), dt, 0, w)
        columns.append((hi - lo) / 2.0)
    np.testing.assert_allclose(jac.reshape(4, 4), np.column_stack(columns), rtol=0, atol=1e-15)
