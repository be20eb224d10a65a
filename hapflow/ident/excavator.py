"""Two-stage estimation on the synthetic excavator of seed 004 section 3.2.2.

The scenario (:func:`excavator_graph`) runs :class:`~hapflow.blocks.ExcavatorArm`
through a digging cycle (:class:`~hapflow.blocks.DiggingCycle`, driven by
:class:`~hapflow.blocks.ExcavatorServo`) with the thesis's sensor noise; see
:mod:`hapflow.blocks.excavator` for every assumed value.  The two observers run
on the recorded sensor signals, as the thesis runs its observers on the
signals exported from its simulator:

1. **Kinematic observer** (:func:`kinematic_observer`): state
   ``[theta, theta', theta'']`` of the three joints, the accelerometers as
   inputs and the encoders as measurements.  Newmark's scheme (eqs. 2.14-2.15,
   ``beta``, ``gamma``) is the numerical derivative of section 2.2.1.2 in the
   prediction, merged with the kinematic constraint as in section 2.2.1.3:
   the new acceleration ``a_k`` solves the accelerometer constraint at the
   predicted configuration with the current readings, and

       theta_k   = theta + dt theta' + dt^2 ((1/2 - beta) theta'' + beta a_k)
       theta'_k  = theta' + dt ((1 - gamma) theta'' + gamma a_k)
       theta''_k = a_k

   (eq. 2.15 rearranged: ``a_k = (theta'_k - theta') / (gamma dt) + (gamma -
   1) / gamma theta''``).  The filter corrects all nine states from the
   encoders.
2. **Force observer** (:func:`force_observer`): state ``[F1, F2, F3, Fx, Fz,
   wx, wz, m_p]``: the cylinder forces, predicted by the inverse dynamic model
   at the kinematic estimate and the current loads (the measurement is the
   three force sensors); the soil's force ``(Fx, Fz)`` on the bucket tip is
   the output of a first-order low-pass at ``cutoff`` (10 Hz, the thesis's
   choice) of a random walk ``(wx, wz)``; the payload mass ``m_p`` a random
   walk.  The thesis says only "a first-order low-pass filter with 10 Hz
   cutoff"; a low-pass of white noise (a Gauss-Markov force) would pull the
   estimate towards zero between corrections, so the filter's input is read
   as a random walk: the band limit without the bias.

Both run as spherical-simplex UKFs (Julier's n + 2 points, the thesis's
SS-UKF) in hapflow's own ``UnscentedKalmanFilter``, on the models
``excavator_kinematic`` and ``excavator_force`` of
:mod:`hapflow.blocks.excavator` (:func:`~hapflow.blocks.estimation.filter_rows`
runs the block's kernels on the recorded rows); ``tests/test_excavator.py``
checks them against filterpy's UKF on the same models.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import hapflow as hf
from hapflow.blocks.estimation import UnscentedKalmanFilter, filter_rows
from hapflow.blocks.excavator import (ARM_PARAMETERS, DiggingCycle, ExcavatorArm,
                                      ExcavatorServo, arm_values)

GRAVITY = ARM_PARAMETERS.index("gravity")
SIGNALS = ("arm.theta", "arm.omega", "arm.alpha", "arm.theta_meas", "arm.accel_meas",
           "arm.force_meas", "servo.force", "cycle.digging", "cycle.payload")


def excavator_graph(duration: float = 20.0, rate: float = 1000.0, seed: int = 1,
                    **cycle: float) -> hf.Graph:
    """The digging scenario: cycle -> servo -> arm, the arm starting on its references."""
    source = DiggingCycle(**cycle)
    start = [source.values[f"{link}_mean"] + source.values[f"{link}_swing"]
             * math.sin(source.values[f"{link}_phase"]) for link in ("boom", "stick", "bucket")]
    g = hf.Graph(name="excavator-digging", rate=rate, duration=duration, seed=seed)
    g.add("cycle", source)
    angles = dict(zip(("boom0", "stick0", "bucket0"), start))
    g.add("servo", ExcavatorServo(**angles))
    g.add("arm", ExcavatorArm(**angles))
    for wire in ("arm.theta -> servo.theta", "arm.omega -> servo.omega", "cycle.ref -> servo.ref",
                 "cycle.ref_vel -> servo.ref_vel", "cycle.ref_acc -> servo.ref_acc",
                 "servo.force -> arm.force", "cycle.digging -> arm.digging",
                 "cycle.payload -> arm.payload"):
        g.wire(wire)
    g.record(*SIGNALS)
    return g


def _diagonal(values: list[float]) -> list[float]:
    return np.diag(values).ravel().tolist()


def kinematic_observer(theta_meas: np.ndarray, accel_meas: np.ndarray, dt: float,
                       arm: np.ndarray | None = None, beta: float = 0.25, gamma: float = 0.5,
                       q: tuple[float, float, float] = (1e-12, 1e-8, 1e-2),
                       enc_noise: float = 0.0063, w0: float = 0.5) -> np.ndarray:
    """Joint angles, speeds and accelerations, shape ``(n, 9)``, from the sensors.

    ``q``: process noise variances of angle, speed and acceleration per step;
    the encoders' variance is ``enc_noise^2``.  Row 0 is the start (the first
    encoder reading, at rest); the filter runs from row 1."""
    arm = arm_values() if arm is None else arm
    ukf = UnscentedKalmanFilter(
        model="excavator_kinematic", sigma="simplex", w0=w0, coeffs=[*arm, beta, gamma],
        x0=[*theta_meas[0], *np.zeros(6)],
        P0=_diagonal([enc_noise ** 2] * 3 + [1e-2] * 3 + [1.0] * 3),
        Q=_diagonal([q[0]] * 3 + [q[1]] * 3 + [q[2]] * 3), R=_diagonal([enc_noise ** 2] * 3))
    ukf.sample_time = dt
    return np.vstack([ukf.matrix("x0"), filter_rows(ukf, theta_meas[1:], accel_meas[1:])])


def force_observer(kinematics: np.ndarray, force_meas: np.ndarray, dt: float,
                   arm: np.ndarray | None = None, cutoff: float = 10.0,
                   q: tuple[float, float, float, float] = (1e7, 1e4, 1e6, 100.0),
                   force_noise: float = 12.3e3, w0: float = 0.5) -> np.ndarray:
    """Cylinder forces, soil force and payload, shape ``(n, 8)``: ``[F1, F2, F3, Fx, Fz,
    wx, wz, m_p]``, from the kinematic estimate and the force sensors.

    ``q``: process noise variances per step of the cylinder-force model, the soil
    force, its random-walk input and the payload mass."""
    arm = arm_values() if arm is None else arm
    ukf = UnscentedKalmanFilter(
        model="excavator_force", sigma="simplex", w0=w0, coeffs=[*arm, cutoff],
        x0=[*force_meas[0], *np.zeros(5)],
        P0=_diagonal([force_noise ** 2] * 3 + [1e8] * 4 + [1e5]),
        Q=_diagonal([q[0]] * 3 + [q[1]] * 2 + [q[2]] * 2 + [q[3]]),
        R=_diagonal([force_noise ** 2] * 3))
    ukf.sample_time = dt
    return np.vstack([ukf.matrix("x0"), filter_rows(ukf, force_meas[1:], kinematics[1:])])


@dataclass
class TwoStageResult:
    """Estimates beside the truth (arrays over the kept samples) and their RMS errors."""

    time: np.ndarray
    kinematics: np.ndarray          # (n, 9) estimate of [theta, theta', theta'']
    truth_kinematics: np.ndarray
    loads: np.ndarray               # (n, 3) estimate of [Fx, Fz, payload force m_p g]
    truth_loads: np.ndarray
    rms: dict[str, np.ndarray]      # 'theta', 'omega', 'alpha' (3 each), 'loads' (3)


def two_stage(signals: dict[str, np.ndarray], time: np.ndarray, skip: float = 1.0,
              **options) -> TwoStageResult:
    """Run both observers on a recording of :func:`excavator_graph` and score them against
    the truth, leaving out the first ``skip`` seconds (the filters' start)."""
    dt = float(time[1] - time[0])
    kin = kinematic_observer(signals["arm.theta_meas"], signals["arm.accel_meas"], dt,
                             **options.get("kinematic", {}))
    est = force_observer(kin, signals["arm.force_meas"], dt, **options.get("force", {}))
    g = arm_values()[GRAVITY]
    truth_kin = np.hstack([signals["arm.theta"], signals["arm.omega"], signals["arm.alpha"]])
    truth_loads = np.hstack([signals["cycle.digging"], signals["cycle.payload"] * g])
    loads = np.hstack([est[:, 3:5], est[:, 7:8] * g])
    keep = time >= skip

    def rms(a, b):
        return np.sqrt(np.mean((a[keep] - b[keep]) ** 2, axis=0))

    errors = rms(kin, truth_kin)
    return TwoStageResult(time[keep], kin[keep], truth_kin[keep], loads[keep], truth_loads[keep],
                          {"theta": errors[:3], "omega": errors[3:6], "alpha": errors[6:],
                           "loads": rms(loads, truth_loads)})
