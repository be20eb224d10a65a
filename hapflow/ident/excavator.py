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

Both run as spherical-simplex UKFs (:class:`SphericalSimplexPoints`, Julier's
n + 2 points, the thesis's SS-UKF) in ``filterpy``: hapflow's own
``UnscentedKalmanFilter`` block takes its models only from the registry in
``hapflow.blocks.estimation_models``, whose names are fixed when that module
is imported.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from filterpy.kalman import UnscentedKalmanFilter
from scipy.linalg import cholesky

import hapflow as hf
from hapflow.blocks.excavator import (ARM_PARAMETERS, DiggingCycle, ExcavatorArm,
                                      ExcavatorServo, accelerations_from_readings, arm_torques,
                                      arm_values, moment_arm)

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


class SphericalSimplexPoints:
    """Julier's spherical simplex sigma points (n + 2) for ``filterpy``'s UKF.

    ``w0`` weights the mean point, the other n + 1 share ``1 - w0``; the unit
    points are built dimension by dimension (Julier 2003) and scaled by the
    lower Cholesky factor of the covariance."""

    def __init__(self, n: int, w0: float = 0.5):
        if not 0.0 <= w0 < 1.0:
            raise ValueError(f"w0 must be in [0, 1), got {w0!r}")
        self.n = n
        w1 = (1.0 - w0) / (n + 1)
        unit = np.zeros((n + 2, n))
        unit[1, 0], unit[2, 0] = -1.0 / math.sqrt(2.0 * w1), 1.0 / math.sqrt(2.0 * w1)
        for j in range(2, n + 1):
            unit[1:j + 1, j - 1] = -1.0 / math.sqrt(j * (j + 1) * w1)
            unit[j + 1, j - 1] = j / math.sqrt(j * (j + 1) * w1)
        self.unit = unit
        self.Wm = np.full(n + 2, w1)
        self.Wm[0] = w0
        self.Wc = self.Wm.copy()

    def num_sigmas(self) -> int:
        return self.n + 2

    def sigma_points(self, x: np.ndarray, P: np.ndarray) -> np.ndarray:
        return x + self.unit @ cholesky(P, lower=True).T


def kinematic_observer(theta_meas: np.ndarray, accel_meas: np.ndarray, dt: float,
                       arm: np.ndarray | None = None, beta: float = 0.25, gamma: float = 0.5,
                       q: tuple[float, float, float] = (1e-12, 1e-8, 1e-2),
                       enc_noise: float = 0.0063, w0: float = 0.5) -> np.ndarray:
    """Joint angles, speeds and accelerations, shape ``(n, 9)``, from the sensors.

    ``q``: process noise variances of angle, speed and acceleration per step;
    the encoders' variance is ``enc_noise^2``."""
    arm = arm_values() if arm is None else arm
    a_new = np.empty(3)

    def fx(s, dt, u):
        th, om, al = s[:3], s[3:6], s[6:]
        accelerations_from_readings(arm, 0, th + dt * om + 0.5 * dt * dt * al, om + dt * al, u,
                                    a_new)
        out = np.empty(9)
        out[:3] = th + dt * om + dt * dt * ((0.5 - beta) * al + beta * a_new)
        out[3:6] = om + dt * ((1.0 - gamma) * al + gamma * a_new)
        out[6:] = a_new
        return out

    ukf = UnscentedKalmanFilter(9, 3, dt, hx=lambda s: s[:3], fx=fx,
                                points=SphericalSimplexPoints(9, w0))
    ukf.x = np.concatenate([theta_meas[0], np.zeros(6)])
    ukf.P = np.diag([enc_noise ** 2] * 3 + [1e-2] * 3 + [1.0] * 3)
    ukf.Q = np.diag([q[0]] * 3 + [q[1]] * 3 + [q[2]] * 3)
    ukf.R = np.eye(3) * enc_noise ** 2
    out = np.empty((len(theta_meas), 9))
    for k in range(len(theta_meas)):
        if k:
            ukf.predict(u=accel_meas[k])
            ukf.update(theta_meas[k])
        out[k] = ukf.x
    return out


def force_observer(kinematics: np.ndarray, force_meas: np.ndarray, dt: float,
                   arm: np.ndarray | None = None, cutoff: float = 10.0,
                   q: tuple[float, float, float, float] = (1e7, 1e4, 1e6, 100.0),
                   force_noise: float = 12.3e3, w0: float = 0.5) -> np.ndarray:
    """Cylinder forces, soil force and payload, shape ``(n, 8)``: ``[F1, F2, F3, Fx, Fz,
    wx, wz, m_p]``, from the kinematic estimate and the force sensors.

    ``q``: process noise variances per step of the cylinder-force model, the soil
    force, its random-walk input and the payload mass."""
    arm = arm_values() if arm is None else arm
    lp = 1.0 - math.exp(-2.0 * math.pi * cutoff * dt)
    g = arm[GRAVITY]

    def fx(s, dt, u):
        out = np.empty(8)
        out[3:5] = s[3:5] + lp * (s[5:7] - s[3:5])
        out[5:] = s[5:]
        th = u[:3]
        tau = arm_torques(arm, 0, th, u[3:6], u[6:], out[3], out[4], out[7], g)
        for j in range(3):
            out[j] = tau[j] / moment_arm(arm, 0, j, th[j])
        return out

    ukf = UnscentedKalmanFilter(8, 3, dt, hx=lambda s: s[:3], fx=fx,
                                points=SphericalSimplexPoints(8, w0))
    ukf.x = np.concatenate([force_meas[0], np.zeros(5)])
    ukf.P = np.diag([force_noise ** 2] * 3 + [1e8] * 4 + [1e5])
    ukf.Q = np.diag([q[0]] * 3 + [q[1]] * 2 + [q[2]] * 2 + [q[3]])
    ukf.R = np.eye(3) * force_noise ** 2
    out = np.empty((len(force_meas), 8))
    for k in range(len(force_meas)):
        if k:
            ukf.predict(u=kinematics[k])
            ukf.update(force_meas[k])
        out[k] = ukf.x
    return out


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
